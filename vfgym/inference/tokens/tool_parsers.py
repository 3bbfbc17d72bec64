"""Reading tool calls out of the text a model sampled, as a server's tool parser does.

In token-exact mode vfgym sends token ids to `/v1/completions`, which returns text
and never parses tool calls; the rollout still needs them as chat mode gives them
(`message["tool_calls"]` in wire format). The parser is named as the server names
its own (`--tool-call-parser hermes`), so one setting means the same on both.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from typing import Any

#: A hermes call: `<tool_call>` JSON `</tool_call>`, whitespace around the JSON allowed.
#: A last call the sampler cut before its closing tag is read to the end of the text.
_HERMES_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


def _call_id() -> str:
    """A fresh id for a parsed call, in the form vLLM gives its own."""
    return f"chatcmpl-tool-{uuid.uuid4().hex[:16]}"


def _wire_call(name: str, arguments: Any) -> dict[str, Any]:
    """One call in the wire format chat mode records: arguments as a JSON string."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return {"id": _call_id(), "type": "function", "function": {"name": name, "arguments": text}}


def parse_hermes(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """(content, tool calls) of hermes-format text, as vLLM's hermes parser splits it.

    The content is the text before the first `<tool_call>` (None when that is
    only whitespace and there are calls); a call whose JSON does not parse, or has
    no string `name`, makes the whole reply plain content, as vLLM leaves it, so
    the rubric sees what the model wrote rather than half of it.
    """
    if "<tool_call>" not in text:
        return text, []
    calls: list[dict[str, Any]] = []
    for match in _HERMES_CALL.finditer(text):
        try:
            payload = json.loads(match.group(1))
        except json.JSONDecodeError:
            return text, []
        if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
            return text, []
        calls.append(_wire_call(payload["name"], payload.get("arguments", {})))
    content = text[: text.index("<tool_call>")]
    return (content if content.strip() else None), calls


def parse_nothing(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """No tool calls: the whole text is the content (a model served without tools)."""
    return text, []


ToolParser = Callable[[str], tuple["str | None", list[dict[str, Any]]]]

#: The parsers by the name vLLM's `--tool-call-parser` gives the same format.
TOOL_PARSERS: dict[str, ToolParser] = {"hermes": parse_hermes, "none": parse_nothing}


def tool_parser(name: str) -> ToolParser:
    """The parser called `name`, or a ValueError listing the ones there are."""
    try:
        return TOOL_PARSERS[name]
    except KeyError:
        raise ValueError(
            f"unknown tool parser {name!r}; token-exact mode reads tool calls with one of "
            f"{sorted(TOOL_PARSERS)} (the name vLLM's --tool-call-parser uses), or use chat "
            "mode (token_mode='chat') to let the server parse them"
        ) from None


__all__ = ["TOOL_PARSERS", "ToolParser", "parse_hermes", "parse_nothing", "tool_parser"]
