"""Plain functions as OpenAI tools: the exact schema, and argument checks from one signature."""

from __future__ import annotations

import json
from typing import Any, Literal, Optional

import pytest

from vfgym.tools import schema as tools
from vfgym.tools.schema import Tool, convert_func_to_oai_tool, parse_docstring


def search(
    query: str,
    limit: int = 5,
    tags: list[int] | None = None,
    mode: Literal["fast", "exact"] = "fast",
    lang: Optional[str] = None,  # noqa: UP045 - the typing spelling must work too
) -> str:
    """Search the corpus.

    Args:
        query: What to look for.
        limit: How many hits
            to return at most.
        tags (list[int]): Tag ids to filter by.
        mode: Speed or precision.

    Returns:
        The hits, one per line.
    """
    return query


def test_search_schema_is_exact() -> None:
    assert convert_func_to_oai_tool(search) == {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the corpus.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look for."},
                    "limit": {
                        "type": "integer",
                        "default": 5,
                        "description": "How many hits to return at most.",
                    },
                    "tags": {
                        "anyOf": [
                            {"type": "array", "items": {"type": "integer"}},
                            {"type": "null"},
                        ],
                        "default": None,
                        "description": "Tag ids to filter by.",
                    },
                    "mode": {
                        "type": "string",
                        "enum": ["fast", "exact"],
                        "default": "fast",
                        "description": "Speed or precision.",
                    },
                    "lang": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
                },
                "required": ["query"],
            },
        },
    }


def test_scalar_and_container_types() -> None:
    def shapes(x: float, flag: bool, counts: dict[str, int], pair: tuple[int, str]) -> None:
        """Shapes."""

    props = convert_func_to_oai_tool(shapes)["function"]["parameters"]["properties"]
    assert props["x"] == {"type": "number"}
    assert props["flag"] == {"type": "boolean"}
    assert props["counts"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert props["pair"]["type"] == "array"
    assert props["pair"]["prefixItems"] == [{"type": "integer"}, {"type": "string"}]


def test_no_arguments_no_docstring() -> None:
    def ping():
        return "pong"

    assert convert_func_to_oai_tool(ping) == {
        "type": "function",
        "function": {
            "name": "ping",
            "description": "Call ping.",
            "parameters": {"type": "object", "properties": {}, "required": []},
        },
    }


def test_star_args_are_not_offered() -> None:
    def flexible(a: int, *rest: int, **options: Any) -> int:
        """Flexible."""
        return a

    params = convert_func_to_oai_tool(flexible)["function"]["parameters"]
    assert list(params["properties"]) == ["a"]
    assert params["required"] == ["a"]


def test_a_parameter_named_title_stays_in_the_schema() -> None:
    def open_issue(title: str, labels: dict[str, str] | None = None) -> str:
        """Open an issue.

        Args:
            title: One line saying what is wrong.
        """
        return title

    params = convert_func_to_oai_tool(open_issue)["function"]["parameters"]
    assert params["properties"]["title"] == {
        "type": "string",
        "description": "One line saying what is wrong.",
    }
    assert params["required"] == ["title"]
    assert all("title" not in schema for schema in params["properties"].values())


def test_defaults_are_kept_verbatim() -> None:
    def configure(options: dict[str, Any] | None = None, style: str = "title") -> None:
        """Configure."""

    tool = Tool.from_function(configure)
    props = tool.schema["function"]["parameters"]["properties"]
    assert props["style"]["default"] == "title"


def test_docstring_sections() -> None:
    summary, args = parse_docstring(
        """Add two numbers.

        Args:
            a: The first.
            b: The second,
                continued.
            *extra: Ignored parts.

        Raises:
            ValueError: never.
        """
    )
    assert summary == "Add two numbers."
    assert args == {"a": "The first.", "b": "The second, continued.", "extra": "Ignored parts."}


def test_callable_objects_and_async_functions() -> None:
    class Lookup:
        def __call__(self, key: str) -> str:
            """Look a key up."""
            return key

    async def fetch(url: str) -> str:
        """Fetch a page."""
        return url

    assert convert_func_to_oai_tool(Lookup())["function"]["name"] == "Lookup"
    schema = convert_func_to_oai_tool(fetch)["function"]
    assert schema["name"] == "fetch"
    assert schema["parameters"]["required"] == ["url"]


def test_valid_arguments_get_defaults_filled_in() -> None:
    tool = Tool.from_function(search)
    assert tool.validate({"query": "cats", "tags": [1, 2]}) == {
        "query": "cats",
        "limit": 5,
        "tags": [1, 2],
        "mode": "fast",
        "lang": None,
    }


def scale(x: float, times: int, label: str, exact: bool) -> str:
    return f"{label}:{x * times}:{exact}"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        # exact types: taken as they are
        ({"x": 1.5, "times": 2, "label": "a", "exact": True}, None),
        # the same checks as pydantic for everything else: coerced or refused
        ({"x": 2, "times": 2, "label": "a", "exact": True}, {"x": 2.0}),
        ({"x": 1.5, "times": "3", "label": "a", "exact": False}, {"times": 3}),
        # ... except a boolean for a number: refused (see test_tool_arguments.py)
        ({"x": 1.5, "times": True, "label": "a", "exact": False}, ValueError),
        ({"x": 1.5, "times": 2, "label": "a", "colour": 1}, ValueError),
        ({"x": 1.5, "times": 2, "label": "a"}, ValueError),
    ],
)
def test_plain_parameters_validate_like_pydantic(arguments: dict[str, Any], expected: Any) -> None:
    tool = Tool.from_function(scale)
    if expected is ValueError:
        with pytest.raises(ValueError, match="invalid arguments for scale"):
            tool.validate(arguments)
        return
    result = tool.validate(arguments)
    assert result == {**arguments, **(expected or {})}
    assert all(type(result[k]) is type(v) for k, v in (expected or {}).items())


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({}, "query: Field required"),
        ({"query": "x", "limit": "many"}, "limit: Input should be a valid integer"),
        ({"query": "x", "tags": ["a"]}, "tags"),
        ({"query": "x", "mode": "slow"}, "mode: Input should be 'fast' or 'exact'"),
        ({"query": "x", "colour": "red"}, "colour: Extra inputs are not permitted"),
        ({"query": ["not", "a", "string"]}, "query: Input should be a valid string"),
    ],
)
def test_invalid_arguments_say_what_is_off(arguments: dict[str, Any], problem: str) -> None:
    tool = Tool.from_function(search)
    with pytest.raises(ValueError, match="invalid arguments for search") as caught:
        tool.validate(arguments)
    assert problem in str(caught.value)


def test_hidden_arguments_leave_the_schema_and_are_refused() -> None:
    def run(code: str, sandbox_id: str) -> str:
        """Run code.

        Args:
            code: Python source.
            sandbox_id: Where to run it.
        """
        return code

    tool = Tool.from_function(run, hidden_args=["sandbox_id"])
    params = tool.schema["function"]["parameters"]
    assert params["properties"] == {"code": {"type": "string", "description": "Python source."}}
    assert params["required"] == ["code"]
    assert tool.validate({"code": "1"}) == {"code": "1"}
    with pytest.raises(ValueError, match="sandbox_id: Extra inputs are not permitted"):
        tool.validate({"code": "1", "sandbox_id": "other"})


def test_hiding_a_parameter_that_does_not_exist_is_an_error() -> None:
    def run(code: str) -> str:
        return code

    with pytest.raises(ValueError, match=r"no parameter\(s\) \['session'\] to hide"):
        Tool.from_function(run, hidden_args=["session"])


def repeat(text: str, times: int) -> str:
    """Repeat a text."""
    return text * min(times, 3)


def totals(counts: list[int]) -> int:
    """Sum counts."""
    return sum(counts)


#: Python's default limit on the digits of an integer read from text.
MAX_INTEGER_DIGITS = 4300


TOO_LONG = "9" * (MAX_INTEGER_DIGITS + 700)


@pytest.mark.parametrize(
    ("func", "arguments", "where"),
    [
        (repeat, {"text": "a", "times": TOO_LONG}, "times"),
        (repeat, {"text": "a", "times": "-" + TOO_LONG}, "times"),
        (totals, {"counts": [1, TOO_LONG]}, "counts.1"),
    ],
)
def test_an_integer_with_too_many_digits_is_named_in_the_projects_words(
    func: Any, arguments: dict[str, Any], where: str
) -> None:
    with pytest.raises(ValueError) as caught:
        Tool.from_function(func).validate(arguments)
    message = str(caught.value)
    assert (
        f"{where}: the integer has {MAX_INTEGER_DIGITS + 700} digits, too long to read; "
        f"send an integer of at most {MAX_INTEGER_DIGITS} digits"
    ) in message
    assert "exceeded maximum size" not in message and "set_int_max_str_digits" not in message


def test_a_float_too_large_for_an_integer_says_to_send_digits() -> None:
    with pytest.raises(ValueError) as caught:
        Tool.from_function(repeat).validate({"text": "a", "times": 1e20})
    message = str(caught.value)
    assert "times: 1e+20 is too large to read as an integer" in message
    assert "send the integer's digits, with no decimal point or exponent" in message
    assert Tool.from_function(repeat).validate({"text": "a", "times": 10**20})["times"] == 10**20


def test_json_arguments_with_a_too_long_integer_literal_are_refused_in_the_projects_words() -> None:
    """`json.loads` fails on such a literal with Python's own wording ("Exceeds the
    limit (4300 digits) for integer string conversion ... sys.set_int_max_str_digits()"),
    which tells the model nothing it can do."""
    assert tools.MAX_INTEGER_DIGITS == MAX_INTEGER_DIGITS
    decoder = json.JSONDecoder(parse_int=tools.read_json_integer)
    assert decoder.decode('{"n": -12, "m": [3]}') == {"n": -12, "m": [3]}
    with pytest.raises(ValueError) as caught:
        decoder.decode(f'{{"times": {TOO_LONG}}}')
    message = str(caught.value)
    assert message.startswith(
        f"an integer in the arguments has {MAX_INTEGER_DIGITS + 700} digits, too long to read"
    )
    assert f"send an integer of at most {MAX_INTEGER_DIGITS} digits" in message
    assert "set_int_max_str_digits" not in message
