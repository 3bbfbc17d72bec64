"""`python -m vfgym.sandbox build|doctor|gc`."""

import sys

from vfgym.sandbox.cli import main

if __name__ == "__main__":
    sys.exit(main())
