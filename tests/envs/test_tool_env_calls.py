"""ToolEnv calls: odd names, missing ids, odd signatures and odd results.

Each test drives a real ToolEnv (directly through `env_response`, or through a rollout
against the project's model server on loopback) or a real `Tool` built from a function.
"""

from __future__ import annotations

import copy
import functools
import warnings
from typing import Annotated, Any

import pydantic
import pytest
from scripted_models import scripted
from tool_calls import call

import vfgym as vf
from vfgym.envs import StatefulToolEnv, ToolEnv
from vfgym.rubrics import ToolRubric
from vfgym.tools.schema import Tool, convert_func_to_oai_tool
from vfgym.types import State

QUESTION = [{"role": "user", "content": "What is 2+3?"}]


ROWS = [{"prompt": QUESTION, "answer": "5"}]


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def divide(a: int, b: int) -> float:
    """Divide a by b."""
    return a / b


async def answer(env: ToolEnv, *calls: Any) -> tuple[list[dict[str, Any]], State]:
    """The env's replies to one assistant turn holding `calls`, with a fresh State."""
    turn = {"role": "assistant", "content": "", "tool_calls": list(calls)}
    state: State = {}
    replies, state = await env.env_response([*QUESTION, turn], state)
    return replies, state


async def test_a_huge_unknown_tool_name_is_shortened_in_the_reply_and_the_records(
    model_server,
) -> None:
    huge = "z" * 100_000
    # A window wide enough for the model to write the whole name as its tool call.
    server = await model_server(
        scripted([call(huge, {}, "c1")], "gave up"), max_model_len=1_000_000
    )
    env = ToolEnv(tools=[add], dataset=ROWS)
    completion, state = await env.rollout(server.client(), "m", QUESTION)
    reply = next(m for m in completion if m["role"] == "tool")
    assert reply["tool_call_id"] == "c1"
    assert len(reply["content"]) < 400, "the reply echoes the whole name"
    assert "unknown tool 'zzzz" in reply["content"]
    assert "100000 characters" in reply["content"]
    assert "the available tools are: add" in reply["content"]
    (recorded,) = state["tools_called"]
    assert len(recorded) < 120 and recorded.startswith("zzzz") and "100000" in recorded
    assert state["tool_call_log"][0]["name"] == recorded
    # What went back to the model carried the short form only.
    assert len(server.requests[1]["messages"][-1]["content"]) < 400


async def test_a_short_unknown_tool_name_is_kept_whole() -> None:
    replies, state = await answer(ToolEnv(tools=[add], dataset=ROWS), call("subtract", {}, "c1"))
    assert "unknown tool 'subtract';" in replies[0]["content"]
    assert state["tools_called"] == ["subtract"]


async def test_a_huge_extra_argument_name_is_shortened_in_the_reply() -> None:
    huge = "k" * 100_000
    replies, _ = await answer(
        ToolEnv(tools=[add], dataset=ROWS), call("add", {"a": 1, "b": 2, huge: 0}, "c")
    )
    content = replies[0]["content"]
    assert len(content) < 400, "the reply echoes the whole argument name"
    assert "Extra inputs are not permitted" in content and "100000 characters" in content


ID_LESS = {
    "succeeds": call("add", {"a": 2, "b": 3}),
    "raises": call("divide", {"a": 1, "b": 0}),
    "bad arguments": call("add", {"a": "two", "b": 3}),
    "bad JSON": call("add", "{"),
    "unknown tool": call("subtract", {}),
}


@pytest.mark.parametrize("case", list(ID_LESS))
async def test_a_call_without_an_id_and_its_reply_share_one_id(case: str) -> None:
    env = ToolEnv(tools=[add, divide], dataset=ROWS)
    bad = copy.deepcopy(ID_LESS[case])
    replies, state = await answer(env, call("add", {"a": 1, "b": 1}, "given"), bad)
    assert replies[0]["tool_call_id"] == "given"
    reply_id = replies[1]["tool_call_id"]
    assert reply_id, "a tool reply must carry the id of its call"
    # The assistant turn now names its call by that id, so the conversation is valid
    # for an OpenAI-compatible server; the log agrees with both.
    assert bad["id"] == reply_id
    assert [entry["id"] for entry in state["tool_call_log"]] == ["given", reply_id]


async def test_made_up_ids_never_collide_with_given_ones() -> None:
    env = ToolEnv(tools=[add], dataset=ROWS)
    replies, _ = await answer(
        env,
        call("add", {"a": 1, "b": 1}),
        call("add", {"a": 2, "b": 2}, "call_0"),
        call("add", {"a": 3, "b": 3}, ""),
    )
    ids = [reply["tool_call_id"] for reply in replies]
    assert ids[1] == "call_0"
    assert len(set(ids)) == 3 and all(ids)


async def test_a_call_without_an_id_sent_back_to_the_model_server_matches_its_reply(
    model_server,
) -> None:
    """A replayed conversation (ids lost) goes on against a real server: what the
    server receives pairs every tool reply with a call of the assistant turn."""
    server = await model_server(scripted("5"))
    env = ToolEnv(tools=[add], dataset=ROWS)
    turn = {"role": "assistant", "content": "", "tool_calls": [call("add", {"a": 2, "b": 3})]}
    messages = [*QUESTION, turn]
    replies, _ = await env.env_response(messages, {})
    client = server.client()
    try:
        response = await client.chat.completions.create(
            model="m", messages=[*messages, *replies], tools=env.oai_tools
        )
    finally:
        await client.close()
    assert response.choices[0].message.content == "5"
    sent = server.requests[0]["messages"]
    call_ids = {c["id"] for c in sent[1]["tool_calls"]}
    assert sent[2]["tool_call_id"] in call_ids


def power(base: int, exponent: int = 2, /) -> int:
    """Raise base to a power."""
    return base**exponent


async def test_positional_only_parameters_are_passed_by_position() -> None:
    env = ToolEnv(tools=[power], dataset=ROWS)
    replies, state = await answer(
        env, call("power", {"base": 3, "exponent": 3}, "a"), call("power", {"base": 5}, "b")
    )
    assert [r["content"] for r in replies] == ["27", "25"]
    assert [entry["ok"] for entry in state["tool_call_log"]] == [True, True]


def keyword_only(text: str, *, times: int = 1, sep: str = "-") -> str:
    """Repeat text."""
    return sep.join([text] * times)


async def test_keyword_only_parameters_are_offered_and_passed() -> None:
    env = ToolEnv(tools=[keyword_only], dataset=ROWS)
    props = env.oai_tools[0]["function"]["parameters"]["properties"]
    assert list(props) == ["text", "times", "sep"]
    replies, _ = await answer(env, call("keyword_only", {"text": "ab", "times": 3}, "k"))
    assert replies[0]["content"] == "ab-ab-ab"


def configure(model_config: str, json: str, _private: int = 0) -> str:
    """Parameters named like pydantic's own attributes."""
    return f"{model_config}/{json}/{_private}"


def test_parameters_named_like_pydantic_attributes_are_offered() -> None:
    with warnings.catch_warnings():
        # pydantic's "shadows an attribute in parent BaseModel" must not come either
        warnings.simplefilter("error", UserWarning)
        tool = Tool.from_function(configure)
    params = tool.schema["function"]["parameters"]
    assert list(params["properties"]) == ["model_config", "json", "_private"]
    assert params["required"] == ["model_config", "json"]
    assert tool.validate({"model_config": "a", "json": "b"}) == {
        "model_config": "a",
        "json": "b",
        "_private": 0,
    }
    with pytest.raises(ValueError, match="model_config: Input should be a valid string"):
        tool.validate({"model_config": 5, "json": "b"})


async def test_a_tool_with_a_model_config_parameter_can_be_called() -> None:
    env = ToolEnv(tools=[configure], dataset=ROWS)
    replies, _ = await answer(env, call("configure", {"model_config": "a", "json": "b"}, "x"))
    assert replies[0]["content"] == "a/b/0"


def test_annotated_constraints_are_in_the_schema_and_enforced() -> None:
    def pick(count: Annotated[int, pydantic.Field(ge=1, description="How many.")]) -> str:
        """Pick some."""
        return str(count)

    tool = Tool.from_function(pick)
    prop = tool.schema["function"]["parameters"]["properties"]["count"]
    assert prop["minimum"] == 1 and prop["description"] == "How many."
    with pytest.raises(ValueError, match="count: Input should be greater than or equal to 1"):
        tool.validate({"count": 0})


def unresolved(path: str, missing: NotDefinedAnywhere) -> str:  # noqa: F821
    """One annotation cannot be resolved."""
    return path


def test_one_unresolvable_annotation_keeps_the_other_types() -> None:
    props = convert_func_to_oai_tool(unresolved)["function"]["parameters"]["properties"]
    assert props["path"] == {"type": "string"}
    assert props["missing"] == {}


class Opaque:
    """A type with no JSON form."""


def test_a_parameter_type_without_a_json_form_is_a_clear_error() -> None:
    def handle(name: str, thing: Opaque) -> str:
        return name

    with pytest.raises(ValueError, match=r"tool 'handle'.*parameter 'thing'.*Opaque"):
        Tool.from_function(handle)


def lookup(table: str, key: str) -> str:
    """Look a key up in a table.

    Args:
        table: Which table.
        key: The key to find.
    """
    return f"{table}[{key}]"


def test_a_partial_is_described_by_the_function_it_wraps() -> None:
    schema = convert_func_to_oai_tool(functools.partial(lookup, "users"))["function"]
    assert schema["name"] == "lookup"
    assert schema["description"] == "Look a key up in a table."
    assert schema["parameters"]["properties"] == {
        "key": {"type": "string", "description": "The key to find."}
    }


async def test_a_partial_tool_is_counted_under_the_name_the_rubric_uses() -> None:
    tool = functools.partial(lookup, "users")
    env = ToolEnv(tools=[tool], dataset=ROWS)
    replies, state = await answer(env, call("lookup", {"key": "ada"}, "c"))
    assert replies[0]["content"] == "users[ada]"
    rubric = ToolRubric(tools=[tool])
    assert rubric.tool_names == state["tools_called"] == ["lookup"]


def test_a_callable_object_is_described_by_its_call_method() -> None:
    class Counter:
        def __call__(self, word: str, limit: int = 3) -> int:
            """Count the letters of a word.

            Args:
                word: The word.
            """
            return min(len(word), limit)

    schema = convert_func_to_oai_tool(Counter())["function"]
    assert schema["description"] == "Count the letters of a word."
    assert schema["parameters"]["properties"] == {
        "word": {"type": "string", "description": "The word."},
        "limit": {"type": "integer", "default": 3},
    }


@pytest.mark.parametrize(
    "bad_name",
    ["<lambda>", "two words", "x" * 65, "näme"],
    ids=["lambda", "space", "long", "accent"],
)
def test_a_tool_name_an_openai_server_refuses_is_an_error_at_construction(bad_name: str) -> None:
    def tool() -> str:
        return "ok"

    tool.__name__ = bad_name
    with pytest.raises(ValueError, match="tool name"):
        ToolEnv(tools=[tool], dataset=ROWS)


def test_a_lambda_tool_is_refused_with_advice() -> None:
    with pytest.raises(ValueError, match="def"):
        ToolEnv(tools=[lambda x: x], dataset=ROWS)


def test_duplicate_tool_names_at_construction_are_an_error() -> None:
    def first() -> str:
        return "1"

    def second() -> str:
        return "2"

    second.__name__ = "first"
    with pytest.raises(ValueError, match="a tool named 'first' is already registered"):
        ToolEnv(tools=[first, second], dataset=ROWS)


def read_bytes() -> bytes:
    """Read raw bytes."""
    return "héllo\nwörld".encode() + b"\xff"


async def test_a_bytes_result_is_sent_as_text() -> None:
    replies, _ = await answer(
        ToolEnv(tools=[read_bytes], dataset=ROWS), call("read_bytes", {}, "r")
    )
    assert replies[0]["content"] == "héllo\nwörld\ufffd"


async def test_none_and_dict_results() -> None:
    def nothing() -> None:
        """Return nothing."""

    def mapping() -> dict[str, int]:
        """Return a dict."""
        return {"a": 1}

    replies, _ = await answer(
        ToolEnv(tools=[nothing, mapping], dataset=ROWS),
        call("nothing", {}, "n"),
        call("mapping", {}, "m"),
    )
    assert [r["content"] for r in replies] == ["", '{"a": 1}']


class Abort(BaseException):
    """A control-flow signal, not an error of the tool's."""


def abort() -> str:
    """Stop everything."""
    raise Abort("stop")


async def test_a_base_exception_from_a_tool_is_not_swallowed() -> None:
    """KeyboardInterrupt, SystemExit and their kin must reach the caller, not the model."""
    env = ToolEnv(tools=[abort], dataset=ROWS)
    with pytest.raises(Abort):
        await answer(env, call("abort", {}, "a"))


class Workspace(StatefulToolEnv):
    """A StatefulToolEnv whose hidden argument is positional-only."""

    def update_tool_args(self, tool_name, tool_args, messages, state, **kwargs):
        return {**tool_args, "root": "/w"}


def join(root: str, name: str, /) -> str:
    """Join a file name to the workspace root."""
    return f"{root}/{name}"


async def test_stateful_tools_with_a_hidden_positional_only_argument() -> None:
    env = Workspace(tools=[], dataset=ROWS)
    env.add_tool(join, args_to_skip=["root"])
    replies, _ = await answer(env, call("join", {"name": "a.txt"}, "j"))
    assert replies[0]["content"] == "/w/a.txt"
    env.remove_tool(join)
    assert env.skipped_args == {}


class LaconicEnv(ToolEnv):
    """A call_tool override written against verifiers that leaves out the call's id."""

    async def call_tool(self, tool_name, tool_args, tool_call_id, **kwargs):
        return {"role": "tool", "content": str(self.tool_map[tool_name](**tool_args))}


async def test_a_call_tool_override_that_leaves_out_the_id_still_answers_its_call() -> None:
    replies, state = await answer(
        LaconicEnv(tools=[add], dataset=ROWS), call("add", {"a": 1, "b": 2}, "c7")
    )
    assert replies == [{"role": "tool", "content": "3", "tool_call_id": "c7"}]
    assert state["tool_call_log"][0]["id"] == "c7"


SAY_HI = [{"role": "user", "content": "Say hi."}]


def repeat(text: str, times: int) -> str:
    """Repeat a text."""
    return text * min(times, 3)


#: Python's default limit on the digits of an integer read from text.
MAX_INTEGER_DIGITS = 4300


TOO_LONG = "9" * (MAX_INTEGER_DIGITS + 700)


async def test_a_tool_env_tells_the_model_an_integer_literal_is_too_long() -> None:
    env = vf.ToolEnv(tools=[repeat], dataset=[{"prompt": SAY_HI, "answer": "ok"}])
    raw = f'{{"text": "a", "times": {TOO_LONG}}}'
    call = {"id": "c", "type": "function", "function": {"name": "repeat", "arguments": raw}}
    turn = {"role": "assistant", "content": "", "tool_calls": [call]}
    replies, _ = await env.env_response([*SAY_HI, turn], {})
    assert f"send an integer of at most {MAX_INTEGER_DIGITS} digits" in replies[0]["content"]
