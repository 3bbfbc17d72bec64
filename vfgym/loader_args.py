"""Checking an environment loader's keyword arguments against its type hints.

Arguments often arrive as JSON (`vfgym eval -a '{"max_turns": "5"}'`, a Gym id's
kwargs from a config file). A loader that took `"5"` for `max_turns` would build
an environment whose every rollout then fails on `'<' not supported`; a loader
given `{"cpus": 2}` for a `SandboxConfig` would fail deep inside the first tool
call. So before the loader runs, each argument is compared with its parameter's
annotation: a plain type (int, float, str, bool, None, and unions, lists, tuples,
dicts and sets of them) must match, a JSON object given for a dataclass parameter
is built into that dataclass, and anything the check cannot judge (Any, callables,
other classes) is passed through unchecked.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

#: Types whose values arrive from JSON as they are.
_PLAIN = (bool, int, float, str, type(None))
#: Containers, by the origin of their annotation; JSON has lists for tuples and sets.
_CONTAINERS: dict[Any, tuple[type, ...]] = {
    list: (list, tuple),
    tuple: (list, tuple),
    set: (list, tuple, set, frozenset),
    frozenset: (list, tuple, set, frozenset),
    dict: (dict,),
}


def checked_env_args(
    loader: Callable[..., Any], env_id: str, env_args: Mapping[str, Any]
) -> dict[str, Any]:
    """`env_args` ready for `loader`: checked against its hints, dataclasses built.

    Raises `TypeError` naming the argument, the type it needs and an example.
    """
    try:
        hints = typing.get_type_hints(loader)
    except Exception:  # hints that name what the module imports only for type checkers
        return dict(env_args)
    out = {}
    for name, value in env_args.items():
        hint = hints.get(name)
        out[name] = value if hint is None else _checked(env_id, name, hint, value)
    return out


def _checked(env_id: str, name: str, hint: Any, value: Any) -> Any:
    options = _union_members(hint)
    if isinstance(value, Mapping):
        for option in options:
            if dataclasses.is_dataclass(option) and isinstance(option, type):
                return _build(env_id, name, option, value)
    verdicts = [_matches(option, value) for option in options]
    if True in verdicts or None in verdicts:  # a match, or a type this cannot judge
        return value
    raise TypeError(
        f"environment {env_id!r}: argument {name!r} must be {_describe(hint)}, not "
        f"{value!r} ({type(value).__name__})"
    )


def _union_members(hint: Any) -> tuple[Any, ...]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def _matches(hint: Any, value: Any) -> bool | None:
    """True or False when the hint is one this judges; None when it is not."""
    if hint is Any:
        return None
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint in _PLAIN:
        return isinstance(value, hint)
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if origin in _CONTAINERS:
        return isinstance(value, _CONTAINERS[origin])
    if hint in _CONTAINERS:
        return isinstance(value, _CONTAINERS[hint])
    return None


def _build(env_id: str, name: str, cls: type, value: Mapping[str, Any]) -> Any:
    fields = [f.name for f in dataclasses.fields(cls) if f.init]
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise TypeError(
            f"environment {env_id!r}: argument {name!r} ({cls.__name__}) has no field(s) "
            f"{unknown}; its fields are: {', '.join(fields)}"
        )
    return cls(**value)


def _describe(hint: Any) -> str:
    names = []
    for option in _union_members(hint):
        if option is type(None):
            names.append("null")
        elif typing.get_origin(option) is typing.Literal:
            names.append(" or ".join(repr(v) for v in typing.get_args(option)))
        else:
            names.append(getattr(option, "__name__", str(option)))
    return " or ".join(names)
