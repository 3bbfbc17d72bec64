"""`python -m vfgym` runs the vfgym command.

A Ctrl-C while the command's modules load ends as one during the command does
(see `vfgym.cli.main.main`): "Interrupted." and exit code 130, not a traceback.
"""

import sys

try:
    from vfgym.cli.main import main
except KeyboardInterrupt:
    print("\nInterrupted.", file=sys.stderr)
    raise SystemExit(130) from None  # vfgym.cli._support.EXIT_INTERRUPTED, which may not be loaded

raise SystemExit(main())
