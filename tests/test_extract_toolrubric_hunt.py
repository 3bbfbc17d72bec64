"""`\\boxed 5` without braces, and ToolRubric's handling of tool calls that name no tool."""

from __future__ import annotations

from typing import Any

import pytest
from test_rubrics import PROMPT, call, search

from vfgym.parsers import extract_boxed_answer
from vfgym.rubrics import REWARD_ERRORS, ToolRubric

# -- extract_boxed_answer: the brace-less argument ----------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is \\boxed 5", "5"),
        ("The answer is \\boxed 5 and that is final.", "5"),
        ("so \\fbox 7", "7"),
        ("\\boxed  -12", "-12"),  # the spaces LaTeX skips after a control word
        ("$\\boxed 5$", "5"),  # the closing `$` ends math mode, not part of the answer
        ("\\boxed \\frac{1}{2} is it", "\\frac{1}{2}"),  # braces inside the token kept whole
        ("\\boxed \\text{a b}", "\\text{a b}"),  # a space inside a group does not end it
        ("\\boxed{1} then \\boxed 2", "2"),  # the last box wins, whichever its form
        ("\\boxed 2 then \\boxed{1}", "1"),
        ("\\boxed {5}", "5"),  # a space before the brace is still the braced form
    ],
)
def test_a_boxed_argument_without_braces_is_the_answer(text: str, expected: str) -> None:
    assert extract_boxed_answer(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "no box here, the answer is 5",
        "",
        "\\boxedx 5",  # another control word, not \boxed
        "it ends with \\boxed",
        "it ends with \\boxed  ",
        "\\boxed \\frac{1",  # a token whose group never closes is no complete box
    ],
)
def test_text_without_a_complete_box_is_returned_as_is(text: str) -> None:
    assert extract_boxed_answer(text) == text


def test_an_empty_box_is_an_empty_answer() -> None:
    assert extract_boxed_answer("so \\boxed{}") == ""
    assert extract_boxed_answer("\\boxed{3} then \\boxed{}") == ""


def test_a_trailing_bare_boxed_falls_back_to_the_last_complete_box() -> None:
    assert extract_boxed_answer("\\boxed{3} and then \\boxed") == "3"
    assert extract_boxed_answer("\\boxed 3 and then \\boxed ") == "3"


# -- ToolRubric: calls that name no tool --------------------------------------------------

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
