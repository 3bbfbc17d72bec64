"""A Gym env over a SandboxEnv leaves no half-made container when it closes.

When a tool call runs past its limit, the sandbox is replaced and the pool starts
a fresh one in the background, on the Gym env's private event loop, which runs
only while a step runs. Closing the Gym env used to close that loop under the
pending start: its container, created in a worker thread but never started, stayed
in Docker's "Created" state after the process ended (never auto-removed). Closing
now cancels the start and lets it remove its container, as `asyncio.run` would.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import docker
from tool_calls import calling, tool_call

from vfgym.gym import GymEnv
from vfgym.sandbox.env import SandboxEnv
from vfgym.sandbox.gc import sandbox_containers


def slow_call() -> dict[str, Any]:
    return calling(tool_call("python", {"code": "import time\ntime.sleep(5)"}))


def states(client: docker.DockerClient, label: str) -> list[str]:
    ids = sandbox_containers(client, label)
    return [client.api.inspect_container(cid)["State"]["Status"] for cid in ids]


def test_closing_a_gym_env_mid_replacement_leaves_no_created_container(
    docker_client: docker.DockerClient, make_config: Any
) -> None:
    marker = uuid.uuid4().hex
    label = f"test.gymclose={marker}"
    env = SandboxEnv(
        dataset=[{"question": "compute"}],
        sandbox_config=make_config(labels={**make_config().labels, "test.gymclose": marker}),
        pool_size=1,
        tool_timeout=0.5,  # below the sandbox's own limit: the sandbox is replaced
        max_turns=4,
    )
    gym_env = GymEnv(env)  # not owned: close() leaves the env's own pool to its owner
    try:
        gym_env.reset(seed=0)
        observation, *_ = gym_env.step(slow_call())
        assert "did not finish within 0.5 s" in observation
    finally:
        gym_env.close()
    try:
        # Whatever the pool still holds is running (or being removed); none is a
        # container made and never started, which nothing would ever remove.
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            assert "created" not in states(docker_client, label)
            time.sleep(0.2)
    finally:
        asyncio.run(env.aclose())  # the owner's part: the pool's containers go
    deadline = time.monotonic() + 15
    while sandbox_containers(docker_client, label) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sandbox_containers(docker_client, label) == []
