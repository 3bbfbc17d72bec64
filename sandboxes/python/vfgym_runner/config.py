"""Settings every part of the runner shares: the protocol version, the workspace,
and how the runner starts itself again as the Python session.

Kept apart so that the session imports none of the runner's other parts.
"""

from __future__ import annotations

import os

PROTOCOL_VERSION = 2
WORKSPACE = os.environ.get("VFGYM_WORKSPACE", "/workspace")
#: The entry point (runner.py, beside this package), which the session is started as.
RUNNER_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "runner.py")
#: The argument that makes runner.py start as the Python session (see start_kernel).
KERNEL_FLAG = "--kernel"
