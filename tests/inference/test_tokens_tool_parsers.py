"""Reading hermes tool calls out of sampled text, as vLLM's hermes parser splits it."""

from __future__ import annotations

import json

import pytest

from vfgym.inference.tokens.tool_parsers import parse_hermes, tool_parser


def test_calls_and_the_content_before_them_are_split() -> None:
    text = (
        'Let me add.\n<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
        '<tool_call>{"name": "neg", "arguments": {"x": 1}}</tool_call>'
    )
    content, calls = parse_hermes(text)
    assert content == "Let me add.\n"
    assert [c["function"]["name"] for c in calls] == ["add", "neg"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"a": 2, "b": 3}
    assert all(c["type"] == "function" and c["id"].startswith("chatcmpl-tool-") for c in calls)
    assert calls[0]["id"] != calls[1]["id"]


def test_only_whitespace_before_a_call_is_no_content() -> None:
    content, calls = parse_hermes('\n<tool_call>{"name": "f", "arguments": {}}</tool_call>')
    assert content is None and len(calls) == 1


def test_a_call_cut_before_its_closing_tag_is_still_read() -> None:
    _, calls = parse_hermes('<tool_call>{"name": "f", "arguments": {"q": "x"}}')
    assert json.loads(calls[0]["function"]["arguments"]) == {"q": "x"}


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "f", "arguments": </tool_call>',  # broken JSON
        '<tool_call>["f"]</tool_call>',  # not an object
        '<tool_call>{"arguments": {}}</tool_call>',  # no name
    ],
)
def test_a_call_that_does_not_parse_leaves_the_whole_reply_as_content(text: str) -> None:
    assert parse_hermes(text) == (text, [])


def test_text_without_calls_is_all_content() -> None:
    assert parse_hermes("just words") == ("just words", [])


def test_an_unknown_parser_name_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"\['hermes', 'none'\]"):
        tool_parser("mistral")
