"""Defects found by handing the parsers what the openai client gives a user's reward
function: `message.content` is None on a turn that only calls tools, and a list of
content parts when the message was sent as parts."""

from __future__ import annotations

import pytest

from vfgym.inference.server import ModelServer
from vfgym.parsers import MaybeThinkParser, Parser, ThinkParser, XMLParser, extract_boxed_answer

PARTS = [
    {"type": "text", "text": "<think>hm</think>"},
    {"type": "text", "text": "<answer>7</answer>"},
]


def tool_call_only(messages: list[dict[str, object]]) -> dict[str, object]:
    """A model turn that only calls a tool: its `content` arrives as None."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }


@pytest.fixture(scope="module")
def none_content() -> object:
    """`choices[0].message.content` as the real openai client returns it for a tool call."""
    with ModelServer(tool_call_only).running() as server:
        response = server.sync_client().chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}],
        )
    content = response.choices[0].message.content
    assert content is None
    return content


@pytest.mark.parametrize(
    "parser",
    [ThinkParser(), MaybeThinkParser(), XMLParser(["think", "answer"])],
    ids=["think", "maybe-think", "xml"],
)
def test_parse_of_none_content_reads_as_no_text(parser: Parser, none_content: object) -> None:
    """`parser.parse(message.content)` raised TypeError/AttributeError ("argument of type
    'NoneType' is not iterable") on a tool-call turn instead of finding no answer."""
    parsed = parser.parse(none_content)  # type: ignore[arg-type]
    if isinstance(parser, XMLParser):
        assert parsed.answer is None and parsed.think is None
        assert parser.score_format(none_content) == pytest.approx(0.2)  # type: ignore[arg-type]
    else:
        assert parsed == ""


def test_parse_of_content_parts_reads_their_text() -> None:
    """Content given as parts was scanned as a list: XMLParser raised TypeError and the
    think parsers never found the closing tag, although parse_answer reads parts."""
    xml = XMLParser(["think", "answer"])
    assert xml.parse(PARTS).answer == "7"  # type: ignore[arg-type]
    assert xml.score_format(PARTS) == pytest.approx(1.0)  # type: ignore[arg-type]
    assert ThinkParser().parse(PARTS) == "<answer>7</answer>"  # type: ignore[arg-type]
    assert MaybeThinkParser().parse(PARTS) == "<answer>7</answer>"  # type: ignore[arg-type]
    boxed = ThinkParser(extract_fn=extract_boxed_answer)
    assert boxed.parse([{"type": "text", "text": "<think>x</think>\\boxed{3}"}]) == "3"  # type: ignore[arg-type]


def test_parse_of_something_that_is_not_text_says_what_to_give() -> None:
    """A whole message (a dict) passed where its text belongs is named, with the fix."""
    with pytest.raises(TypeError, match="parse_answer"):
        XMLParser(["answer"]).parse({"role": "assistant", "content": "x"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="message's text"):
        ThinkParser().parse(42)  # type: ignore[arg-type]
