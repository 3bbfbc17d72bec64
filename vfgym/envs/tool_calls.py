"""A model's tool calls read, and a tool's result written back as the text of its reply.

Split from `tool_env.py`: whatever form a call arrives in (an openai object, a
dict, a call without an id, arguments that are not a JSON object), it is read here
into a name and an id (its arguments are read by `ToolEnv`, whose `ToolCallError`
the model reads when they are malformed); and a result becomes text, cut to the
environment's cap with a note.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, MutableMapping
from typing import Any


def default_error_formatter(exc: Exception) -> str:
    """What the model reads when its tool call fails: the error's type and message."""
    return f"Error: {type(exc).__name__}: {exc}"


def result_text(result: Any) -> str:
    """A tool's result as the text of its reply: "" for None, bytes decoded as UTF-8
    (what the model should read is the text, not Python's b'...' repr), a dict, list
    or tuple of JSON values as JSON (models misread Python's repr: its quotes, None,
    True), else `str`.

    A named tuple keeps its `str`, whose field names say more than a JSON array.
    """
    if result is None:
        return ""
    if isinstance(result, bytes | bytearray | memoryview):
        return bytes(result).decode("utf-8", errors="replace")
    if isinstance(result, dict | list | tuple) and not hasattr(result, "_fields"):
        try:
            return json.dumps(result, ensure_ascii=False)
        except (TypeError, ValueError):
            pass  # a value JSON has no form for (a set, bytes, an object) or a cycle
    return str(result)


def cut_note(kept: int, total: int) -> str:
    return f"\n[... cut to the first {kept} of {total} characters]"


def cut_text(text: str, limit: int | None) -> str:
    """`text`, or when longer than `limit` (None: no limit) its start and a note
    saying how much of how many characters is shown, `limit` characters at most.

    The model must know it reads part of the result, or it takes the part for the
    whole. The cut never falls between the two halves of a surrogate pair (text
    decoded with "surrogatepass" can hold them), which would leave invalid text.
    """
    if limit is None or len(text) <= limit:
        return text
    total = len(text)
    kept = limit - len(cut_note(limit, total))  # the note for `kept` is no longer
    if "\udc00" <= text[kept] <= "\udfff" and "\ud800" <= text[kept - 1] <= "\udbff":
        kept -= 1
    return text[:kept] + cut_note(kept, total)


def give_id(call: Any, index: int, taken: set[str]) -> str:
    """A new id for a call that has none (or an earlier call's), unique in its turn,
    written into the call.

    The OpenAI API requires each tool reply's `tool_call_id` to be the id of a call
    in the assistant turn before it; a call without an id can only be matched once
    it has one.
    """
    call_id = f"call_{index}"
    suffix = 0
    while call_id in taken:
        suffix += 1
        call_id = f"call_{index}_{suffix}"
    taken.add(call_id)
    if isinstance(call, MutableMapping):
        call["id"] = call_id
    return call_id


def read_call_fields(call: Any) -> Mapping[str, Any]:
    """A tool call as a mapping: a dict as it is, an openai object dumped, else empty."""
    if type(call) is dict or isinstance(call, Mapping):  # (the exact type: no ABC check)
        return call
    dump = getattr(call, "model_dump", None)
    return dump() if callable(dump) else {}


def read_call_function(call: Any) -> Any:
    """The `function` part of a tool call, unchecked ({} when missing)."""
    return read_call_fields(call).get("function") or {}


def read_call_id(call: Any) -> str:
    """The id of a tool call as a str ("" when missing), whatever it was sent as."""
    call_id = read_call_fields(call).get("id")
    return "" if call_id is None else str(call_id)


def read_call_name(call: Any) -> str:
    """The tool name of a call for the log, even when the call is malformed."""
    function = read_call_function(call)
    name = function.get("name") if isinstance(function, Mapping) else None
    return name if isinstance(name, str) else ""
