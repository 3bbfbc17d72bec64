"""ToolEnv and StatefulToolEnv against the model server: tool calls, bad calls, hidden args."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from scripted_models import scripted

from vfgym.engine.state import new_state
from vfgym.envs import StatefulToolEnv, ToolEnv
from vfgym.rubrics import Rubric
from vfgym.types import Messages, State

QUESTION = [{"role": "user", "content": "What is 2+3?"}]
ROWS = [{"prompt": QUESTION, "answer": "5"}]


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


async def mul(a: int, b: int) -> int:
    """Multiply two integers."""
    await asyncio.sleep(0)
    return a * b


def divide(a: int, b: int) -> float:
    """Divide a by b."""
    return a / b


def call(name: str, arguments: Any, call_id: str | None = None) -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    out: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": raw}}
    if call_id:
        out["id"] = call_id
    return out


def correct(completion: Messages, answer: str) -> float:
    return 1.0 if completion[-1]["content"] == answer else 0.0


def tool_messages(completion: Messages) -> list[dict[str, Any]]:
    return [m for m in completion if m["role"] == "tool"]


async def test_a_tool_call_is_answered_and_recorded(model_server) -> None:
    server = await model_server(scripted([call("add", {"a": 2, "b": 3}, "c1")], "5"))
    env = ToolEnv(tools=[add, mul], dataset=ROWS, rubric=Rubric(funcs=[correct]))
    out = await env.evaluate(server.client(), "m")
    completion, state = out.completion[0], out.state[0]
    assert [m["role"] for m in completion] == ["assistant", "tool", "assistant"]
    assert completion[0]["tool_calls"][0]["id"] == "c1"
    assert completion[1] == {"role": "tool", "content": "5", "tool_call_id": "c1"}
    assert state["tools_called"] == ["add"]
    assert [entry["ok"] for entry in state["tool_call_log"]] == [True]
    assert state["stop_reason"] == "completed"
    assert out.reward == [1.0]
    first = server.requests[0]
    assert [t["function"]["name"] for t in first["tools"]] == ["add", "mul"]
    assert first["tools"][0]["function"]["parameters"]["properties"]["a"] == {
        "type": "integer",
        "description": "The first addend.",
    }


async def test_several_calls_in_one_turn_are_answered_in_order(model_server) -> None:
    server = await model_server(
        scripted(
            [
                call("mul", {"a": 2, "b": 3}, "first"),
                call("add", {"a": 1, "b": 1}, "second"),
                call("divide", {"a": 1, "b": 0}, "third"),
            ],
            "done",
        )
    )
    env = ToolEnv(tools=[add, mul, divide], dataset=ROWS)
    completion, state = await env.rollout(server.client(), "m", QUESTION)
    replies = tool_messages(completion)
    assert [(r["tool_call_id"], r["content"]) for r in replies] == [
        ("first", "6"),
        ("second", "2"),
        ("third", "Error: ZeroDivisionError: division by zero"),
    ]
    assert state["tools_called"] == ["mul", "add", "divide"]
    assert [entry["ok"] for entry in state["tool_call_log"]] == [True, True, False]
    assert completion[-1] == {"role": "assistant", "content": "done"}
    # The second request carried the assistant's calls and all three answers back.
    second = server.requests[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "tool", "tool"]


BAD_CALLS = {
    "malformed JSON": (
        call("add", '{"a": 2, "b": ', "bad"),
        "the arguments of add are not valid JSON",
    ),
    "not an object": (call("add", "[2, 3]", "bad"), "must be a JSON object, not an array"),
    "null": (call("add", "null", "bad"), "must be a JSON object, not null"),
    "unknown tool": (
        call("subtract", {"a": 2, "b": 3}, "bad"),
        "unknown tool 'subtract'; the available tools are: add, divide",
    ),
    "wrong type": (
        call("add", {"a": "two", "b": 3}, "bad"),
        "invalid arguments for add: a: Input should be a valid integer",
    ),
    "missing argument": (call("add", {"a": 2}, "bad"), "b: Field required"),
    "tool raises": (
        call("divide", {"a": 2, "b": 0}, "bad"),
        "Error: ZeroDivisionError: division by zero",
    ),
}


@pytest.mark.parametrize("case", list(BAD_CALLS))
async def test_a_bad_call_becomes_a_message_and_the_rollout_goes_on(model_server, case) -> None:
    bad, explanation = BAD_CALLS[case]
    server = await model_server(scripted([bad], [call("add", {"a": 2, "b": 3}, "good")], "5"))
    env = ToolEnv(tools=[add, divide], dataset=ROWS, rubric=Rubric(funcs=[correct]))
    out = await env.evaluate(server.client(), "m")
    completion, state = out.completion[0], out.state[0]
    error_reply, good_reply = tool_messages(completion)
    assert error_reply["tool_call_id"] == "bad"
    assert error_reply["content"].startswith("Error: ")
    assert explanation in error_reply["content"]
    assert good_reply == {"role": "tool", "content": "5", "tool_call_id": "good"}
    assert [entry["ok"] for entry in state["tool_call_log"]] == [False, True]
    assert len(state["tools_called"]) == 2
    assert "error" not in state
    assert state["stop_reason"] == "completed"
    assert out.reward == [1.0]
    # The model saw the explanation in its next request.
    assert explanation in server.requests[1]["messages"][-1]["content"]


#: Calls of the wrong shape, which a chat server never sends but a hand-written or
#: replayed conversation can hold, and what the model is told about each.
WRONG_SHAPES = {
    "function is a str": (
        {"id": "bad", "function": "add"},
        "'function' must be an object with 'name' and 'arguments', not a string",
    ),
    "arguments an int": (
        {"id": "bad", "function": {"name": "add", "arguments": 5}},
        "the arguments of add must be a JSON object written as a string, such as "
        "'{\"arg\": value}', not a number",
    ),
    "arguments a list": (
        {"id": "bad", "function": {"name": "add", "arguments": ["2", "3"]}},
        "written as a string, such as '{\"arg\": value}', not an array",
    ),
    "name a list": (
        {"id": "bad", "function": {"name": ["add"], "arguments": "{}"}},
        "a tool's name must be a string, not an array",
    ),
    "name a dict": (
        {"id": "bad", "function": {"name": {"n": 1}, "arguments": "{}"}},
        "a tool's name must be a string, not an object",
    ),
}


@pytest.mark.parametrize("case", list(WRONG_SHAPES))
async def test_a_call_of_the_wrong_shape_becomes_an_error_message(case) -> None:
    bad, explanation = WRONG_SHAPES[case]
    env = ToolEnv(tools=[add], dataset=ROWS)
    good = call("add", {"a": 2, "b": 3}, "good")
    turn = {"role": "assistant", "content": "", "tool_calls": [bad, good]}
    replies, state = await env.env_response([*QUESTION, turn], {})
    assert replies[0]["tool_call_id"] == "bad"
    assert replies[0]["content"].startswith("Error: ") and explanation in replies[0]["content"]
    assert replies[1] == {"role": "tool", "content": "5", "tool_call_id": "good"}
    assert [entry["ok"] for entry in state["tool_call_log"]] == [False, True]
    assert state["tools_called"] == ["add" if case.startswith("arguments") else "", "add"]


async def test_custom_error_formatter(model_server) -> None:
    server = await model_server(scripted([call("divide", {"a": 1, "b": 0}, "x")], "ok"))
    env = ToolEnv(tools=[divide], dataset=ROWS, error_formatter=lambda exc: f"nope ({exc})")
    completion, _ = await env.rollout(server.client(), "m", QUESTION)
    assert tool_messages(completion)[0]["content"] == "nope (division by zero)"


async def test_a_sync_tool_does_not_block_the_event_loop(model_server) -> None:
    tool_started = threading.Event()
    loop_ticked = threading.Event()

    def wait_for_the_loop() -> str:
        """Blocks its thread until the event loop has ticked while the tool runs."""
        tool_started.set()
        return "loop ran" if loop_ticked.wait(timeout=10) else "loop was blocked"

    async def ticker() -> None:
        ticks = 0
        while True:
            await asyncio.sleep(0.001)
            if tool_started.is_set():
                ticks += 1
                if ticks == 5:
                    loop_ticked.set()

    server = await model_server(scripted([call("wait_for_the_loop", {}, "w")], "done"))
    env = ToolEnv(tools=[wait_for_the_loop], dataset=ROWS)
    ticking = asyncio.create_task(ticker())
    try:
        completion, _ = await env.rollout(server.client(), "m", QUESTION)
    finally:
        ticking.cancel()
    assert tool_messages(completion)[0]["content"] == "loop ran"


async def test_tool_calls_forever_end_at_max_turns(model_server) -> None:
    server = await model_server(scripted([call("add", {"a": 1, "b": 1})]))
    env = ToolEnv(tools=[add], dataset=ROWS, max_turns=3)
    completion, state = await env.rollout(server.client(), "m", QUESTION)
    assert state["stop_reason"] == "max_turns"
    assert state["is_truncated"] is True
    assert state["tools_called"] == ["add"] * 3
    assert completion[-1]["role"] == "tool"  # the last call was answered too
    assert len(server.requests) == 3


def test_tools_can_be_added_and_removed() -> None:
    env = ToolEnv(tools=[add], dataset=ROWS)
    env.add_tool(mul)
    assert [t["function"]["name"] for t in env.oai_tools] == ["add", "mul"]
    with pytest.raises(ValueError, match="already registered"):
        env.add_tool(add)
    env.remove_tool(add)
    assert list(env.tool_map) == ["mul"]
    assert [t["function"]["name"] for t in env.oai_tools] == ["mul"]
    with pytest.raises(KeyError, match="no tool named 'add'"):
        env.remove_tool(add)


# -- StatefulToolEnv -----------------------------------------------------------------------


def read_file(path: str, workspace: dict[str, str]) -> str:
    """Read a file of the rollout's workspace.

    Args:
        path: Which file.
        workspace: Injected by the environment.
    """
    return workspace.get(path, f"no such file: {path}")


class WorkspaceEnv(StatefulToolEnv):
    """Each rollout gets its own files; the model never sees or sends the workspace."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(tools=[], **kwargs)
        self.add_tool(read_file, args_to_skip=["workspace"])
        self.injections = 0

    async def setup_state(self, state: State, **kwargs: Any) -> State:
        state["workspace"] = {"a.txt": f"secret-{state['example_id']}"}
        return state

    def update_tool_args(
        self,
        tool_name: str,
        tool_args: dict[str, Any],
        messages: Messages,
        state: State,
        **kwargs: Any,
    ) -> dict[str, Any]:
        self.injections += 1
        return {**tool_args, "workspace": state["workspace"]}


async def test_hidden_arguments_are_injected_per_rollout(model_server) -> None:
    server = await model_server(scripted([call("read_file", {"path": "a.txt"})], "read it"))
    env = WorkspaceEnv(dataset=[{"prompt": QUESTION}] * 3)
    out = await env.evaluate(server.client(), "m")
    contents = [tool_messages(c)[0]["content"] for c in out.completion]
    assert contents == ["secret-0", "secret-1", "secret-2"]
    schema = server.requests[0]["tools"][0]["function"]["parameters"]
    assert list(schema["properties"]) == ["path"]
    assert schema["required"] == ["path"]
    assert env.skipped_args == {"read_file": ["workspace"]}


async def test_a_hidden_argument_sent_by_the_model_is_refused(model_server) -> None:
    forged = call("read_file", {"path": "a.txt", "workspace": {"a.txt": "forged"}}, "f")
    server = await model_server(scripted([forged], "gave up"))
    env = WorkspaceEnv(dataset=[{"prompt": QUESTION}])
    completion, state = await env.rollout(server.client(), "m", QUESTION)
    reply = tool_messages(completion)[0]
    assert "workspace: Extra inputs are not permitted" in reply["content"]
    assert "forged" not in reply["content"]
    assert env.injections == 0
    assert state["tool_call_log"][0]["ok"] is False
    assert "error" not in state


def test_stateful_tool_env_needs_update_tool_args() -> None:
    class Incomplete(StatefulToolEnv):
        pass

    with pytest.raises(TypeError, match="update_tool_args"):
        Incomplete(dataset=ROWS)


async def test_update_tool_args_may_be_async(model_server) -> None:
    class LazyWorkspace(WorkspaceEnv):
        async def update_tool_args(self, tool_name, tool_args, messages, state, **kwargs):
            await asyncio.sleep(0)  # e.g. start the rollout's sandbox on first use
            state.setdefault("workspace", {"a.txt": "made lazily"})
            return {**tool_args, "workspace": state["workspace"]}

        async def setup_state(self, state: State, **kwargs: Any) -> State:
            return state

    server = await model_server(scripted([call("read_file", {"path": "a.txt"})], "ok"))
    completion, state = await LazyWorkspace(dataset=ROWS).rollout(server.client(), "m", QUESTION)
    assert tool_messages(completion)[0]["content"] == "made lazily"
    assert state["tool_call_log"][0]["ok"] is True


def lookup(key: str) -> str:
    """Look a key up in a remote store."""
    if key == "missing":
        raise KeyError(key)  # the model asked for something that is not there
    raise ConnectionError("the store's host is unreachable")  # the environment broke


class StoreEnv(ToolEnv):
    """A tool env whose store can fail: ConnectionError is the environment's fault."""

    infrastructure_errors = (ConnectionError,)


async def test_an_infrastructure_error_ends_the_rollout_as_an_error(model_server) -> None:
    server = await model_server(
        scripted(
            [call("lookup", {"key": "missing"}, "c1")],
            [call("lookup", {"key": "k"}, "c2")],
            "done",
        )
    )
    env = StoreEnv(tools=[lookup], dataset=ROWS)
    completion, state = await env.rollout(server.client(), "m", QUESTION)
    # The model's own bad request is its error message, and the episode went on ...
    assert tool_messages(completion)[0]["content"] == "Error: KeyError: 'missing'"
    # ... but the broken store ended it as an error, never shown to the model.
    assert len(tool_messages(completion)) == 1
    assert state["stop_reason"] == "error"
    assert state["error"]["type"] == "ConnectionError"
    assert "unreachable" in state["error"]["message"]


async def test_tool_call_records_exist_from_setup_on() -> None:
    class Counting(ToolEnv):
        """A subclass that chains setup_state, as the docs ask."""

        async def setup_state(self, state: State, **kwargs: Any) -> State:
            state = await super().setup_state(state, **kwargs)
            state["counted"] = True
            return state

    for env in (ToolEnv(tools=[add], dataset=ROWS), Counting(tools=[add], dataset=ROWS)):
        state = await env.setup_state(new_state(QUESTION, [], "5", "default", {}, 0))
        assert state["tools_called"] == [] and state["tool_call_log"] == []
    assert state["counted"] is True


@pytest.mark.parametrize("kind", ["generator", "async generator"])
def test_a_generator_tool_is_refused_when_added(kind: str) -> None:
    """Its call returns a generator object, which the model would get as its result."""

    def squares(n: int):  # type: ignore[no-untyped-def]
        """The first n squares."""
        yield from (i * i for i in range(n))

    async def asquares(n: int):  # type: ignore[no-untyped-def]
        """The first n squares."""
        for i in range(n):
            yield i * i

    tool = squares if kind == "generator" else asquares
    with pytest.raises(TypeError, match=r"generator function.*return the value"):
        ToolEnv(tools=[tool], dataset=[{"question": "q", "answer": "a"}])
