"""Why an environment refused an argument name, in terms of the loader that took it.

A loader that takes `**kwargs` passes names it does not know on to what it builds,
whose constructor alone can refuse them, with a TypeError that lists neither the
loader's parameters nor, often, its own. `call_loader` turns such a refusal into an
`UnexpectedArgumentError` that names both and the closest accepted name.
"""

from __future__ import annotations

import difflib
import inspect
import re
import traceback
from collections.abc import Iterable
from types import FrameType
from typing import Any

from vfgym.errors import UnexpectedArgumentError


def by_name(parameters: Iterable[inspect.Parameter]) -> list[str]:
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def closest_names(unknown: Iterable[str], accepted: list[str]) -> dict[str, str]:
    close = {name: difflib.get_close_matches(name, accepted, n=1, cutoff=0.6) for name in unknown}
    return {name: found[0] for name, found in close.items() if found}


def call_loader(
    env_id: str, loader: Any, signature: inspect.Signature | None, args: dict[str, Any]
) -> Any:
    """`loader(**args)`, with a name it passed on through `**kwargs` and that was refused
    further in turned into an `UnexpectedArgumentError` naming what each one takes.

    Only the constructor can tell such a name is wrong, and its TypeError says neither
    which parameters the loader itself has nor, often, which ones it has.
    """
    if signature is None:  # nothing to tell about the loader: its error as it is
        return loader(**args)
    named = by_name(signature.parameters.values())
    passed_on = [name for name in args if name not in named]
    try:
        return loader(**args)
    except TypeError as exc:
        if twice := _given_twice(exc, passed_on):
            raise TypeError(
                f"environment {env_id!r}: its loader {_loader_name(loader)} sets {twice!r} "
                f"itself when it builds the environment, so it cannot be given as an "
                f"argument too; leave it out (the loader takes: {', '.join(named) or 'none'})"
            ) from exc
        refused = _refused_names(exc, passed_on)
        if not refused:
            raise
        raise _passed_on_error(env_id, loader, named, refused, _refuser(exc)) from exc


def _given_twice(exc: TypeError, passed_on: list[str]) -> str | None:
    """The name passed on through `**kwargs` that the loader also passes itself, as
    Python's "got multiple values for keyword argument" says; None for other errors."""
    text = str(exc)
    if "got multiple values for keyword argument" not in text:
        return None
    return next((name for name in passed_on if text.endswith(repr(name))), None)


def _loader_name(loader: Any) -> str:
    where = getattr(loader, "__module__", None)
    return f"{where}.{loader.__qualname__}" if where else repr(loader)


def _refused_names(exc: TypeError, passed_on: list[str]) -> list[str]:
    """The names passed on through `**kwargs` that `exc` says were unexpected."""
    text = str(exc)
    if "unexpected keyword argument" not in text:
        return []
    return [name for name in passed_on if repr(name) in text]


def _passed_on_error(
    env_id: str, loader: Any, named: list[str], refused: list[str], target: Any
) -> UnexpectedArgumentError:
    loader_name = _loader_name(loader)
    target_params = _parameters_of(target) if target is not None else None
    if target_params is None:
        onward = "what it builds, whose parameters could not be read"
    else:
        onward = f"{_display_name(target)}, which takes: {', '.join(target_params) or 'none'}"
    accepted = (
        f"its loader {loader_name} takes: {', '.join(named) or 'none'}, "
        f"and passes other arguments on to {onward}"
    )
    return UnexpectedArgumentError(
        env_id, refused, accepted, closest_names(refused, named + (target_params or []))
    )


#: Python's own words for a call given a keyword it has no parameter for.
_PYTHON_REFUSAL = re.compile(r"^([\w.<>]+)\(\) got an unexpected keyword argument ")


def _refuser(exc: TypeError) -> Any:
    """The class or function that refused the argument, or None if it cannot be told.

    Python's own message names the callable, looked up where the call was made; a
    constructor that checks its keywords itself (an `Environment`'s does) raised from
    inside its `__init__`, whose `self` tells the class being built.
    """
    frames = [frame for frame, _ in traceback.walk_tb(exc.__traceback__)]
    if not frames:
        return None
    match = _PYTHON_REFUSAL.match(str(exc))
    if match:
        return _resolve(match.group(1), frames[-1])
    for frame in reversed(frames):
        if frame.f_code.co_name == "__init__" and "self" in frame.f_locals:
            return type(frame.f_locals["self"])
    return None


def _resolve(qualname: str, frame: FrameType) -> Any:
    """The callable `qualname` names, as seen from `frame`: `Board.__init__` is the class
    Board; a name inside a function (`f.<locals>.Board`) is looked up in its locals."""
    parts = qualname.split(".")
    if "<locals>" in parts:
        parts = parts[len(parts) - parts[::-1].index("<locals>") :]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if not parts:
        return None
    found = frame.f_locals.get(parts[0], frame.f_globals.get(parts[0]))
    for part in parts[1:]:
        found = getattr(found, part, None)
    return found if callable(found) else None


def _parameters_of(target: Any) -> list[str] | None:
    """The names `target` takes by keyword; for a class, its `__init__`'s and, while
    each passes `**kwargs` on, its bases'. None when no signature can be read."""
    if not isinstance(target, type):
        try:
            return by_name(inspect.signature(target).parameters.values())
        except (TypeError, ValueError):
            return None
    names: list[str] = []
    for cls in target.__mro__[:-1]:  # object's __init__ takes nothing
        init = cls.__dict__.get("__init__")
        if init is None:
            continue
        try:
            parameters = list(inspect.signature(init).parameters.values())[1:]  # self
        except (TypeError, ValueError):
            return names or None
        names += [name for name in by_name(parameters) if name not in names]
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            break
    return names


def _display_name(target: Any) -> str:
    return getattr(target, "__name__", None) or repr(target)


__all__ = ["UnexpectedArgumentError", "by_name", "call_loader", "closest_names"]
