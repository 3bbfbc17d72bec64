"""The runner's seccomp filter module, loaded from the image's build context.

It is not an importable package on the host (it runs inside the sandbox image), so
tests load it by path, as the image has it.
"""

from __future__ import annotations

import importlib.util
from importlib import resources
from types import ModuleType


def runner_filter_module() -> ModuleType:
    """`sandboxes/python/vfgym_runner/seccomp_filter.py`, freshly loaded."""
    path = resources.files("vfgym.sandboxes") / "python" / "vfgym_runner" / "seccomp_filter.py"
    spec = importlib.util.spec_from_file_location("vfgym_runner_seccomp_filter", str(path))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
