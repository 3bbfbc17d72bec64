"""`gym.make` gives every SandboxEnv it builds one sandbox, inside an EnvGroup too.

A Gym env plays one episode at a time, so a warm pool of several containers per
SandboxEnv only holds memory and start-up time. These tests count the containers a
made env really starts on a real Docker Engine (the sandbox tests' `docker_client`:
without one they skip, and with VFGYM_REQUIRE_DOCKER=1, as CI sets, they fail).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import docker
import gymnasium as gym
import pytest

import vfgym.gym as vgym
from vfgym.envs.env_group import EnvGroup
from vfgym.sandbox import SandboxConfig
from vfgym.sandbox.env import SandboxEnv
from vfgym.sandbox.gc import sandbox_containers

GROUP_ID = "vfgym-test/SandboxGroup-v0"
LABEL = "vfgym-pool-test"


@pytest.fixture
def run_label(docker_client: docker.DockerClient) -> Iterator[str]:
    """A label value for this test's sandboxes; none of them may outlive the test."""
    run = uuid.uuid4().hex[:12]
    yield run
    left = _containers(docker_client, run)
    for container_id in left:  # remove them anyway, so one failure leaks nothing
        try:
            docker_client.api.remove_container(container_id, force=True)
        except docker.errors.APIError:
            pass
    assert not left, f"sandbox containers outlived the test: {left}"


@pytest.fixture
def group_id() -> Iterator[str]:
    vgym.register(GROUP_ID, load_sandbox_group)
    yield GROUP_ID
    gym.registry.pop(GROUP_ID, None)


def _containers(client: docker.DockerClient, run: str) -> list[str]:
    return sandbox_containers(client, f"{LABEL}={run}")


def _sandbox_env(name: str, run: str, **kwargs: Any) -> SandboxEnv:
    config = SandboxConfig(memory="256m", timeout=20, labels={LABEL: run, "member": name})
    rows = [{"question": f"{name} task {i}", "answer": "done"} for i in range(2)]
    return SandboxEnv(sandbox_config=config, dataset=rows, max_turns=3, **kwargs)


def load_sandbox_group(run: str, **kwargs: Any) -> EnvGroup:
    """Two sandbox members, the second one inside a nested group; `kwargs` (such as
    `pool_size`) go to both members, as a loader passes its own keywords on."""
    inner = EnvGroup([_sandbox_env("shell", run, **kwargs)], env_names=["shell"])
    return EnvGroup([_sandbox_env("python", run, **kwargs), inner], env_names=["python", "nested"])


def _members(env: Any) -> list[SandboxEnv]:
    group = env.unwrapped.environment
    return [group.env_map["python"], group.env_map["nested"].env_map["shell"]]


def test_a_made_group_starts_one_sandbox_per_sandbox_member(
    docker_client: docker.DockerClient, run_label: str, group_id: str
) -> None:
    env = gym.make(group_id, run=run_label)
    try:
        assert [member.pool_size for member in _members(env)] == [1, 1]
        env.reset(seed=0, options={"index": 0})  # the python member's first row
        assert env.unwrapped.state["task"] == "python"
        assert len(_containers(docker_client, run_label)) == 1
    finally:
        env.close()
    assert _containers(docker_client, run_label) == []


def test_a_pool_size_given_to_gym_make_reaches_the_members_untouched(
    docker_client: docker.DockerClient, run_label: str, group_id: str
) -> None:
    env = gym.make(group_id, run=run_label, pool_size=2)
    try:
        assert [member.pool_size for member in _members(env)] == [2, 2]
        env.reset(seed=0, options={"index": 0})
        assert len(_containers(docker_client, run_label)) == 2
    finally:
        env.close()
    assert _containers(docker_client, run_label) == []
