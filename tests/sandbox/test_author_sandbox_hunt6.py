"""An author's sandboxed tool task: model-written Python run by a tool of the author's,
with the mistakes an author makes in one met by clear errors (real Docker Engine)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import docker
from scripted_models import scripted
from tool_calls import tool_call as call

from vfgym.rubrics import Rubric
from vfgym.sandbox import DockerSandbox
from vfgym.sandbox.env import SandboxEnv
from vfgym.types import State

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


async def test_a_tool_of_the_authors_runs_model_code_in_the_sandbox(
    model_server: Any, make_config: Any, docker_client: docker.DockerClient
) -> None:
    server = await model_server(scripted([call("run_solution", {"code": SOLUTION})], "done"))
    async with sandboxed(run_solution, make_config) as env:
        assert "sandbox" not in json.dumps(env.oai_tools)
        out = await env.evaluate(server.client(), "m")
    assert out.reward == [1.0] and out.state[0].get("error") is None


class SyncPrepare(SandboxEnv):
    """A `prepare_sandbox` written as a plain `def`, as the README allows for hooks."""

    def prepare_sandbox(self, sandbox: DockerSandbox, state: State) -> None:  # type: ignore[override]
        state["prepared"] = sandbox.container_id


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
