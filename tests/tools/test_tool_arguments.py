"""A model's tool arguments of the wrong kind, as real `Tool`s and a real ToolEnv see them.

A boolean is not a number, a number must be one JSON can carry, and an error about
a part of an argument must not read as if a parameter were missing.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated, Any

import pydantic
import pytest

from vfgym.envs import ToolEnv
from vfgym.tools.schema import Tool
from vfgym.types import State

QUESTION = [{"role": "user", "content": "Go."}]
ROWS = [{"prompt": QUESTION, "answer": "ok"}]


def call(name: str, arguments: Any) -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": "c", "type": "function", "function": {"name": name, "arguments": raw}}


async def answer(env: ToolEnv, *calls: Any) -> tuple[list[dict[str, Any]], State]:
    """The env's replies to one assistant turn holding `calls`, with a fresh State."""
    turn = {"role": "assistant", "content": "", "tool_calls": list(calls)}
    return await env.env_response([*QUESTION, turn], {})


def repeat(text: str, times: int, scale: float = 1.0) -> str:
    """Repeat a text."""
    return text * times


def totals(counts: list[int], weights: dict[str, float] | None = None) -> int:
    """Sum counts."""
    return sum(counts)


def bounded(count: Annotated[int, pydantic.Field(ge=0)], step: int | str = 1) -> int:
    """A count with a bound."""
    return count


# -- a boolean is not a number ----------------------------------------------------------


@pytest.mark.parametrize(
    ("func", "arguments", "where"),
    [
        (repeat, {"text": "a", "times": True}, "times"),
        (repeat, {"text": "a", "times": 2, "scale": False}, "scale"),
        (totals, {"counts": [1, True]}, "counts.1"),
        (totals, {"counts": [1], "weights": {"a": True}}, "weights.a"),
        (bounded, {"count": True}, "count"),
    ],
)
def test_a_boolean_for_a_number_is_refused(func: Any, arguments: Any, where: str) -> None:
    with pytest.raises(ValueError) as caught:
        Tool.from_function(func).validate(arguments)
    assert f"{where}: Input should be a number, not a boolean" in str(caught.value)


def test_numbers_still_take_what_a_number_may_be() -> None:
    tool = Tool.from_function(repeat)
    assert tool.validate({"text": "a", "times": 2, "scale": 3}) == {
        "text": "a",
        "times": 2,
        "scale": 3.0,
    }
    # Tool parsers that cannot read the schema send numbers as text.
    assert tool.validate({"text": "a", "times": "2"})["times"] == 2
    assert Tool.from_function(bounded).validate({"count": 1, "step": "x"})["step"] == "x"
    with pytest.raises(ValueError, match="count: Input should be greater than or equal to 0"):
        Tool.from_function(bounded).validate({"count": -1})


def test_a_parameter_that_takes_booleans_still_does() -> None:
    def toggle(on: bool, level: int | bool = 0, extra: dict[str, Any] | None = None) -> str:
        """Switch it."""
        return str(on)

    tool = Tool.from_function(toggle)
    assert tool.validate({"on": True, "level": True, "extra": {"n": [1, False]}}) == {
        "on": True,
        "level": True,
        "extra": {"n": [1, False]},
    }
    assert tool.validate({"on": "true", "level": 3})["level"] == 3


def test_the_schema_is_unchanged_by_the_boolean_check() -> None:
    count = Tool.from_function(bounded).schema["function"]["parameters"]["properties"]["count"]
    assert count == {"minimum": 0, "type": "integer"}
    parameters = Tool.from_function(totals).schema["function"]["parameters"]
    assert parameters["properties"]["counts"] == {"items": {"type": "integer"}, "type": "array"}
    weights = parameters["properties"]["weights"]
    assert weights["anyOf"][0] == {"additionalProperties": {"type": "number"}, "type": "object"}


async def test_a_boolean_for_a_number_becomes_the_models_error_message() -> None:
    env = ToolEnv(tools=[repeat], dataset=ROWS)
    replies, state = await answer(env, call("repeat", {"text": "ab", "times": True}))
    assert replies[0]["content"].startswith("Error: invalid arguments for repeat: times:")
    assert "not a boolean" in replies[0]["content"]
    assert state["tool_call_log"][0]["ok"] is False


# -- a number JSON can carry ------------------------------------------------------------


@pytest.mark.parametrize("sent", ["nan", "inf", "-Infinity", 1e400, [1.0, 1e400]])
def test_a_number_json_cannot_carry_is_refused(sent: Any) -> None:
    def mean(x: float | list[float]) -> float:
        """Average."""
        return x if isinstance(x, float) else sum(x) / len(x)

    with pytest.raises(ValueError, match="finite number"):
        Tool.from_function(mean).validate({"x": sent})


def test_an_overflowing_number_for_a_plain_float_is_refused() -> None:
    # 1e400 reads as infinity in Python's JSON parser: a plain float, yet no number.
    with pytest.raises(ValueError, match="scale: Input should be a finite number"):
        Tool.from_function(repeat).validate({"text": "a", "times": 1, "scale": json.loads("1e400")})
    assert Tool.from_function(repeat).validate({"text": "a", "times": 1, "scale": 0.5})


async def test_an_overflowing_number_does_not_reach_the_tool() -> None:
    seen: list[float] = []

    def scale(x: float) -> str:
        """Scale."""
        seen.append(x)
        return "ok"

    replies, state = await answer(
        ToolEnv(tools=[scale], dataset=ROWS), call("scale", '{"x": 1e999}')
    )
    assert seen == []
    assert "finite number" in replies[0]["content"]
    assert state["tool_call_log"][0]["ok"] is False


# -- errors inside an argument ----------------------------------------------------------


@dataclasses.dataclass
class Point:
    x: int
    y: int


def place(point: Point, span: tuple[int, int] = (0, 1)) -> str:
    """Place a point."""
    return "ok"


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"point": {"x": 1}}, "point.y: Field required"),
        ({"point": {"x": 1, "y": 2}, "span": [1]}, "span.1: Field required"),
        ({"point": {"x": 1, "y": 2, "z": 3}}, "point.z: Unexpected keyword argument"),
    ],
)
def test_a_problem_inside_an_argument_does_not_list_the_parameters(
    arguments: Any, problem: str
) -> None:
    with pytest.raises(ValueError) as caught:
        Tool.from_function(place).validate(arguments)
    assert str(caught.value) == f"invalid arguments for place: {problem}"


def test_a_missing_parameter_still_lists_the_parameters() -> None:
    with pytest.raises(ValueError) as caught:
        Tool.from_function(place).validate({"span": [1, 2]})
    assert str(caught.value).endswith("; the parameters of place are: point, span")
