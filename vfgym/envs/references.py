"""Environments named by where their loader lives rather than by a registered name.

Besides a name from the `vfgym.environments` entry-point group, every place that
takes an environment (`load_environment`, `vfgym eval | play | check`, and so every
command built on the registry) takes:

- `module:function` — a loader in an importable module, e.g.
  `my_games.word_ladder:load_environment`. A module that is not installed is also
  looked for in the current directory, as `python -m` would find it, so an author can
  try an environment before writing a pyproject;
- a path to a Python file, `path/to/word_ladder.py` (its `load_environment`) or
  `path/to/word_ladder.py:make_env` (another function in it).

Why: the first thing an author has is a module, not an installed package; asking
for `pip install -e` before the first run sent every new author to the source.

A module that exists but fails to import raises `EnvironmentImportError` carrying the
module's own error; when the cause is a package shadowed by a folder without an
`__init__.py` (a checkout's folder next to the script), the message says so.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from vfgym.compat.alias import with_verifiers_alias
from vfgym.errors import EnvironmentImportError, HollowPackageError, UnknownEnvironmentError

#: The function a file or module reference means when it names none.
DEFAULT_LOADER = "load_environment"


@dataclass(frozen=True)
class LoaderReference:
    """An environment named by where its loader lives: the module and the function."""

    text: str
    module: ModuleType
    loader: Callable[..., Any]
    target: str


def is_reference(text: str) -> bool:
    """True when `text` names a loader by module or file rather than a registered name
    (registered names hold neither ':' nor a '.py' ending)."""
    return ":" in text or _file_part(text) is not None


def is_file_reference(text: str) -> bool:
    """True when `text` names a Python file: `path.py` or `path.py:function`."""
    return _file_part(text) is not None


def _file_part(text: str) -> tuple[str, str] | None:
    """`(path, function)` when `text` is `path.py` or `path.py:function`, else None."""
    if text.endswith(".py"):
        return text, DEFAULT_LOADER
    path, colon, function = text.rpartition(":")
    if colon and path.endswith(".py"):
        return path, function or DEFAULT_LOADER
    return None


def resolve_reference(text: str) -> LoaderReference:
    """Import the module or file `text` names and find its loader.

    Raises `UnknownEnvironmentError` when there is no such module, file or function
    (with what there is instead), `EnvironmentImportError` when the module exists but
    fails to import, and `TypeError` when the name is not a function.
    """
    file_part = _file_part(text)
    if file_part is not None:
        path, function = file_part
        module = _import_file(text, Path(path))
        target = f"{path}:{function}"
    else:
        module_name, _, function = text.partition(":")
        function = function or DEFAULT_LOADER
        module = _import_module(text, module_name)
        target = f"{module_name}:{function}"
    loader: Any = module
    for part in function.split("."):
        if not hasattr(loader, part):
            loaders = sorted(
                name
                for name, value in vars(module).items()
                if callable(value) and name.startswith(("load", "make"))
            )
            found = f" (it has: {', '.join(loaders)})" if loaders else ""
            raise UnknownEnvironmentError(
                f"{text!r}: module {module.__name__!r} has no {function!r}{found}; name the "
                f"function that builds the environment, e.g. '{_shown(text)}:{DEFAULT_LOADER}'"
            )
        loader = getattr(loader, part)
    if not callable(loader):
        raise TypeError(
            f"{text!r} names a {type(loader).__name__}, not a function; name the function "
            "that builds the environment"
        )
    return LoaderReference(text=text, module=module, loader=loader, target=target)


def _shown(text: str) -> str:
    return text.rpartition(":")[0] if ":" in text else text


def _import_file(text: str, path: Path) -> ModuleType:
    """The module of a Python file, imported under its file name (as `python file.py`
    would import a neighbour), once: a second reference to the same file reuses it."""
    resolved = path.expanduser().resolve()
    if not resolved.is_file():
        raise UnknownEnvironmentError(
            f"{text!r}: there is no file {str(path)!r} (looked in {resolved.parent}); give "
            "the path of the .py file that defines load_environment"
        )
    name = resolved.stem
    if not name.isidentifier():
        raise UnknownEnvironmentError(
            f"{text!r}: {resolved.name!r} is not a name Python can import; rename the file "
            "to letters, digits and underscores (e.g. word_ladder.py)"
        )
    existing = sys.modules.get(name)
    if existing is not None:
        if Path(getattr(existing, "__file__", "") or "").resolve() == resolved:
            return existing
        raise UnknownEnvironmentError(
            f"{text!r}: a different module named {name!r} is already imported "
            f"({getattr(existing, '__file__', None) or 'built in'}); rename {resolved.name}"
        )
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise UnknownEnvironmentError(f"{text!r}: {resolved} cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    try:
        with_verifiers_alias(lambda: spec.loader.exec_module(module))  # type: ignore[union-attr]
    except Exception as exc:
        sys.modules.pop(name, None)
        raise EnvironmentImportError(text, str(resolved), exc, hollow_package_hint(exc)) from exc
    return module


def _import_module(text: str, module_name: str) -> ModuleType:
    if not all(part.isidentifier() for part in module_name.split(".")):
        raise UnknownEnvironmentError(
            f"{text!r}: {module_name!r} is not a module name; give 'package.module:function' "
            "or the path of a .py file"
        )
    top = module_name.split(".")[0]
    if top not in sys.modules and _find_spec(top) is None:
        here = str(Path.cwd())
        if (Path(here) / top).is_dir() or (Path(here) / f"{top}.py").is_file():
            # As `python -m` would: the current directory, after everything installed.
            sys.path.append(here)
    try:
        return with_verifiers_alias(lambda: importlib.import_module(module_name))
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            hint = hollow_package_hint(exc)
            if hint:
                raise EnvironmentImportError(text, module_name, exc, hint) from exc
            raise UnknownEnvironmentError(
                f"{text!r}: no module named {exc.name!r} can be imported (not installed, and "
                f"not in the current directory {Path.cwd()}); run from the folder that holds "
                "it, install its package (pip install -e .), or give the path of its .py file"
            ) from None
        raise EnvironmentImportError(text, module_name, exc, hollow_package_hint(exc)) from exc
    except Exception as exc:
        raise EnvironmentImportError(text, module_name, exc, hollow_package_hint(exc)) from exc


def _find_spec(name: str) -> Any:
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def hollow_package_hint(exc: BaseException) -> str:
    """What to do when `exc` comes from a vfgym package (`vfgym`, `vfgym.games`, ...)
    imported as a hollow namespace package: a folder of its name without `__init__.py`
    found on sys.path before the installed package (a checkout's folder next to a
    script, say). "" otherwise.

    Python imports such a folder without complaint; every module of the real package
    then fails to import, which reads as a broken install rather than a stray folder.
    """
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        name = getattr(cause, "name", None) if isinstance(cause, ModuleNotFoundError) else None
        if name:
            parts = name.split(".")
            for end in range(1, len(parts)):
                if parts[0] != "vfgym":  # other namespace packages are meant to be so
                    break
                package = sys.modules.get(".".join(parts[:end]))
                if package is not None and is_hollow(package):
                    return _hollow_message(package)
        cause = cause.__cause__ or cause.__context__
    return ""


def check_vfgym_package() -> None:
    """Raise `HollowPackageError` when `vfgym` itself was imported as a hollow namespace
    package (its `__init__.py` never ran), saying which folder hides it."""
    package = sys.modules.get("vfgym")
    if package is not None and is_hollow(package):
        raise HollowPackageError(_hollow_message(package))


def is_hollow(module: ModuleType) -> bool:
    """True for a namespace package: a folder imported with no `__init__.py` and no file."""
    return getattr(module, "__file__", None) is None and hasattr(module, "__path__")


def _hollow_message(package: ModuleType) -> str:
    folders = ", ".join(str(path) for path in getattr(package, "__path__", []))
    return (
        f"{package.__name__!r} was imported as an empty namespace package from {folders}: a "
        f"folder named {package.__name__.rpartition('.')[2]!r} with no __init__.py, found on "
        "sys.path (often the current directory) before the installed package, hides it. Run "
        "from another directory, or rename or remove that folder"
    )


__all__ = [
    "DEFAULT_LOADER",
    "LoaderReference",
    "check_vfgym_package",
    "hollow_package_hint",
    "is_file_reference",
    "is_hollow",
    "is_reference",
    "resolve_reference",
]
