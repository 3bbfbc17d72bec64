"""Who a failure belongs to in a StatefulToolEnv: an exception from the environment's own
`update_tool_args` hook ends the rollout as the environment's error, whatever its type,
while a tool's own exception and the model's bad arguments go back to the model.

Every test plays against the project's own model server on loopback.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from scripted_models import scripted

from vfgym.envs import StatefulToolEnv, ToolEnv
from vfgym.envs.tool_env import ToolCallError
from vfgym.types import Messages, State

QUESTION = [{"role": "user", "content": "Read a.txt."}]


def call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    """One tool call in wire format."""
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def read_file(path: str, workspace: dict[str, str]) -> str:
    """Read a file of the rollout's workspace.

    Args:
        path: The file to read.
    """
    if path not in workspace:
        raise ValueError(f"no such file: {path}")  # the model's mistake: it reads this
    return workspace[path]


class BrokenWorkspace(StatefulToolEnv):
    """Fills in the hidden `workspace`, or raises `error` instead when one is given:
    the workspace could not be made, which no tool call of the model's can fix."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        super().__init__(dataset=[{"prompt": QUESTION}])
        self.add_tool(read_file, args_to_skip=["workspace"])

    def update_tool_args(
        self,
        tool_name: str,
        tool_args: dict[str, Any],
        messages: Messages,
        state: State,
        **kwargs: Any,
    ) -> dict[str, Any]:
        if self.error is not None:
            raise self.error
        return {**tool_args, "workspace": {"a.txt": "secret"}}


def tool_replies(completion: Messages) -> list[str]:
    return [m["content"] for m in completion if m["role"] == "tool"]


@pytest.mark.parametrize(
    "error",
    [
        ValueError("the workspace volume is not mounted"),
        ToolCallError("the workspace volume is not mounted"),
        KeyError("the workspace volume is not mounted"),
    ],
    ids=["ValueError", "ToolCallError", "KeyError"],
)
async def test_an_exception_from_update_tool_args_is_the_environments_error(
    model_server, error: Exception
) -> None:
    """The model did nothing wrong and can fix nothing: it must not read the hook's
    failure as its failed call, and the rollout must not be scored as if it had."""
    server = await model_server(scripted([call("read_file", {"path": "a.txt"}, "c1")], "done"))
    env = BrokenWorkspace(error)
    out = await env.generate([{"prompt": QUESTION}], server.client(), "m")
    state = out.state[0]
    assert state["error"]["type"] == type(error).__name__
    assert "the workspace volume is not mounted" in state["error"]["message"]
    assert state["stop_reason"] == "error"
    assert tool_replies(out.completion[0]) == []  # nothing was shown to the model
    assert len(server.requests) == 1  # and it was not asked again
    assert out.metadata["num_errored"] == 1


async def test_the_tools_own_value_error_still_goes_back_to_the_model(model_server) -> None:
    server = await model_server(
        scripted(
            [call("read_file", {"path": "b.txt"}, "c1")],
            [call("read_file", {"path": "a.txt"}, "c2")],
            "done",
        )
    )
    completion, state = await BrokenWorkspace().rollout(server.client(), "m", QUESTION)
    assert tool_replies(completion) == ["Error: ValueError: no such file: b.txt", "secret"]
    assert [entry["ok"] for entry in state["tool_call_log"]] == [False, True]
    assert "error" not in state


async def test_bad_arguments_from_the_model_still_go_back_to_it(model_server) -> None:
    """Bad arguments are refused before the hook runs, as the model's error."""
    server = await model_server(
        scripted(
            [call("read_file", {"path": 3}, "c1")],
            [call("read_file", {"file": "a.txt"}, "c2")],
            "done",
        )
    )
    env = BrokenWorkspace(ValueError("the hook must not run for a refused call"))
    completion, state = await env.rollout(server.client(), "m", QUESTION)
    first, second = tool_replies(completion)
    assert first.startswith("Error: invalid arguments for read_file: path")
    assert "the parameters of read_file are: path" in second
    assert "error" not in state
    assert state["stop_reason"] != "error"


class Labelled(ToolEnv):
    """A plain ToolEnv whose `prepare_tool_args` hook fails: the same rule holds."""

    def prepare_tool_args(
        self, tool_name: str, tool_args: dict[str, Any], messages: Messages, state: State, **kw: Any
    ) -> dict[str, Any]:
        raise ValueError("the label service is not configured")


def echo(text: str) -> str:
    """Say the text back."""
    return text


async def test_a_value_error_from_prepare_tool_args_is_the_environments_error(
    model_server,
) -> None:
    server = await model_server(scripted([call("echo", {"text": "hi"}, "c1")], "done"))
    env = Labelled(tools=[echo], dataset=[{"prompt": QUESTION}])
    completion, state = await env.rollout(server.client(), "m", QUESTION)
    assert state["error"]["type"] == "ValueError"
    assert "the label service is not configured" in state["error"]["message"]
    assert tool_replies(completion) == []
