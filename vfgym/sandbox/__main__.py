"""`python -m vfgym.sandbox build|doctor|gc`."""

import sys

from vfgym.cli.sandbox import main

if __name__ == "__main__":
    sys.exit(main())
