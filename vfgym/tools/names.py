"""Tool names, and the short renderings of names and values that tool messages use.

Split from `schema.py`: checking a tool's name against what OpenAI's API accepts,
and clipping or describing what a model sent, are shared by the schema builder,
the argument checks and `ToolEnv`'s messages to the model.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

#: The function names OpenAI's API accepts (other OpenAI-compatible servers follow it).
_VALID_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: How many characters of a name (of a tool, of an argument) a message or record keeps.
NAME_SHOWN = 64


def tool_name(func: Callable[..., Any]) -> str:
    """The name a tool is called by: the function's `__name__`; for a `functools.partial`
    without one, the name of the function it wraps; else its class name.

    The same rule as `ToolRubric`'s names, so its counts find the calls recorded.
    """
    name = getattr(func, "__name__", None)
    if isinstance(name, str) and name:
        return name
    if isinstance(func, functools.partial):
        return tool_name(func.func)
    return type(func).__name__


def check_tool_name(name: str) -> None:
    """Refuse a name an OpenAI-compatible server would refuse, while it is easy to fix.

    Left to the server, a bad name (a lambda's "<lambda>", a name with spaces) fails
    every request of every rollout with a 400 that names neither tool nor function.
    """
    if not _VALID_NAME.fullmatch(name):
        raise ValueError(
            f"tool name {clip(name)!r} is not one an OpenAI-compatible server accepts: "
            "use 1 to 64 letters, digits, '_' or '-'. Offer a function made with `def` "
            "(not a lambda), or set the callable's __name__"
        )


def clip(text: str, limit: int = NAME_SHOWN) -> str:
    """`text` as it is, or when longer than `limit` its start and its length.

    A model can send a name (of a tool, of an argument) of any length; echoed whole,
    it would go back into the model's context and into every record of the rollout.
    """
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters)"


def quote(text: str, limit: int = NAME_SHOWN) -> str:
    """`repr(text)`, or when longer than `limit` the repr of its start and its length."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit] + '…'!r} ({len(text)} characters)"


def json_kind(value: Any) -> str:
    """What `value` is in JSON's words ("null", "an array"): errors about a model's tool
    call are read by the model, which sent JSON and knows no Python type names."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return f"a {type(value).__name__}"
