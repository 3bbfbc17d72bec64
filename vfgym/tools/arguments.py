"""Checking a model's tool-call arguments, and telling it what to send instead.

Split from `schema.py`, which builds a `Tool`'s schema and validator from the
function's signature; `Tool.validate` runs the validator and uses these for the
rest: JSON sent as text, booleans read as numbers, integers too long to read, and
an error message that says what to change.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from vfgym.tools.names import clip


def is_strict_json(value: Any) -> bool:
    """Whether `value` is JSON as the openai client sends it (no Infinity, no NaN)."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


#: The most digits an integer argument may have: Python's limit on reading an integer
#: from text (its default) and pydantic's; a tool's own `str()` of a longer one fails too.
MAX_INTEGER_DIGITS = 4300
#: What to send instead of an integer with more digits.
_SEND_SHORTER = f"send an integer of at most {MAX_INTEGER_DIGITS} digits"


def read_json_integer(text: str) -> int:
    """An integer literal of a call's JSON arguments (`json.JSONDecoder(parse_int=...)`).

    Python refuses a literal past its digit limit in words the model cannot act on
    ("... use sys.set_int_max_str_digits() to increase the limit"); this says how
    long the number is and what to send instead.
    """
    digits = len(text) - (text[:1] == "-")
    if digits > MAX_INTEGER_DIGITS:
        raise ValueError(
            f"an integer in the arguments has {digits} digits, too long to read; {_SEND_SHORTER}"
        )
    return int(text)


def _too_large_integer(value: Any) -> str:
    """The model's message for an integer argument pydantic refused as too large: one
    with too many digits, or a float beyond what it converts to an integer."""
    if isinstance(value, float):
        return (
            f"{value!r} is too large to read as an integer when sent as a decimal number; "
            "send the integer's digits, with no decimal point or exponent"
        )
    digits = _digit_count(value)
    if digits is None or digits <= MAX_INTEGER_DIGITS:
        return f"the integer is too large to read; {_SEND_SHORTER}"
    return f"the integer has {digits} digits, too long to read; {_SEND_SHORTER}"


def _digit_count(value: Any) -> int | None:
    """How many digits the integer `value` (an int, or its text) has before any
    decimal point; None when it is neither."""
    if isinstance(value, str):
        whole = value.strip().lstrip("+-").split(".", 1)[0]
        return sum(c.isdigit() for c in whole)
    if isinstance(value, int):
        size = abs(value)
        if size == 0:
            return 1
        # str() of such an int is what fails; the digits follow from its bit length.
        digits = int(size.bit_length() * 0.30102999566398120) + 1
        return digits - 1 if size < 10 ** (digits - 1) else digits
    return None


#: Pydantic's errors for a parameter the model left out or does not exist.
_NAME_ERRORS = frozenset({"missing", "extra_forbidden"})
#: Pydantic's errors for a value of the wrong kind where an array is expected.
_ARRAY_ERRORS = frozenset({"list_type", "tuple_type", "set_type", "frozen_set_type"})
#: ... and where an array or an object is: the errors JSON sent as text gets.
_CONTAINER_ERRORS = _ARRAY_ERRORS | {
    "dict_type",
    "model_type",
    "model_attributes_type",
    "dataclass_type",
    "dataclass_exact_type",
}


def json_text_decoded(arguments: dict[str, Any], errors: list[Any]) -> dict[str, Any] | None:
    """`arguments` with each array or object that came as JSON text decoded, or
    None when there is none: what a parameter of that kind was refused for."""
    decoded = dict(arguments)
    changed = False
    for err in errors:
        key = err["loc"][0] if err["loc"] else None
        if not isinstance(key, str) or err["type"] not in _CONTAINER_ERRORS:
            continue
        value = arguments.get(key)
        if not isinstance(value, str):
            continue
        if err.get("input") != value:
            continue  # a string inside the argument, not the argument itself
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            continue
        if isinstance(parsed, dict | list):
            decoded[key] = parsed
            changed = True
    return decoded if changed else None


#: The kinds of JSON value that are, or may hold, a boolean.
_SUSPECTS = frozenset({bool, list, dict})


def _boolean_as_number(sent: Any, got: Any) -> tuple[Any, ...] | None:
    """Where in `sent` (a path; () for itself) a boolean became a number in `got`, its
    validated form, or None: pydantic, like Python, reads true as 1, which a model that
    sent true for a number did not mean.

    Lists and dicts are followed item by item; a model or dataclass is left to its
    own definition, and a value taken as it came (`Any`) has nothing converted.
    """
    if got is sent:
        return None
    if type(sent) is bool:
        return () if isinstance(got, int | float) and not isinstance(got, bool) else None
    if type(sent) is list and isinstance(got, list | tuple) and len(got) == len(sent):
        if _SUSPECTS.isdisjoint(map(type, sent)):  # the common case, at C speed
            return None
        pairs: Iterable[tuple[Any, Any, Any]] = zip(range(len(sent)), sent, got, strict=True)
    elif type(sent) is dict and type(got) is dict and len(got) == len(sent):
        if _SUSPECTS.isdisjoint(map(type, sent.values())):
            return None
        pairs = (
            (key, value, new) for (key, value), new in zip(sent.items(), got.values(), strict=True)
        )
    else:
        return None
    for where, value, new in pairs:
        inner = _boolean_as_number(value, new)
        if inner is not None:
            return (where, *inner)
    return None


def all_finite(arguments: dict[str, Any], names: tuple[str, ...]) -> bool:
    """Whether the floats `arguments` gives for `names` are finite (x - x is NaN for
    an infinity and for NaN)."""
    for name in names:
        value = arguments[name]
        if value - value != 0.0:
            return False
    return True


def refuse_booleans_as_numbers(
    tool: str, numeric: frozenset[str], sent: dict[str, Any], values: dict[str, Any]
) -> None:
    """ValueError when a boolean the model sent to a `numeric` parameter became a
    number (see `_boolean_as_number`), saying where."""
    for name, value in values.items():
        if name not in sent or name not in numeric:
            continue  # its default, or no number in it
        try:
            where = _boolean_as_number(sent[name], value)
        except RecursionError:
            continue  # nested deeper than a model would nest numbers
        if where is not None:
            loc = ".".join(clip(str(part)) for part in (name, *where))
            raise ValueError(
                f"invalid arguments for {tool}: {loc}: Input should be a number, "
                "not a boolean (send a number such as 1, not true)"
            )


def explain(tool: str, params: Iterable[str], defaults: dict[str, Any], errors: list[Any]) -> str:
    """The model's error message: each problem, and what to send instead.

    `params` are the tool's parameter names, `defaults` the offered ones' defaults.
    """
    problems = "; ".join(_problem(err, defaults) for err in errors)
    message = f"invalid arguments for {tool}: {problems}"
    # Only a parameter missing or unknown: one inside an argument (a tuple's item,
    # an object's field) has nothing to do with the parameters' names.
    if any(err["type"] in _NAME_ERRORS and len(err["loc"]) == 1 for err in errors):
        names = ", ".join(params)
        offered = f"the parameters of {tool} are: {names}"
        message = f"{message}; {offered if names else f'{tool} takes no arguments'}"
    return message


def _problem(err: Any, defaults: dict[str, Any]) -> str:
    """One problem, `where: what`, with a hint when pydantic's message alone
    would leave the model guessing (a null, JSON sent as text, a number too big)."""
    where = ".".join(clip(str(p)) for p in err["loc"]) or "arguments"
    if err["type"] == "int_parsing_size":
        return f"{where}: {_too_large_integer(err.get('input'))}"
    return f"{where}: {err['msg']}{_hint(err, defaults)}"


def _hint(err: Any, defaults: dict[str, Any]) -> str:
    """What the model sent, when that is what it must change: a null (and that
    leaving the argument out gives its default), an array or object as text."""
    if err["type"] in ("missing", "extra_forbidden"):
        return ""
    value, loc = err.get("input"), err["loc"]
    if value is None:
        if len(loc) != 1 or loc[0] not in defaults:
            return " (got null)"
        default = defaults[loc[0]]
        shown = f", {clip(json.dumps(default))}" if is_strict_json(default) else ""
        return f" (got null; leave {loc[0]} out to use its default{shown})"
    if isinstance(value, str) and err["type"] in _CONTAINER_ERRORS:
        kind = "an array" if err["type"] in _ARRAY_ERRORS else "an object"
        return f" (got a string: send {kind} itself, not text)"
    return ""
