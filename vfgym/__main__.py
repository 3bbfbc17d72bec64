"""`python -m vfgym` runs the vfgym command."""

from vfgym.cli import main

raise SystemExit(main())
