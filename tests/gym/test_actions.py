"""How `step` checks a model turn given as a message, and the wire format it records."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.chat import ChatCompletion, ChatCompletionMessage
from openai.types.chat.chat_completion import Choice
from openai.types.chat.chat_completion_message_tool_call import (
    ChatCompletionMessageToolCall,
    Function,
)

from vfgym.gym.actions import model_turn


def good_call(call_id: str = "c1") -> dict[str, Any]:
    arguments = '{"a": 2, "b": 3}'
    return {"id": call_id, "type": "function", "function": {"name": "add", "arguments": arguments}}


def turn(*calls: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": list(calls)}


MALFORMED_CALLS = {
    "function is a str": ({"id": "c", "function": "add"}, r"\['function'\] must be a dict"),
    "arguments an int": (
        {"function": {"name": "add", "arguments": 5}},
        r"\['arguments'\] must be a JSON object as a str .*not int",
    ),
    "arguments a list": (
        {"function": {"name": "add", "arguments": ["a", 2]}},
        r"\['arguments'\] must be a JSON object as a str .*not list",
    ),
    "arguments bytes": (
        {"function": {"name": "add", "arguments": b'{"a": 1, "b": 2}'}},
        r"not bytes",
    ),
    "arguments not JSON-able": (
        {"function": {"name": "add", "arguments": {"a": {1, 2}}}},
        r"cannot be written as JSON",
    ),
    "name a list": (
        {"function": {"name": ["add"], "arguments": "{}"}},
        r"\['name'\] must be a str",
    ),
    "name a dict": ({"function": {"name": {"n": 1}, "arguments": "{}"}}, r"not dict"),
    "name missing": ({"function": {"arguments": "{}"}}, r"\['name'\] must be a str, not NoneType"),
    "id an int": ({"id": 7, "function": {"name": "add"}}, r"\['id'\] must be a str or missing"),
    "not a dict": (5, r"tool_calls\[1\] must be a dict, not int"),
    "another type": (
        {"type": "custom", "function": {"name": "add"}},
        r"\['type'\] must be 'function'",
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED_CALLS))
def test_a_malformed_tool_call_is_refused_before_the_episode_changes(calculator, case):
    bad, explanation = MALFORMED_CALLS[case]
    calculator.reset(options={"index": 0})
    before = calculator.state["completion"][:]
    with pytest.raises((TypeError, ValueError), match=r"tool_calls\[1\]") as raised:
        calculator.step(turn(good_call(), bad))
    assert raised.match(explanation)
    assert "; a tool call looks like {'id': 'call_1', 'type': 'function'" in str(raised.value)
    assert not calculator.episode_over
    assert calculator.state["completion"] == before
    observation, *_ = calculator.step(turn(good_call()))  # the episode goes on
    assert observation == "5"


def test_a_recorded_tool_call_is_in_the_openai_wire_format(calculator):
    calculator.reset(options={"index": 0})
    action = {
        "content": None,
        "tool_calls": (
            {"function": {"name": "add", "arguments": {"a": 2, "b": 3}}},
            {"function": {"name": "add", "arguments": {"a": 1, "b": 1}}},
        ),
        "usage": {"completion_tokens": 9},
    }
    *_, info = calculator.step(action)
    assistant, *replies = info["messages"][-3:]
    calls = assistant["tool_calls"]
    assert assistant["content"] == "" and assistant["usage"] == {"completion_tokens": 9}
    assert [c["type"] for c in calls] == ["function", "function"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"a": 2, "b": 3},
        {"a": 1, "b": 1},
    ]
    ids = [c["id"] for c in calls]
    assert all(i.startswith("call_") for i in ids) and len(set(ids)) == 2
    assert [r["tool_call_id"] for r in replies] == ids
    assert [r["content"] for r in replies] == ["5", "2"]
    assert action["tool_calls"][0] == {"function": {"name": "add", "arguments": {"a": 2, "b": 3}}}
    # Made from the call itself: the same actions replay the same episode, ids included.
    again = model_turn(action, chat=True)
    assert [c["id"] for c in again["tool_calls"]] == ids


def test_an_empty_or_contentless_message_is_refused():
    for action in ({}, {"content": None}, {"content": None, "tool_calls": []}):
        with pytest.raises(ValueError, match="neither 'content' nor 'tool_calls'"):
            model_turn(action, chat=True)
    assert "tool_calls" not in model_turn({"content": "hi", "tool_calls": []}, chat=True)


def test_openai_message_objects_become_plain_dicts():
    call = ChatCompletionMessageToolCall(
        id="c9", type="function", function=Function(name="add", arguments='{"a": 1}')
    )
    message = ChatCompletionMessage(role="assistant", content=None, tool_calls=[call])
    assert model_turn(message, chat=True) == turn(
        {"id": "c9", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
    )
    assert model_turn(turn(call), chat=True)["tool_calls"][0]["id"] == "c9"


def test_a_whole_chat_completion_is_refused_with_which_part_to_pass(guess):
    message = ChatCompletionMessage(role="assistant", content="5")
    completion = ChatCompletion(
        id="x",
        created=0,
        model="m",
        object="chat.completion",
        choices=[Choice(index=0, finish_reason="stop", message=message)],
    )
    guess.reset(options={"index": 0})
    for action in (completion, completion.model_dump()):
        with pytest.raises(TypeError, match=r"pass .*completion\.choices\[0\]\.message"):
            guess.step(action)
    assert guess.state["turn"] == 0
    assert model_turn(completion.choices[0].message, chat=True)["content"] == "5"
