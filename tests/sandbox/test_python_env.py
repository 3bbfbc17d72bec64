"""`PythonEnv`: verifiers 0.1.x's stateful Python tool, on vfgym's own Docker sandbox."""

from __future__ import annotations

import json
import logging
from typing import Any

import docker
import pytest
from scripted_models import scripted
from tool_calls import tool_call as call

import vfgym as vf
from vfgym.envs.python_env import PythonEnv
from vfgym.sandbox.gc import sandbox_containers
from vfgym.types import Messages


def said_the_total(completion: Messages, answer: str) -> float:
    return 1.0 if completion[-1]["content"] == answer else 0.0


async def test_each_rollout_has_its_own_persistent_python_session(
    model_server: Any, make_config: Any, docker_client: docker.DockerClient
) -> None:
    rows = [{"question": f"row {i}", "answer": "6"} for i in range(2)]
    policy = scripted(
        [call("python", {"code": "import os\ntotal = 1 + 2\nmarker = os.urandom(4).hex()"})],
        [call("python", {"code": "print('half', total)\ntotal * 2"}, "c2")],
        [call("python", {"code": "import sys\nprint('oops', file=sys.stderr)\n1 / 0"}, "c3")],
        [call("python", {"code": "marker"}, "c4")],
        "6",
    )
    server = await model_server(policy)
    env = PythonEnv(
        sandbox_config=make_config(),
        pool_size=2,
        dataset=rows,
        rubric=vf.Rubric(funcs=[said_the_total]),
    )
    schema = json.dumps(env.oai_tools)
    assert [t["function"]["name"] for t in env.oai_tools] == ["python"]
    assert "sandbox" not in schema and "python_state" not in schema
    async with env:
        out = await env.evaluate(server.client(), "m", max_concurrent=2)
        pool = next(iter(env._pools.values()))
    assert out.reward == [1.0, 1.0]
    markers = []
    for completion, state in zip(out.completion, out.state, strict=True):
        replies = [m["content"] for m in completion if m["role"] == "tool"]
        assert replies[0] == "(no output)"
        assert replies[1] == "half 3\nOut[2]: 6"  # the session kept `total`
        assert "oops" in replies[2] and "ZeroDivisionError" in replies[2]
        assert state["python_env"]["execution_count"] == 4
        markers.append(replies[3])
    assert markers[0] != markers[1]  # no rollout saw the other's variables
    assert not sandbox_containers(docker_client, f"vfgym.sandbox.pool={pool.pool_id}")


def test_the_remote_sandbox_keywords_are_accepted_and_ignored_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        env = PythonEnv(dataset=[{"question": "q", "answer": "a"}], cpu_cores=2, docker_image="x")
    assert "cpu_cores, docker_image" in caplog.text and "sandbox_config" in caplog.text
    assert not hasattr(env, "cpu_cores")
