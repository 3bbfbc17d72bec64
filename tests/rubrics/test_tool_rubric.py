"""ToolRubric: counting a rollout's tool calls, from the completion or from the
environment's own record."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from openai.types.chat import ChatCompletionMessageToolCall

from vfgym.rubrics import (
    REWARD_ERRORS,
    ToolRubric,
)

PROMPT = [{"role": "user", "content": "What is 2+2?"}]


COMPLETION = [{"role": "assistant", "content": "<answer>4</answer>"}]


def search(query: str) -> str:
    """Search."""
    return query


def calculator(expression: str) -> str:
    """Calculate."""
    return expression


def call(name: str) -> dict:
    return {"id": name, "type": "function", "function": {"name": name, "arguments": "{}"}}


async def test_tool_rubric_counts_calls_from_the_completion() -> None:
    rubric = ToolRubric(tools=[search, calculator])
    assert rubric.get_reward_func_names() == [
        "total_tool_calls",
        "search_calls",
        "calculator_calls",
    ]
    assert rubric.get_reward_weights() == [0.0, 0.0, 0.0]
    assert [t["function"]["name"] for t in rubric.oai_tools] == ["search", "calculator"]
    as_object = ChatCompletionMessageToolCall.model_validate(call("calculator"))
    completion = [
        {"role": "assistant", "content": "", "tool_calls": [call("search"), call("search")]},
        {"role": "tool", "content": "r", "tool_call_id": "search"},
        {"role": "assistant", "content": None, "tool_calls": [as_object]},
        {"role": "assistant", "content": "done"},
    ]
    result = await rubric.score_rollout(PROMPT, completion, "", {})
    assert result.metrics == {
        "total_tool_calls": 3.0,
        "search_calls": 2.0,
        "calculator_calls": 1.0,
        REWARD_ERRORS: 0.0,
    }
    assert result.reward == 0.0


async def test_tool_rubric_prefers_the_environments_record() -> None:
    rubric = ToolRubric(tools=[search, {"type": "function", "function": {"name": "lookup"}}])
    state = {"tools_called": [{"name": "search"}, "lookup", {"name": "search", "args": {}}]}
    result = await rubric.score_rollout(PROMPT, COMPLETION, "", state)
    assert result.metrics["total_tool_calls"] == 3.0
    assert result.metrics["search_calls"] == 2.0
    assert result.metrics["lookup_calls"] == 1.0


def total_tool(x: int) -> int:
    """A tool whose count would be named like the total."""
    return x


def test_tool_rubric_says_which_tool_name_clashes() -> None:
    with pytest.raises(ValueError, match=r"'total_tool'.*total_tool_calls.*rename"):
        ToolRubric(tools=[total_tool])
    with pytest.raises(ValueError, match="two tools named 'search'"):
        ToolRubric(tools=[search, functools.partial(search)])


NONE_TOOL = {"type": "function", "function": {"name": "None", "parameters": {}}}


SEVEN_TOOL = {"type": "function", "function": {"name": "7", "parameters": {}}}


NAMELESS_CALLS: list[Any] = [
    {"id": "a", "type": "function", "function": {"arguments": "{}"}},
    {"id": "b", "type": "function", "function": {"name": None, "arguments": "{}"}},
    {"id": "c", "type": "function", "function": {"name": "", "arguments": "{}"}},
    {"id": "d", "type": "function", "function": {"name": 7, "arguments": "{}"}},
]


@pytest.mark.parametrize("nameless", NAMELESS_CALLS, ids=["missing", "None", "empty", "int"])
async def test_a_nameless_call_counts_in_the_total_but_for_no_tool(nameless: Any) -> None:
    rubric = ToolRubric(tools=[search, NONE_TOOL, SEVEN_TOOL])
    completion = [
        {"role": "assistant", "content": "", "tool_calls": [call("search"), nameless]},
        {"role": "tool", "content": "r", "tool_call_id": "search"},
    ]
    result = await rubric.score_rollout(PROMPT, completion, "", {})
    assert result.metrics == {
        "total_tool_calls": 2.0,
        "search_calls": 1.0,
        "None_calls": 0.0,
        "7_calls": 0.0,
        REWARD_ERRORS: 0.0,
    }


async def test_a_nameless_call_creates_no_metric_of_its_own() -> None:
    rubric = ToolRubric(tools=[search])
    completion = [{"role": "assistant", "content": "", "tool_calls": NAMELESS_CALLS}]
    result = await rubric.score_rollout(PROMPT, completion, "", {})
    assert result.metrics == {"total_tool_calls": 4.0, "search_calls": 0.0, REWARD_ERRORS: 0.0}


async def test_nameless_entries_of_the_environments_record_count_for_no_tool() -> None:
    rubric = ToolRubric(tools=[search, NONE_TOOL])
    state = {"tools_called": ["search", None, {}, {"name": None}, "", {"name": "None"}]}
    result = await rubric.score_rollout(PROMPT, [], "", state)
    assert result.metrics["total_tool_calls"] == 6.0
    assert result.metrics["search_calls"] == 1.0
    assert result.metrics["None_calls"] == 1.0  # only the call that really named it
    assert result.metrics[REWARD_ERRORS] == 0.0


async def test_malformed_calls_are_counted_without_raising() -> None:
    rubric = ToolRubric(tools=[search, NONE_TOOL])
    malformed: list[Any] = [
        {"id": "no-function", "type": "function"},
        "not a call",
        None,
        42,
        {"id": "odd", "function": "search"},  # a function that is not an object
        {"name": "search", "arguments": {}},  # the flat form still names its tool
    ]
    completion = [{"role": "assistant", "content": "", "tool_calls": malformed}]
    state: dict[str, Any] = {}
    result = await rubric.score_rollout(PROMPT, completion, "", state)
    assert result.metrics == {
        "total_tool_calls": 6.0,
        "search_calls": 1.0,
        "None_calls": 0.0,
        REWARD_ERRORS: 0.0,
    }
    assert not state.get(REWARD_ERRORS)


@pytest.mark.parametrize("field", [5, "search", {"function": {"name": "search"}}])
async def test_a_tool_calls_field_that_is_no_list_is_one_call(field: Any) -> None:
    """Stored completions are not always well formed; a metric must not raise on one."""
    rubric = ToolRubric(tools=[search])
    completion = [{"role": "assistant", "content": "", "tool_calls": field}]
    result = await rubric.score_rollout(PROMPT, completion, "", {})
    assert result.metrics["total_tool_calls"] == 1.0
    assert result.metrics["search_calls"] == (0.0 if field == 5 else 1.0)
    assert result.metrics[REWARD_ERRORS] == 0.0
