"""A sandboxed tool task served by `EnvServer`, on a real Docker Engine.

OpenEnv's client and `RemoteEnv` each play python-math (the model runs Python in a
sandbox through tool calls) to a win; sessions never see each other's sandbox; an
idle session's sandbox goes back to the pool for the next session; and once the
server stops, no container of its pool is left. Without Docker (or the sandbox image)
these tests skip and say how to get them; with VFGYM_REQUIRE_DOCKER=1 (as CI sets)
they fail instead.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import docker
import pytest
from remote_servers import AUTH, TOKEN

from vfgym.envs.registry import load_environment
from vfgym.errors import SandboxError
from vfgym.remote import RemoteEnv
from vfgym.remote.protocol import action_frame
from vfgym.sandbox import SandboxConfig
from vfgym.sandbox.docker_client import make_client
from vfgym.sandbox.gc import sandbox_containers
from vfgym.sandbox.image import default_image, image_exists

pytestmark = pytest.mark.docker

LABEL = "vfgym-remote-test"


@pytest.fixture
def run_label() -> Iterator[str]:
    """A label value for this test's sandboxes; none of them may outlive the test's
    server (ask for this fixture before `serve`, so that it is checked after the server
    has stopped)."""
    reason = None
    try:
        client = make_client(None, timeout=60)
    except SandboxError as exc:
        reason = f"no Docker Engine: {exc}"
    else:
        if not image_exists(client, default_image()):
            client.close()
            reason = f"the sandbox image {default_image()} is not built"
    if reason is not None:
        hint = (
            "start one with `sudo bash sandboxes/setup-docker.sh` and build the image with "
            "`python -m vfgym.sandbox build`"
        )
        if os.environ.get("VFGYM_REQUIRE_DOCKER") == "1":
            pytest.fail(f"{reason} (VFGYM_REQUIRE_DOCKER=1 makes this a failure)", pytrace=False)
        pytest.skip(f"{reason}; {hint}")
    run = uuid.uuid4().hex[:12]
    try:
        yield run
    finally:
        self_check = sandbox_containers(client, f"{LABEL}={run}")
        for container_id in self_check:  # removed anyway, so one failure leaks nothing
            try:
                client.api.remove_container(container_id, force=True)
            except docker.errors.APIError:
                pass
        client.close()
        assert not self_check, f"sandbox containers outlived the server: {self_check}"


def python_math(run: str, **kwargs: Any) -> Any:
    config = SandboxConfig(memory="256m", timeout=20, labels={LABEL: run})
    return load_environment(
        "python-math", num_examples=4, difficulty="easy", sandbox_config=config, **kwargs
    )


def python_call(code: str, call_id: str = "call_1") -> dict[str, Any]:
    """A step's data: one call of the `python` tool."""
    arguments = json.dumps({"code": code})
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": "python", "arguments": arguments},
    }
    return {"content": "", "tool_calls": [call]}


def test_openenv_client_and_remote_env_solve_a_sandboxed_task(
    run_label: str, serve: Any, openenv_client: Any
) -> None:
    env = python_math(run_label)
    server = serve(env, max_sessions=2)
    with openenv_client(base_url=server.base_url, headers=AUTH).sync() as client:
        client.reset(seed=0)
        for _ in range(4):
            messages = client.state()["messages"]
            result = client.step(action_frame(env.reference_policy(messages)))
            if result.done:
                break
        assert result.done and result.reward == 1.0
        assert result.metadata["terminated"] is True

    remote = RemoteEnv(server.base_url, token=TOKEN, timeout=60)
    try:
        remote.reset(seed=1)
        for _ in range(4):
            messages = remote.state()["messages"]
            _, reward, terminated, truncated, info = remote.step(env.reference_policy(messages))
            if terminated or truncated:
                break
        assert terminated and reward == 1.0 and info["stop_reason"]
    finally:
        remote.close()
    server.threaded.stop(drain_timeout=1)  # type: ignore[attr-defined]
    client_docker = make_client(None, timeout=60)
    try:
        assert sandbox_containers(client_docker, f"{LABEL}={run_label}") == []
    finally:
        client_docker.close()


def test_sessions_never_see_each_others_sandbox(
    run_label: str, serve: Any, openenv_client: Any
) -> None:
    server = serve(python_math(run_label), max_sessions=2)
    with (
        openenv_client(base_url=server.base_url, headers=AUTH, message_timeout_s=60).sync() as one,
        openenv_client(base_url=server.base_url, headers=AUTH, message_timeout_s=60).sync() as two,
    ):
        one.reset(seed=0)
        two.reset(seed=0)
        wrote = one.step(python_call("open('secret.txt', 'w').write('one'); secret = 41; 'ok'"))
        assert "ok" in wrote.observation["text"]
        looked = two.step(
            python_call(
                "import os; print(os.path.exists('secret.txt'), 'secret' in globals())", "c2"
            )
        )
        assert "False False" in looked.observation["text"]
        # The first session still has its own.
        kept = one.step(python_call("print(open('secret.txt').read(), secret + 1)", "c3"))
        assert "one 42" in kept.observation["text"]


def test_an_idle_session_gives_its_sandbox_back(
    run_label: str, serve: Any, openenv_client: Any
) -> None:
    """With one sandbox for two sessions, the second can run code only once the first,
    silent past the idle timeout, has been ended and its sandbox returned."""
    server = serve(python_math(run_label, pool_size=1), max_sessions=2, idle_timeout=3)
    with (
        openenv_client(base_url=server.base_url, headers=AUTH, message_timeout_s=60).sync() as idle,
        openenv_client(base_url=server.base_url, headers=AUTH, message_timeout_s=60).sync() as busy,
    ):
        idle.reset(seed=0)
        assert "2" in idle.step(python_call("1 + 1")).observation["text"]
        started = time.monotonic()
        busy.reset(seed=0)
        ran = busy.step(python_call("print('after the wait')", "c2"))
        assert "after the wait" in ran.observation["text"]
        assert time.monotonic() - started > 1.0  # it waited for the idle session's sandbox
        assert server.ended == {"idle": 1}
