"""SandboxEnv against the model server and a real Docker Engine."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import docker
import pytest

from vfgym.rubrics import Rubric
from vfgym.sandbox import DockerSandbox
from vfgym.sandbox.env import SandboxEnv
from vfgym.sandbox.gc import sandbox_containers
from vfgym.types import Messages


def call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def scripted(*turns: Any) -> Callable[[Messages], Any]:
    """A model that plays `turns` in order; a list is a turn of tool calls."""

    def policy(messages: Messages) -> Any:
        done = sum(1 for m in messages if m["role"] == "assistant")
        turn = turns[min(done, len(turns) - 1)]
        if isinstance(turn, list):
            return {"role": "assistant", "content": None, "tool_calls": turn}
        return turn

    return policy


async def word_count(path: str, sandbox: DockerSandbox) -> str:
    """Count the words of a file in the workspace.

    Args:
        path: The file to count.
    """
    return str(len((await sandbox.read_file(path)).split()))


def answered(completion: Messages, answer: str) -> float:
    return 1.0 if completion[-1]["content"] == answer else 0.0


async def test_tools_run_in_one_sandbox_per_rollout(
    model_server: Any, make_config: Any, docker_client: docker.DockerClient
) -> None:
    rows = [
        {"prompt": [{"role": "user", "content": f"row {i}"}], "answer": "done"} for i in range(3)
    ]
    policy = scripted(
        [call("python", {"code": "import os\nmine = os.urandom(4).hex()\nmine"}, "c1")],
        [call("python", {"code": "mine"}, "c2"), call("bash", {"command": "echo $HOME"}, "c3")],
        [call("bash", {"command": "echo three words here > notes.txt"}, "c4")],
        [call("word_count", {"path": "notes.txt"}, "c5")],
        "done",
    )
    server = await model_server(policy)
    env = SandboxEnv(
        sandbox_config=make_config(),
        pool_size=2,
        tools=[word_count],
        dataset=rows,
        rubric=Rubric(funcs=[answered]),
    )
    assert "sandbox" not in json.dumps(env.oai_tools)
    async with env:
        out = await env.evaluate(server.client(), "m", max_concurrent=3)
        assert out.reward == [1.0, 1.0, 1.0]
        values = []
        for completion, state in zip(out.completion, out.state, strict=True):
            assert state["tools_called"] == ["python", "python", "bash", "bash", "word_count"]
            tools = [m["content"] for m in completion if m["role"] == "tool"]
            assert tools[0] == tools[1]  # the session kept `mine` between calls
            assert tools[2] == "/workspace" and tools[4] == "3"
            with pytest.raises(RuntimeError, match="holds no sandbox"):
                env.sandbox_for(state)  # released in cleanup_state
            values.append(tools[0])
        assert len(set(values)) == 3  # no rollout saw another's Python state
        pool = next(iter(env._pools.values()))
        assert pool.idle == 2  # every sandbox came back
    assert not sandbox_containers(docker_client, f"vfgym.sandbox.pool={pool.pool_id}")


async def test_a_failing_rollout_still_releases_its_sandbox(
    model_server: Any, make_config: Any, docker_client: docker.DockerClient
) -> None:
    rows = [{"prompt": [{"role": "user", "content": "go"}], "answer": ""}]

    def policy(messages: Messages) -> Any:
        if any(m["role"] == "tool" for m in messages):
            raise RuntimeError("the model server broke")
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("bash", {"command": "touch x"}, "c1")],
        }

    server = await model_server(policy)
    env = SandboxEnv(sandbox_config=make_config(), pool_size=1, dataset=rows, max_turns=3)
    async with env:
        out = await env.evaluate(server.client(), "m")
        assert out.state[0]["error"]  # the rollout failed ...
        pool = next(iter(env._pools.values()))
        assert pool.idle == 1
        async with pool.acquire() as sandbox:
            assert (await sandbox.run_shell("ls")).stdout == ""


def test_tools_without_a_sandbox_parameter_stay_plain() -> None:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    env = SandboxEnv(tools=[add], python_tool=False, bash_tool=False, dataset=[])
    assert env.skipped_args == {"add": []}
    with pytest.raises(ValueError, match="pool_size"):
        SandboxEnv(pool_size=0, dataset=[])


def killer(client: docker.DockerClient) -> Callable[..., Any]:
    """A tool that kills its own sandbox's container, as a crashed host would."""

    async def kill_sandbox(sandbox: DockerSandbox) -> str:
        """Kill the sandbox."""
        await asyncio.to_thread(client.api.kill, sandbox.container_id)
        return "killed"

    return kill_sandbox


async def test_a_sandbox_killed_mid_episode_is_replaced_and_the_model_told(
    model_server: Any, make_config: Any, docker_client: docker.DockerClient
) -> None:
    rows = [{"prompt": [{"role": "user", "content": "go"}], "answer": "done"}]
    policy = scripted(
        [call("python", {"code": "x = 41"}, "c1")],
        [call("kill_sandbox", {}, "c2")],
        [call("python", {"code": "x"}, "c3")],  # the call that finds it dead
        [call("python", {"code": "'x' in globals(), 1 + 1"}, "c4")],
        [call("bash", {"command": "echo still here"}, "c5")],
        "done",
    )
    server = await model_server(policy)
    env = SandboxEnv(
        sandbox_config=make_config(),
        pool_size=1,
        tools=[killer(docker_client)],
        dataset=rows,
        rubric=Rubric(funcs=[answered]),
    )
    async with env:
        out = await env.evaluate(server.client(), "m")
        state, completion = out.state[0], out.completion[0]
        pool = next(iter(env._pools.values()))
        tools = [m["content"] for m in completion if m["role"] == "tool"]
        assert "error" not in state and state["stop_reason"] == "completed"
        assert out.reward == [1.0]
        assert "crashed" in tools[2] and "replaced the crashed sandbox" in tools[2], tools[2]
        assert tools[3] == "(False, 2)"  # a fresh sandbox: the old state really is gone
        assert tools[4] == "still here"
        assert [entry["ok"] for entry in state["tool_call_log"]] == [True] * 5
        assert pool.idle == 1  # the replacement went back to the pool
    assert not sandbox_containers(docker_client, f"vfgym.sandbox.pool={pool.pool_id}")


async def test_a_sandbox_that_cannot_be_replaced_ends_the_rollout_as_an_error(
    model_server: Any, make_config: Any, docker_client: docker.DockerClient
) -> None:
    rows = [{"prompt": [{"role": "user", "content": "go"}], "answer": "done"}]
    env: SandboxEnv

    async def close_the_pool(sandbox: DockerSandbox) -> str:
        """Shut the sandbox pool down (its sandboxes die with it)."""
        await next(iter(env._pools.values())).close()
        return "closed"

    policy = scripted([call("close_the_pool", {}, "c1")], "done")
    server = await model_server(policy)
    env = SandboxEnv(
        sandbox_config=make_config(), pool_size=1, tools=[close_the_pool], dataset=rows
    )
    async with env:
        completion, state = await env.rollout(server.client(), "m", rows[0]["prompt"])
    # The sandbox died under the call and no replacement could be had: the
    # infrastructure failed, not the model, so the episode is an error and the
    # failure was never shown to the model as its tool call's result.
    assert state["stop_reason"] == "error"
    assert state["error"]["type"] == "SandboxClosedError"
    assert [m["role"] for m in completion] == ["assistant"]
