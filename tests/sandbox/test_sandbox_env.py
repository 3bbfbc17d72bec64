"""SandboxEnv against the model server and a real Docker Engine."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import docker
import pytest
from scripted_models import scripted
from tool_calls import tool_call as call

import vfgym as vf
from vfgym.rubrics import Rubric
from vfgym.sandbox import DockerSandbox
from vfgym.sandbox.env import SandboxEnv
from vfgym.sandbox.gc import sandbox_containers
from vfgym.types import Messages, State


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


async def test_a_tool_whose_own_sandbox_dies_under_it_is_answered_not_ended(
    model_server: Any, make_config: Any, docker_client: docker.DockerClient
) -> None:
    """The model's program took the sandbox down, and the tool then touched it again:
    the model's doing, so the sandbox is replaced and the model told."""

    async def kill_then_read(sandbox: DockerSandbox) -> str:
        """Kill the sandbox, then read a file from it."""
        await asyncio.to_thread(docker_client.api.kill, sandbox.container_id)
        return (await sandbox.read_file("out.txt")).decode()  # SandboxLostError

    rows = [{"prompt": [{"role": "user", "content": "go"}], "answer": "done"}]
    policy = scripted(
        [call("kill_then_read", {}, "c1")], [call("bash", {"command": "echo alive"}, "c2")], "done"
    )
    server = await model_server(policy)
    env = SandboxEnv(
        sandbox_config=make_config(), pool_size=1, tools=[kill_then_read], dataset=rows
    )
    async with env:
        out = await env.evaluate(server.client(), "m")
        state, completion = out.state[0], out.completion[0]
        tools = [m["content"] for m in completion if m["role"] == "tool"]
        assert "error" not in state and state["stop_reason"] == "completed"
        assert "SandboxLostError" in tools[0] and "replaced the crashed sandbox" in tools[0]
        assert tools[1] == "alive"
        pool = next(iter(env._pools.values()))
    assert not sandbox_containers(docker_client, f"vfgym.sandbox.pool={pool.pool_id}")


async def test_closing_the_env_mid_rollout_ends_it_without_starting_a_new_pool(
    model_server: Any, make_config: Any, docker_client: docker.DockerClient
) -> None:
    rows = [{"prompt": [{"role": "user", "content": "go"}], "answer": "done"}]
    policy = scripted(
        [call("bash", {"command": "sleep 3; echo slept"}, "c1")],
        [call("bash", {"command": "echo second"}, "c2")],
        "done",
    )
    server = await model_server(policy)
    env = SandboxEnv(sandbox_config=make_config(), pool_size=2, dataset=rows)
    try:
        rollout = asyncio.ensure_future(
            env.rollout(server.client(), "m", [{"role": "user", "content": "go"}])
        )
        await asyncio.sleep(1.5)  # inside the `sleep 3` call
        pool = next(iter(env._pools.values()))
        await env.aclose()
        _, state = await rollout
        assert state["stop_reason"] == "error"
        assert state["error"]["type"] == "SandboxClosedError"
        assert env._pools == {}  # no new pool, which nothing would have closed
    finally:
        await env.aclose()
    assert not sandbox_containers(docker_client, f"vfgym.sandbox.pool={pool.pool_id}")


async def test_the_replaced_note_goes_with_the_call_that_ran_in_the_new_sandbox(
    model_server: Any, make_config: Any, docker_client: docker.DockerClient
) -> None:
    def add(a: int, b: int) -> int:
        """Add two whole numbers.

        Args:
            a: the first
            b: the second
        """
        return a + b

    async def peek(path: str, sandbox: DockerSandbox) -> str:
        """Show a file of the workspace.

        Args:
            path: the file
        """
        return (await sandbox.read_file(path)).decode()

    async def slow(seconds: int, sandbox: DockerSandbox) -> str:
        """Sleep, with a 1 s deadline of the tool's own (which breaks the sandbox's stream).

        Args:
            seconds: how long
        """
        return (await asyncio.wait_for(sandbox.run_shell(f"sleep {seconds}"), 1)).summary()

    rows = [{"prompt": [{"role": "user", "content": "go"}], "answer": "done"}]
    policy = scripted(
        [call("slow", {"seconds": 5}, "c1")],  # the tool's own timeout: the sandbox is lost
        [call("peek", {"path": "nope.txt"}, "c2")],  # finds it dead; then fails on its own
        [call("add", {"a": 1, "b": 2}, "c3")],
        "done",
    )
    server = await model_server(policy)
    env = SandboxEnv(
        sandbox_config=make_config(), pool_size=1, tools=[slow, peek, add], dataset=rows
    )
    async with env:
        out = await env.evaluate(server.client(), "m")
        tools = [m["content"] for m in out.completion[0] if m["role"] == "tool"]
        assert "crashed since your last call" in tools[1] and "nope.txt" in tools[1]
        assert tools[2] == "3"  # no note: this call ran in no sandbox at all


async def test_an_error_answered_with_the_replaced_note_is_cut_to_the_result_cap(
    model_server: Any, make_config: Any, docker_client: docker.DockerClient
) -> None:
    async def slow(seconds: int, sandbox: DockerSandbox) -> str:
        """Sleep, with a 1 s deadline of the tool's own (which breaks the sandbox's stream).

        Args:
            seconds: how long
        """
        return (await asyncio.wait_for(sandbox.run_shell(f"sleep {seconds}"), 1)).summary()

    async def shout(sandbox: DockerSandbox) -> str:
        """Fail with a very long message."""
        raise ValueError("no " * 20_000)

    rows = [{"prompt": [{"role": "user", "content": "go"}], "answer": "done"}]
    policy = scripted(
        [call("slow", {"seconds": 5}, "c1")],  # the sandbox is lost
        [call("shout", {}, "c2")],  # runs in a fresh one, and fails at length
        "done",
    )
    server = await model_server(policy)
    env = SandboxEnv(
        sandbox_config=make_config(),
        pool_size=1,
        tools=[slow, shout],
        dataset=rows,
        max_tool_result_chars=2_000,
    )
    async with env:
        out = await env.evaluate(server.client(), "m")
        reply = [m["content"] for m in out.completion[0] if m["role"] == "tool"][1]
        assert "crashed since your last call" in reply and "ValueError" in reply
        assert len(reply) < 2_000 + 400  # the cut text, its note and the sandbox note


async def test_calls_of_one_turn_that_find_the_sandbox_dead_replace_it_once(
    make_config: Any, docker_client: docker.DockerClient
) -> None:
    from vfgym.engine.state import new_state

    env = SandboxEnv(sandbox_config=make_config(), pool_size=2, dataset=[])
    state = new_state([{"role": "user", "content": "go"}], [], "", "default", {}, 0)
    async with env:
        await env.setup_state(state)
        try:
            dead = env.sandbox_for(state)
            await asyncio.to_thread(docker_client.api.kill, dead.container_id)
            await dead.run_shell("true")  # the kill is noticed
            assert not dead.alive
            given = await asyncio.gather(
                *(env.update_tool_args("bash", {"command": "true"}, [], state) for _ in range(2))
            )
            fresh = env.sandbox_for(state)
            assert [args["sandbox"] for args in given] == [fresh, fresh] and fresh is not dead
        finally:
            await env.cleanup_state(state)
        pool = next(iter(env._pools.values()))
        assert not pool._leased  # the dead one and its replacement both went back


async def test_the_bash_tool_says_how_to_run_a_script_in_the_noexec_workspace(
    model_server: Any, make_config: Any
) -> None:
    script = "printf '#!/bin/sh\\necho ran\\n' > run.sh && chmod +x run.sh"
    policy = scripted(
        [call("bash", {"command": script}, "c1")],
        [
            call("bash", {"command": "./run.sh"}, "c2"),
            call("bash", {"command": "bash run.sh"}, "c3"),
        ],
        "done",
    )
    server = await model_server(policy)
    env = SandboxEnv(
        sandbox_config=make_config(), pool_size=1, dataset=[{"question": "go", "answer": "done"}]
    )
    (bash,) = [t for t in env.oai_tools if t["function"]["name"] == "bash"]
    assert "run a script with its interpreter" in bash["function"]["description"]
    async with env:
        out = await env.evaluate(server.client(), "m")
    direct, interpreted = [m["content"] for m in out.completion[0] if m["role"] == "tool"][1:]
    assert "Permission denied" in direct  # as the description warns
    assert interpreted.strip() == "ran"


COUNTDOWN_ROWS = [{"question": "Count down from 2.", "answer": "2"}]


async def run_in(code: str, box: DockerSandbox) -> str:
    """Run code.

    Args:
        code: The code.
    """
    return (await box.run_python(code)).summary()


async def run_code(code: str, sandbox: DockerSandbox) -> str:
    """Run code.

    Args:
        code: The code.
    """
    return (await sandbox.run_python(code)).summary()


def test_a_sandbox_parameter_under_another_name_says_to_call_it_sandbox() -> None:
    with pytest.raises(TypeError, match=r"'run_in'.*'box'.*name it `sandbox`"):
        SandboxEnv(tools=[run_in], dataset=COUNTDOWN_ROWS)


def test_a_sandbox_tool_in_a_plain_tool_env_says_to_use_a_sandbox_env() -> None:
    with pytest.raises(ValueError, match=r"'sandbox'.*vf\.SandboxEnv"):
        vf.ToolEnv(tools=[run_code], dataset=COUNTDOWN_ROWS)


ROWS = [{"question": "Write square(x).", "answer": ""}]


SOLUTION = "def square(x):\n    return x * x"


async def run_solution(code: str, sandbox: DockerSandbox) -> str:
    """Run the solution against the hidden tests.

    Args:
        code: Python source defining square(x).
    """
    result = await sandbox.run_python(f"{code}\nassert square(3) == 9\n'passed'")
    return result.summary()


def run_solution_blocking(code: str, sandbox: DockerSandbox) -> str:
    """Run the solution, written as a sync tool that runs the sandbox on a loop of its own.

    Args:
        code: Python source defining square(x).
    """
    return asyncio.run(sandbox.run_python(code)).summary()


def passed(state: State) -> float:
    replies = [m["content"] for m in state["completion"] if m["role"] == "tool"]
    return float(any("passed" in reply for reply in replies))


def sandboxed(
    tool: Any, make_config: Any, cls: type[SandboxEnv] = SandboxEnv, **kwargs: Any
) -> SandboxEnv:
    return cls(
        tools=[tool],
        python_tool=False,
        bash_tool=False,
        dataset=ROWS,
        rubric=Rubric(funcs=[passed]),
        sandbox_config=make_config(),
        pool_size=1,
        max_turns=3,
        **kwargs,
    )


class SyncPrepare(SandboxEnv):
    """A `prepare_sandbox` written as a plain `def`, as the README allows for hooks."""

    def prepare_sandbox(self, sandbox: DockerSandbox, state: State) -> None:  # type: ignore[override]
        state["prepared"] = sandbox.container_id


async def test_a_tool_of_the_authors_runs_model_code_in_the_sandbox(
    model_server: Any, make_config: Any, docker_client: docker.DockerClient
) -> None:
    server = await model_server(scripted([call("run_solution", {"code": SOLUTION})], "done"))
    async with sandboxed(run_solution, make_config) as env:
        assert "sandbox" not in json.dumps(env.oai_tools)
        out = await env.evaluate(server.client(), "m")
    assert out.reward == [1.0] and out.state[0].get("error") is None


async def test_a_sync_prepare_sandbox_hook_is_run(
    model_server: Any, make_config: Any, docker_client: docker.DockerClient
) -> None:
    server = await model_server(scripted([call("run_solution", {"code": SOLUTION})], "done"))
    async with sandboxed(run_solution, make_config, SyncPrepare) as env:
        out = await env.evaluate(server.client(), "m")
    state = out.state[0]
    assert state.get("error") is None and state["prepared"]
    assert out.reward == [1.0]


async def test_a_sandbox_run_on_another_event_loop_ends_the_rollout_clearly(
    model_server: Any, make_config: Any, docker_client: docker.DockerClient
) -> None:
    """A sync tool that drives the async sandbox with asyncio.run(): the author's error,
    said as such, not fed to the model as a failed call; the sandbox stays usable."""
    policy = scripted([call("run_solution_blocking", {"code": SOLUTION})], "done")
    server = await model_server(policy)
    # (in a worker thread, where "auto" runs a sync tool's first calls too)
    env = sandboxed(run_solution_blocking, make_config, offload_sync="always")
    async with env:
        out = await env.evaluate(server.client(), "m")
        error = out.state[0]["error"]
        assert error["type"] == "SandboxLoopError", error
        assert "event loop" in error["message"] and "async def" in error["message"]
        assert not [m for m in out.completion[0] if m["role"] == "tool"]
        pool = next(iter(env._pools.values()))
        async with pool.acquire() as sandbox:  # wiped and handed on, not broken
            assert (await sandbox.run_python("6 * 7")).value == "42"
