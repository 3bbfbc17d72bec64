"""A site directory holding the verifiers-style environments of `verifiers_envs/`, as
an installed package would: the modules, and a dist-info whose entry points register
most of them with vfgym (one, `vf_continuation`, is found by module name, the way
verifiers 0.1.x found an installed environment)."""

from __future__ import annotations

import importlib
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vfgym.compat import uninstall_verifiers_alias

SOURCES = Path(__file__).resolve().parent / "verifiers_envs"

#: Entry-point name -> module of each registered environment.
REGISTERED = {
    "boxed-sums": "vf_boxed_sums",
    "xml-countdown": "vf_xml_countdown",
    "tool-lookup": "vf_tool_lookup",
    "judged-group": "vf_judged_group",
    "math-boxed": "vf_math_boxed",
    "quiz-session": "vf_quiz_session",
}
UNREGISTERED = "vf-continuation"


def build_site(directory: Path) -> Path:
    """Write the modules and their dist-info into `directory`; return it."""
    directory.mkdir(parents=True, exist_ok=True)
    for source in SOURCES.glob("*.py"):
        shutil.copy(source, directory / source.name)
    dist_info = directory / "vf_compat_examples-0.1.0.dist-info"
    dist_info.mkdir(exist_ok=True)
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: vf-compat-examples\nVersion: 0.1.0\n", encoding="utf-8"
    )
    lines = ["[vfgym.environments]"] + [
        f"{name} = {module}:load_environment" for name, module in REGISTERED.items()
    ]
    (dist_info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return directory


@contextmanager
def site_on_path(directory: Path) -> Iterator[Path]:
    """The site importable in this process; afterwards its modules, and the alias
    they caused, are gone again."""
    build_site(directory)
    sys.path.insert(0, str(directory))
    importlib.invalidate_caches()
    try:
        yield directory
    finally:
        sys.path.remove(str(directory))
        for name in [n for n in sys.modules if n.startswith("vf_") or n == "policy"]:
            del sys.modules[name]
        uninstall_verifiers_alias()
        importlib.invalidate_caches()
