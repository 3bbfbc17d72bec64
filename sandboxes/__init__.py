"""Build contexts of the sandbox images, installed as `vfgym.sandboxes` package data."""
