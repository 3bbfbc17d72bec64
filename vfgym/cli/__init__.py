"""The `vfgym` command. `main` dispatches to one module per subcommand (`eval`, `play`,
`sandbox`; `list` and `view` are small enough to live in `main`); `_support` holds what
they share: user errors with exit codes, JSON options, loading an environment."""
