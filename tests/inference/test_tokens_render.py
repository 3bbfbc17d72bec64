"""What a chat template is given: tool-call arguments parsed from their JSON string, as
vLLM gives them to its template, for a Hugging Face tokenizer's Jinja template."""

from __future__ import annotations

import json
from typing import Any

from vfgym.inference.server import ByteTokenizer
from vfgym.inference.tokens.render import jinja_template, with_parsed_arguments
from vfgym.training.alignment import chat_ids

CALL = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2}'}}
MESSAGES = [
    {"role": "user", "content": "2+?"},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "content": "2", "tool_call_id": "c1"},
]


class JinjaLikeTokenizer(ByteTokenizer):
    """vfgym's byte tokenizer, declaring a Jinja `chat_template` as Hugging Face's do,
    and rendering tool-call arguments as its template would: an object as JSON, a
    string quoted (Qwen2.5's `tojson`)."""

    chat_template = "{{ messages }}"

    def apply_chat_template(self, conversation: Any, tools: Any = None, **kwargs: Any) -> Any:
        text = json.dumps([m.get("tool_calls") for m in conversation])
        return self.encode(text)


def test_arguments_are_parsed_and_nothing_else_changes() -> None:
    parsed = with_parsed_arguments(MESSAGES)
    assert parsed[1]["tool_calls"][0]["function"]["arguments"] == {"a": 2}
    assert parsed[0] is MESSAGES[0] and parsed[2] is MESSAGES[2]
    assert CALL["function"]["arguments"] == '{"a": 2}'  # the State's message is untouched


def test_arguments_that_are_not_json_stay_text() -> None:
    broken = {**CALL, "function": {"name": "add", "arguments": "{oops"}}
    (message,) = with_parsed_arguments([{"role": "assistant", "tool_calls": [broken]}])
    assert message["tool_calls"][0]["function"]["arguments"] == "{oops"


def test_a_jinja_template_sees_an_object_and_vfgyms_own_the_wire_format() -> None:
    assert jinja_template(JinjaLikeTokenizer()) and not jinja_template(ByteTokenizer())
    rendered = JinjaLikeTokenizer().decode(chat_ids(JinjaLikeTokenizer(), MESSAGES, None, False))
    assert '"arguments": {"a": 2}' in rendered  # as vLLM renders it, not '"{\\"a\\": 2}"'
