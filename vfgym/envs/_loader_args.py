"""Checking an environment loader's keyword arguments against its type hints.

Arguments often arrive as JSON (`vfgym eval -a '{"max_turns": "5"}'`, a Gym id's
kwargs from a config file). A loader that took `"5"` for `max_turns` would build
an environment whose every rollout then fails on `'<' not supported`; a loader
given `{"cpus": 2}` for a `SandboxConfig` would fail deep inside the first tool
call. So before the loader runs, each argument is compared with its parameter's
annotation: a plain type (int, float, str, bool, None, Literal, and unions, lists,
tuples, dicts and sets of them, items included) must match, a JSON object given
for a dataclass parameter is built into that dataclass (its fields checked the
same way), and anything the check cannot judge (Any, callables, other classes) is
passed through unchecked.

JSON has no tuples or sets, so a JSON list given for a `tuple[...]`, `set[...]` or
`frozenset[...]` parameter arrives as one (a loader that hashes or compares it
would otherwise meet a list). `null` is accepted for a parameter whose default is
None, even when its annotation omits `| None`: it is the default.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import types
import typing
from collections.abc import Callable, Collection, Mapping
from typing import Any, cast

#: Types whose values arrive from JSON as they are.
_PLAIN = (bool, int, float, str, type(None))
#: Containers, by the origin of their annotation; JSON has lists for tuples and sets.
_CONTAINERS: dict[Any, tuple[type[Collection[Any]], ...]] = {
    list: (list, tuple),
    tuple: (list, tuple),
    set: (list, tuple, set, frozenset),
    frozenset: (list, tuple, set, frozenset),
    dict: (dict,),
}
#: Containers a JSON list is turned into, when the annotation asks for one of them.
_BUILT_FROM_LISTS = (tuple, set, frozenset)
#: Values shown in an example when neither the value given nor the default helps.
_SAMPLES: dict[Any, Any] = {int: 1, float: 0.5, str: "text", bool: True, type(None): None}


class _BadObject(Exception):
    """A JSON object that cannot build its dataclass (unknown or missing fields)."""


class _Refused(Exception):
    """`value`, at `path` (the argument's name, or an item or field of it), is no `hint`;
    `detail` says more when the type alone does not (a tuple's length)."""

    def __init__(self, path: str, hint: Any, value: Any, detail: str = "") -> None:
        super().__init__(path)
        self.path, self.hint, self.value, self.detail = path, hint, value, detail


def checked_env_args(
    loader: Callable[..., Any], env_id: str, env_args: Mapping[str, Any]
) -> dict[str, Any]:
    """`env_args` ready for `loader`: checked against its hints, dataclasses built,
    JSON lists turned into the tuples and sets the hints ask for.

    Raises `TypeError` naming the argument, the type it needs and an example.
    """
    try:
        hints = typing.get_type_hints(loader)
    except Exception:  # hints that name what the module imports only for type checkers
        return dict(env_args)
    defaults = _defaults(loader)
    out = {}
    for name, value in env_args.items():
        hint = hints.get(name)
        if hint is None or (value is None and name in defaults and defaults[name] is None):
            out[name] = value
            continue
        try:
            out[name] = _fit(hint, value, name)
        except _Refused as refused:
            raise TypeError(_message(env_id, name, hint, value, defaults, refused)) from None
        except _BadObject as exc:
            raise TypeError(f"environment {env_id!r}: {exc}") from None
    return out


def _defaults(loader: Callable[..., Any]) -> dict[str, Any]:
    try:
        parameters = inspect.signature(loader).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in parameters if p.default is not p.empty}


def _message(
    env_id: str,
    name: str,
    hint: Any,
    value: Any,
    defaults: Mapping[str, Any],
    refused: _Refused,
) -> str:
    head = f"environment {env_id!r}: argument {name!r} must be {_describe(hint)}"
    if refused.path != name:  # an item or a field is what does not fit
        return (
            f"{head}: {refused.path} must be {_describe(refused.hint)}, not "
            f"{refused.value!r} ({type(refused.value).__name__}){refused.detail}"
        )
    text = f"{head}, not {value!r} ({type(value).__name__}){refused.detail}"
    example = _example(hint, value, defaults.get(name, inspect.Parameter.empty))
    if example is not inspect.Parameter.empty:
        text += f"; e.g. {json.dumps({name: example})}"
    for option in _union_members(hint):
        if _dataclass(option):
            text += (
                f"; give {option.__name__} as a JSON object of its fields "
                f"({', '.join(_init_fields(option))})"
            )
    return text


def _example(hint: Any, value: Any, default: Any) -> Any:
    """A JSON value that fits `hint`, for the error message: what `value` meant if it
    is a string holding one ("5") or a whole float (5.0), else the default, else a
    sample of the first type; `inspect.Parameter.empty` when there is none to give."""
    candidates = []
    if isinstance(value, str):
        try:
            candidates.append(json.loads(value))
        except ValueError:
            pass
    if isinstance(value, float) and value.is_integer():
        candidates.append(int(value))
    if isinstance(value, _PLAIN):
        candidates.append([value])  # one item given for a list of them
    if default is not inspect.Parameter.empty and default is not None:
        candidates.append(default)
    options = _union_members(hint)
    for option in options:
        if option in _SAMPLES and (option is not type(None) or len(options) == 1):
            candidates.append(_SAMPLES[option])
        elif typing.get_origin(option) is typing.Literal and typing.get_args(option):
            candidates.append(typing.get_args(option)[0])
    for candidate in candidates:
        try:
            _fit(hint, candidate, "")
            json.dumps(candidate, allow_nan=False)
        except Exception:  # _Refused, or a dataclass refusing it: no example, then
            continue
        return list(candidate) if isinstance(candidate, tuple | set | frozenset) else candidate
    return inspect.Parameter.empty


def _fit(hint: Any, value: Any, path: str) -> Any:
    """`value` as the parameter receives it; raises `_Refused` when it does not fit.

    Options that take the value as it is win over ones that would convert it (a list
    for `tuple[str, ...] | list[str]` stays a list).
    """
    options = _union_members(hint)
    if isinstance(value, Mapping):
        for option in options:
            if _dataclass(option):
                return _build(option, value, path)
    telling: _Refused | None = None
    for convert in (False, True):
        for option in options:
            try:
                return _fit_one(option, value, path, convert)
            except _Refused as refused:
                # A container fitted but an item of it did not, or a tuple's length:
                # more to the point than "must be X or Y".
                if telling is None and (refused.path != path or refused.detail):
                    telling = refused
    if telling is not None and telling.path == path:
        raise _Refused(path, hint, value, telling.detail)
    raise telling or _Refused(path, hint, value)


def _fit_one(hint: Any, value: Any, path: str, convert: bool) -> Any:
    if hint is Any:
        return value
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
        raise _Refused(path, hint, value)
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _Refused(path, hint, value)
    if hint in _PLAIN:
        if isinstance(value, hint):
            return value
        raise _Refused(path, hint, value)
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        if any(_same_literal(value, choice) for choice in typing.get_args(hint)):
            return value
        raise _Refused(path, hint, value)
    if _dataclass(hint):
        if isinstance(value, hint):
            return value
        raise _Refused(path, hint, value)
    if origin in _CONTAINERS or hint in _CONTAINERS:
        return _fit_container(hint, origin or hint, value, path, convert)
    return value  # a type this cannot judge


def _same_literal(value: Any, choice: Any) -> bool:
    """`value == choice`, without True standing for 1 or 1.0 for 1 (JSON keeps them apart)."""
    if isinstance(value, bool) or isinstance(choice, bool):
        return isinstance(value, bool) and isinstance(choice, bool) and value == choice
    if isinstance(value, int | float) or isinstance(choice, int | float):
        return type(value) is type(choice) and value == choice
    return bool(value == choice)


def _fit_container(hint: Any, origin: type, value: Any, path: str, convert: bool) -> Any:
    if not isinstance(value, _CONTAINERS[origin]):
        raise _Refused(path, hint, value)
    rebuild = not isinstance(value, origin) and isinstance(value, list)
    if rebuild and not (convert and origin in _BUILT_FROM_LISTS):
        raise _Refused(path, hint, value)
    args = typing.get_args(hint)
    if origin is dict and isinstance(value, dict):  # (dict is its only container)
        if len(args) != 2:
            return value
        pairs = [
            (
                _fit(args[0], key, f"{path}[{key!r}] (a key)"),
                _fit(args[1], item, f"{path}[{key!r}]"),
            )
            for key, item in value.items()
        ]
        given = value.items()
        if all(
            new[0] is old[0] and new[1] is old[1] for new, old in zip(pairs, given, strict=True)
        ):
            return value
        return dict(pairs)
    if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        if args == ((),):  # tuple[()]
            args = ()
        if len(value) != len(args):
            raise _Refused(path, hint, value, f": it needs {len(args)} items")
        items = [
            _fit(arg, item, f"{path}[{i}]")
            for i, (arg, item) in enumerate(zip(args, value, strict=True))
        ]
    elif args:
        items = [_fit(args[0], item, f"{path}[{i}]") for i, item in enumerate(value)]
    else:
        items = list(value)
    if not rebuild and all(new is old for new, old in zip(items, value, strict=True)):
        return value
    try:
        # The value's own type (a list, tuple, set or frozenset, or a subclass) rebuilt
        # from its items; `Collection`'s constructor signature says nothing of that.
        rebuilt = origin if rebuild else cast(Callable[[list[Any]], Any], type(value))
        return rebuilt(items)
    except TypeError:  # unhashable items for a set
        raise _Refused(path, hint, value) from None


def _union_members(hint: Any) -> tuple[Any, ...]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def _dataclass(hint: Any) -> bool:
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


def _init_fields(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.init]


def _build(cls: type, value: Mapping[str, Any], path: str) -> Any:
    """A `cls` from a JSON object: unknown and missing fields named, fields checked."""
    fields = _init_fields(cls)
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise _BadObject(
            f"argument {path!r} ({cls.__name__}) has no field(s) {unknown}; "
            f"its fields are: {', '.join(fields)}"
        )
    missing = [
        f.name
        for f in dataclasses.fields(cls)
        if f.init
        and f.name not in value
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise _BadObject(
            f"argument {path!r} ({cls.__name__}) needs field(s) {missing}; "
            f"its fields are: {', '.join(fields)}"
        )
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # as for loaders: what cannot be resolved is not checked
        hints = {}
    kwargs = {
        key: item if key not in hints else _fit(hints[key], item, f"{path}.{key}")
        for key, item in value.items()
    }
    return cls(**kwargs)


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
