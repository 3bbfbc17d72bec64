"""Functions as tools, as tool authors write them and as models call them: defaults,
partials, docstrings, and arguments sent as JSON text."""

from __future__ import annotations

import functools
import json
import logging
import math
from typing import Annotated, Any

import pydantic
import pytest
from scripted_models import scripted

import vfgym as vf
from vfgym.envs import ToolEnv
from vfgym.tools.schema import Tool, parse_docstring
from vfgym.types import State

QUESTION = [{"role": "user", "content": "Go."}]


ROWS = [{"prompt": QUESTION, "answer": "ok"}]


def call(name: str, arguments: Any, call_id: str = "c") -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


async def answer(env: ToolEnv, *calls: Any) -> tuple[list[dict[str, Any]], State]:
    """The env's replies to one assistant turn holding `calls`, with a fresh State."""
    turn = {"role": "assistant", "content": "", "tool_calls": list(calls)}
    replies, state = await env.env_response([*QUESTION, turn], {})
    return replies, state


def parameters(func: Any) -> dict[str, Any]:
    return Tool.from_function(func).schema["function"]["parameters"]


def clamp(x: float, high: float = math.inf, low: float = -math.inf) -> float:
    """Clamp a number.

    Args:
        x: The number.
        high: The largest value allowed.
    """
    return max(low, min(x, high))


class Client:
    """An HTTP client: no JSON form, bound by the tool's author."""

    def get(self, query: str, token: str) -> str:
        return f"{query} as {token[:2]}"


def search(query: str, client: Client, token: str, limit: int = 3) -> str:
    """Search the web.

    Args:
        query: What to look for.
        client: The HTTP client.
        token: The API token.
        limit: How many hits.
    """
    return client.get(query, token)


DOCSTRINGS = {
    "returns only": (
        """Roll a die.

        Returns:
            A number from 1 to 6.
        """,
        "Roll a die.",
        {},
    ),
    "a note before the arguments": (
        """Move a piece.

        Note:
            Illegal moves are refused.

        Args:
            square: Where to, such as e4.
        """,
        "Move a piece.",
        {"square": "Where to, such as e4."},
    ),
    "numpy": (
        """Add two numbers.

        Extra words.

        Parameters
        ----------
        a : int
            The first
            number.
        b, c : float, optional
            The others.

        Returns
        -------
        int
            The sum.
        """,
        "Add two numbers. Extra words.",
        {"a": "The first number.", "b": "The others.", "c": "The others."},
    ),
    "rest": (
        """Add two numbers.

        :param a: The first
            number.
        :type a: int
        :param dict[str, int] b: The second: a map.
        :returns: The sum.
        :rtype: int
        """,
        "Add two numbers.",
        {"a": "The first number.", "b": "The second: a map."},
    ),
    "keyword args": (
        """Send a message.

        Args:
            to: Who gets it.

        Keyword Args:
            subject: The subject line.
        """,
        "Send a message.",
        {"to": "Who gets it.", "subject": "The subject line."},
    ),
    "two-space indent, a colon in a continuation": (
        """Set the mode.

        Args:
          mode: One of
            fast: quick and rough,
            exact: slow and right.
          level: How hard.
        """,
        "Set the mode.",
        {"mode": "One of fast: quick and rough, exact: slow and right.", "level": "How hard."},
    ),
    "arguments flush with their header": (
        """Greet someone.

        Args:
        name: Who.
        loud: Whether to shout.
        """,
        "Greet someone.",
        {"name": "Who.", "loud": "Whether to shout."},
    ),
    "an example after the arguments": (
        """Look a word up.

        Args:
            word: The word.

        Example:
            lookup("cat")
        """,
        "Look a word up.",
        {"word": "The word."},
    ),
}


class Point(pydantic.BaseModel):
    x: int
    y: int = 0


def plot(points: list[Point], style: dict[str, str] | None = None, label: str = "") -> str:
    """Plot points."""
    return f"{[(p.x, p.y) for p in points]} {style} {label}"


def test_a_non_finite_default_leaves_a_schema_that_is_strict_json() -> None:
    params = parameters(clamp)
    json.dumps(params, allow_nan=False)  # what the openai client sends: no Infinity, no NaN
    assert params["properties"]["high"] == {
        "type": "number",
        "description": "The largest value allowed.",
    }
    assert params["required"] == ["x"]
    assert Tool.from_function(clamp).validate({"x": 2.0}) == {
        "x": 2.0,
        "high": math.inf,
        "low": -math.inf,
    }


async def test_a_tool_with_an_infinite_default_can_be_offered_to_a_model(model_server) -> None:
    server = await model_server(scripted([call("clamp", {"x": 7.5, "high": 5})], "ok"))
    env = ToolEnv(tools=[clamp], dataset=ROWS)
    out = await env.evaluate(server.client(), "m")
    assert "error" not in out.state[0], out.state[0].get("error")
    assert out.completion[0][1]["content"] == "5.0"
    sent = server.requests[0]["tools"][0]["function"]["parameters"]
    assert "default" not in sent["properties"]["high"]


def test_a_none_default_makes_the_parameter_nullable() -> None:
    def page(query: str, limit: int = None, tags: list[str] = None) -> str:  # noqa: RUF013
        """Page through results."""
        return query

    params = parameters(page)
    assert params["properties"]["limit"] == {
        "anyOf": [{"type": "integer"}, {"type": "null"}],
        "default": None,
    }
    assert params["properties"]["tags"]["anyOf"][-1] == {"type": "null"}
    tool = Tool.from_function(page)
    # The schema says null is the default: sending it must be accepted.
    assert tool.validate({"query": "q", "limit": None}) == {
        "query": "q",
        "limit": None,
        "tags": None,
    }
    assert tool.validate({"query": "q", "limit": "3"})["limit"] == 3


def test_null_for_a_parameter_with_a_default_says_to_leave_it_out() -> None:
    def fetch(url: str, retries: int = 3) -> str:
        """Fetch a page."""
        return url

    with pytest.raises(ValueError) as caught:
        Tool.from_function(fetch).validate({"url": "u", "retries": None})
    message = str(caught.value)
    assert "retries: Input should be a valid integer" in message
    assert "got null" in message and "leave retries out to use its default, 3" in message


def test_keywords_bound_by_a_partial_are_not_offered() -> None:
    tool = functools.partial(search, client=Client(), token="SECRET-TOKEN")
    params = parameters(tool)
    assert list(params["properties"]) == ["query", "limit"]
    assert params["required"] == ["query"]
    assert "SECRET" not in json.dumps(params)


async def test_the_model_cannot_override_a_keyword_bound_by_a_partial() -> None:
    env = ToolEnv(tools=[functools.partial(search, client=Client(), token="SECRET")], dataset=ROWS)
    replies, state = await answer(
        env,
        call("search", {"query": "cats", "token": "stolen"}, "bad"),
        call("search", {"query": "cats"}, "good"),
    )
    assert replies[0]["content"].startswith("Error: invalid arguments for search: token: ")
    assert "the parameters of search are: query, limit" in replies[0]["content"]
    assert replies[1]["content"] == "cats as SE"
    assert [entry["ok"] for entry in state["tool_call_log"]] == [False, True]


def test_annotated_text_describes_a_parameter() -> None:
    def pick(count: Annotated[int, "How many to pick."], seed: Annotated[int, "Unused"] = 0):
        """Pick some.

        Args:
            seed: The random seed.
        """

    props = parameters(pick)["properties"]
    assert props["count"] == {"type": "integer", "description": "How many to pick."}
    assert props["seed"]["description"] == "The random seed."  # the docstring comes first


@pytest.mark.parametrize("case", list(DOCSTRINGS))
def test_docstring_styles(case: str) -> None:
    doc, summary, args = DOCSTRINGS[case]
    assert parse_docstring(doc) == (summary, args)


def test_a_numpy_docstring_describes_the_schema() -> None:
    def scale(x: float, times: int = 2) -> float:
        """Scale a number.

        Parameters
        ----------
        x : float
            The number.
        times : int, default 2
            The factor.
        """
        return x * times

    function = Tool.from_function(scale).schema["function"]
    assert function["description"] == "Scale a number."
    assert function["parameters"]["properties"] == {
        "x": {"type": "number", "description": "The number."},
        "times": {"type": "integer", "default": 2, "description": "The factor."},
    }


def test_an_array_or_object_sent_as_json_text_is_read_as_json() -> None:
    # What a parser that cannot tell a parameter's type (a `$ref`, an `anyOf`) sends.
    tool = Tool.from_function(plot)
    args = tool.validate({"points": '[{"x": 1}, {"x": 2, "y": 3}]', "style": '{"color": "red"}'})
    assert args["points"] == [Point(x=1), Point(x=2, y=3)]
    assert args["style"] == {"color": "red"}
    # A string parameter keeps its text, JSON or not.
    assert tool.validate({"points": [], "label": "[1, 2]"})["label"] == "[1, 2]"


@pytest.mark.parametrize(
    ("sent", "problem"),
    [
        ("1, 2", "points: Input should be a valid list (got a string"),
        ('{"x": 1}', "points: Input should be a valid list"),
        ('[{"x": "one"}]', "points.0.x: Input should be a valid integer"),
    ],
)
def test_text_that_is_not_the_json_asked_for_is_refused_with_the_reason(
    sent: str, problem: str
) -> None:
    with pytest.raises(ValueError) as caught:
        Tool.from_function(plot).validate({"points": sent})
    assert problem in str(caught.value)


async def test_a_call_with_json_text_for_a_list_reaches_the_tool() -> None:
    env = ToolEnv(tools=[plot], dataset=ROWS)
    replies, state = await answer(env, call("plot", {"points": '[{"x": 4}]', "label": "a"}))
    assert replies[0]["content"] == "[(4, 0)] None a"
    assert state["tool_call_log"][0]["ok"] is True


async def test_an_unknown_argument_is_answered_with_the_parameters_there_are() -> None:
    def weather(city: str, unit: str = "C") -> str:
        """The weather in a city."""
        return city

    env = ToolEnv(tools=[weather], dataset=ROWS)
    replies, _ = await answer(env, call("weather", {"location": "Oslo"}))
    content = replies[0]["content"]
    assert "city: Field required" in content
    assert "location: Extra inputs are not permitted" in content
    assert content.endswith("the parameters of weather are: city, unit")


def test_an_argument_to_a_tool_without_parameters_says_it_takes_none() -> None:
    def roll() -> int:
        """Roll a die."""
        return 4

    with pytest.raises(ValueError) as caught:
        Tool.from_function(roll).validate({"sides": 6})
    assert str(caught.value) == (
        "invalid arguments for roll: sides: Extra inputs are not permitted; roll takes no arguments"
    )


async def test_deeply_nested_arguments_become_an_error_message() -> None:
    def echo(value: Any) -> str:
        """Echo a value."""
        return "ok"

    deep = '{"value": ' + "[" * 5000 + "]" * 5000 + "}"
    replies, state = await answer(ToolEnv(tools=[echo], dataset=ROWS), call("echo", deep))
    assert replies[0]["content"].startswith("Error: ")
    assert state["tool_call_log"][0]["ok"] is False
    assert "nested too deeply" in replies[0]["content"]


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
async def test_nan_and_infinity_are_refused_as_not_json(constant: str) -> None:
    seen: list[float] = []

    def scale(factor: float) -> str:
        """Scale by a factor."""
        seen.append(factor)
        return "ok"

    replies, _ = await answer(
        ToolEnv(tools=[scale], dataset=ROWS), call("scale", f'{{"factor": {constant}}}')
    )
    assert (
        replies[0]["content"].startswith("Error: ")
        and f"{constant} is not a JSON" in (replies[0]["content"])
    )
    assert seen == []


COUNTDOWN_ROWS = [{"question": "Count down from 2.", "answer": "2"}]


def add(a: int, b: int) -> int:
    """Add two whole numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def total(*numbers: int) -> int:
    """Add numbers.

    Args:
        numbers: The numbers.
    """
    return sum(numbers)


def untyped(a, b):  # type: ignore[no-untyped-def]
    return a + b


def test_tools_given_as_one_function_say_to_pass_a_list() -> None:
    with pytest.raises(TypeError, match=r"tools=\[add\]"):
        vf.ToolEnv(tools=add, dataset=COUNTDOWN_ROWS)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "tool",
    [{"type": "function", "function": {"name": "add"}}, None, "add"],
)
def test_a_tool_that_is_no_function_is_named_as_such(tool: Any) -> None:
    with pytest.raises(TypeError, match=r"tool 0 .* not a function.*pass the function itself"):
        vf.ToolEnv(tools=[tool], dataset=COUNTDOWN_ROWS)


def test_a_tool_with_star_args_is_warned_about_with_a_list_parameter(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Its `*numbers` is not offered (a model sends named arguments): the author hears
    so, and what to write instead, rather than finding a tool the model calls with nothing."""
    with caplog.at_level(logging.WARNING, logger="vfgym.tools.schema"):
        env = vf.ToolEnv(tools=[total], dataset=COUNTDOWN_ROWS)
    assert env.oai_tools[0]["function"]["parameters"]["properties"] == {}
    warned = [r.getMessage() for r in caplog.records if r.name == "vfgym.tools.schema"]
    assert len(warned) == 1 and "'total' takes *numbers" in warned[0]
    assert "`numbers: list[int]`" in warned[0]


def test_a_tool_without_type_hints_or_docstring_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="vfgym.tools.schema"):
        vf.ToolEnv(tools=[untyped, add], dataset=COUNTDOWN_ROWS)
    warned = [r.getMessage() for r in caplog.records if r.name == "vfgym.tools.schema"]
    assert len(warned) == 1, warned  # `add` is described in full
    assert "'untyped'" in warned[0] and "a, b" in warned[0] and "docstring" in warned[0]


async def test_two_plain_tools_sync_and_async_with_optional_and_raising(
    model_server: Any,
) -> None:
    """The author's happy path: defaults and Optional stay optional; a raise is told."""

    def price(item: str, quantity: int = 1, currency: str | None = None) -> str:
        """Price of an item.

        Args:
            item: The item.
            quantity: How many.
            currency: A currency code, or none for dollars.
        """
        if item != "pear":
            raise KeyError(f"unknown item {item!r}")
        return f"{3 * quantity} {currency or 'USD'}"

    async def halve(x: float) -> float:
        """Half of x.

        Args:
            x: The number.
        """
        return x / 2

    def call(name: str, arguments: str, call_id: str) -> dict[str, Any]:
        return {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }

    env = vf.ToolEnv(tools=[price, halve], dataset=COUNTDOWN_ROWS, max_turns=3)
    params = env.oai_tools[0]["function"]["parameters"]
    assert params["required"] == ["item"]
    server = await model_server(
        scripted(
            [
                call("price", '{"item": "pear"}', "c1"),
                call("price", '{"item": "plum", "currency": null}', "c2"),
                call("halve", '{"x": 3}', "c3"),
            ],
            "done",
        )
    )
    out = await env.evaluate(server.client(), "m")
    tool_replies = [m["content"] for m in out.completion[0] if m["role"] == "tool"]
    assert tool_replies == ["3 USD", "Error: KeyError: \"unknown item 'plum'\"", "1.5"]
    assert out.state[0]["tools_called"] == ["price", "price", "halve"]
