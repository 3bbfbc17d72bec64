"""`vfgym init NAME [--kind game|tool|sandboxed]`: a new environment package, ready to go.

It writes, into `NAME/` (or `--dir`):

- `pyproject.toml`, registering the loader in the `vfgym.environments` entry-point
  group, so `pip install -e NAME` makes `vfgym eval NAME`, `vf.load_environment` and
  `gym.make` find it;
- `<module>.py`, a small working environment of the chosen kind (a `TextGame`, a
  `ToolEnv` or a `SandboxEnv`) with its reference and random policies and the
  module constants vfgym reads (`GYM_ID`, `KIND`, `NEEDS_SANDBOX`, `REWARD_RANGE`);
- `tests/test_<module>.py`, which runs `vfgym check` on it;
- `README.md`, with the commands to install, test, evaluate and play it.

Why: verifiers has `vf-init` and OpenEnv `openenv init`; without one, a new author's
first hour went into reading the kit's source for the pyproject and the hooks. The
package passes its own test as created, so every later failure is the author's
change, not the scaffold.
"""

from __future__ import annotations

import keyword
import re
from importlib import resources
from pathlib import Path
from string import Template

from vfgym.cli._support import EXIT_USAGE, CommandError
from vfgym.envs.registry import camel_case, registered_names

#: What each kind is built from, and the one-line summary its README and module open with.
KINDS = {
    "game": ("game.py.tmpl", "A text game: find the hidden letter from earlier/later hints."),
    "tool": ("tool.py.tmpl", "A tool task: look a capital up with a tool, then answer."),
    "sandboxed": (
        "sandboxed.py.tmpl",
        "A sandboxed tool task: compute with Python in a Docker sandbox, then answer.",
    ),
}

_NAME = re.compile(r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$")


def check_name(name: str) -> str:
    """`name` if it can be an environment's registered name, a distribution name and
    (with '-' as '_') a module name; otherwise a CommandError saying what to use."""
    if not _NAME.match(name):
        raise CommandError(
            f"{name!r} cannot name an environment package: use lowercase letters, digits "
            "and single hyphens or underscores, starting with a letter (e.g. word-ladder)",
            EXIT_USAGE,
        )
    module = module_name(name)
    if keyword.iskeyword(module):
        raise CommandError(f"{name!r} is a Python keyword; pick another name", EXIT_USAGE)
    if name in registered_names():
        raise CommandError(
            f"an environment named {name!r} is already registered (`vfgym list`); pick "
            "another name, so `vfgym eval` finds yours",
            EXIT_USAGE,
        )
    return name


def module_name(name: str) -> str:
    """The module the environment lives in: `word-ladder` -> `word_ladder`."""
    return name.replace("-", "_")


def render(template: str, **values: str) -> str:
    """A template of `vfgym.cli.templates` with its `${...}` placeholders filled in."""
    text = (resources.files("vfgym.cli.templates") / template).read_text(encoding="utf-8")
    return Template(text).substitute(values)


def init_package(name: str, *, kind: str = "game", directory: str | Path | None = None) -> Path:
    """Write the package for environment `name` of `kind`; returns its folder.

    Refuses (CommandError) a name that cannot be a package, an unknown kind, and a
    folder that exists and is not empty: nothing of the user's is ever overwritten.
    """
    check_name(name)
    if kind not in KINDS:
        raise CommandError(f"--kind must be one of {', '.join(KINDS)}, not {kind!r}", EXIT_USAGE)
    root = Path(directory) if directory is not None else Path(name)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise CommandError(
            f"{root} already exists and is not an empty folder; give another name or "
            "--dir, or remove it first",
            EXIT_USAGE,
        )
    template, summary = KINDS[kind]
    module = module_name(name)
    values = {
        "name": name,
        "module": module,
        "kind": kind,
        "class_name": camel_case(name) + "Env",
        "gym_id": f"{module.replace('_', '-')}/{camel_case(name)}-v0",
        "summary": summary,
    }
    files = {
        root / "pyproject.toml": render("pyproject.toml.tmpl", **values),
        root / "README.md": render("README.md.tmpl", **values),
        root / f"{module}.py": render(template, **values),
        root / "tests" / f"test_{module}.py": render("test_env.py.tmpl", **values),
    }
    try:
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"cannot write {root}: {exc.strerror or exc}") from None
    return root


__all__ = ["KINDS", "check_name", "init_package", "module_name", "render"]
