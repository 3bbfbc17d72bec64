"""`ToolEnv`'s settings checked when it is built: the tools, time limits, and the reply cap.

Split from `tool_env.py`: each setting is refused at construction with what to
pass instead, rather than at the first tool call of the first rollout.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from vfgym.tools.names import clip

#: How many characters of a tool's reply the model reads by default: plenty for any
#: answer a tool should give, and a few thousand tokens, so that one runaway result
#: (a `cat` of a big file, a print in a loop) cannot fill the model's context window.
DEFAULT_MAX_TOOL_RESULT_CHARS = 20_000
#: The smallest cap accepted: room for the note on a cut reply and some text before it.
MIN_TOOL_RESULT_CHARS = 100


def checked_tools(tools: Any) -> list[Callable[..., Any]]:
    """`tools` as the list of functions it must be, or an error saying how to pass them:
    left alone, one function or a schema dict fails deep in `inspect` ("'function'
    object is not iterable", "{...} is not a callable object")."""
    if tools is None:
        return []
    if callable(tools) or not isinstance(tools, list | tuple):
        name = getattr(tools, "__name__", None)
        example = f"tools=[{name}]" if isinstance(name, str) else "tools=[my_tool, other_tool]"
        raise TypeError(
            f"tools must be a list of functions, e.g. {example}, not a "
            f"{type(tools).__name__}: {tools!r:.80}"
        )
    for index, tool in enumerate(tools):
        if not callable(tool):
            raise TypeError(
                f"tool {index} is a {type(tool).__name__}, not a function: {tool!r:.80}. "
                "A tool is a Python function whose schema is built from its type hints and "
                "docstring; pass the function itself"
            )
    return list(tools)


def check_time_limit(value: Any, name: str = "tool_timeout") -> float | None:
    """`value` as a tool call's time limit in seconds, refused now rather than at the
    first call: zero, a negative number or NaN would fail every call, and infinity
    would only pretend to limit."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(
            f"{name} must be a positive, finite number of seconds, or None for no limit; "
            f"got {value!r}"
        )
    return float(value)


def check_time_limits(value: Any) -> dict[str, float | None]:
    """`value` as per-tool time limits: a mapping of tool names to `check_time_limit`
    values (None for none); {} when there are none."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ValueError(
            "tool_timeouts must map tool names to seconds (or None for no limit), such "
            f'as {{"search": 30}}; got {clip(repr(value))}'
        )
    return {key: check_time_limit(limit, f"tool_timeouts[{key!r}]") for key, limit in value.items()}


def check_result_cap(value: Any) -> int | None:
    """`value` as a cap on tool replies, refused now rather than at the first long reply."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_TOOL_RESULT_CHARS:
        raise ValueError(
            "max_tool_result_chars must be a whole number of characters, at least "
            f"{MIN_TOOL_RESULT_CHARS}, or None for no cap; got {value!r}"
        )
    return value
