"""Sandbox commands and sessions at their limits, each against a real Docker Engine (runc):
sessions that died, output cut to the limit, shell commands that cannot run, NaN limits
and timeouts, file modes, reset, container removal, cancelled closes and frozen
sandboxes."""

from __future__ import annotations

import ast
import asyncio
import json
import threading
from typing import Any

import docker
import pytest
from docker.errors import NotFound

from vfgym.sandbox import DockerSandbox, SandboxConfig
from vfgym.sandbox.image import default_image
from vfgym.sandbox.labels import LABEL
from vfgym.sandbox.sandbox import remove_container

on_session_loop = pytest.mark.asyncio(loop_scope="session")


# ---------------------------------------------------------------- the Python session


@on_session_loop
async def test_a_session_killed_by_a_shell_command_still_runs_the_next_cell(
    sandbox: DockerSandbox,
) -> None:
    pid = (await sandbox.run_python("import os\nx = 1\nos.getpid()")).value
    killed = await sandbox.run_shell(f"kill -9 {pid}; echo killed")
    assert "killed" in killed.stdout, killed.summary()
    result = await sandbox.run_python("print('ran')\n'kept' if 'x' in globals() else 'fresh'")
    assert result.stdout.startswith("ran\n"), result  # the code ran, in a new session
    assert result.value == "'fresh'" and result.exit_code == 0
    assert result.state_reset and "restarted" in result.summary()


@on_session_loop
async def test_a_session_that_died_while_idle_still_runs_the_next_cell(
    sandbox: DockerSandbox,
) -> None:
    setup = "import os, threading\ny = 2\nthreading.Timer(0.2, os._exit, (5,)).start()"
    assert (await sandbox.run_python(setup)).exit_code == 0
    await asyncio.sleep(0.6)  # the session exits on its own between calls
    result = await sandbox.run_python("print('ran')\n'kept' if 'y' in globals() else 'fresh'")
    assert result.stdout.startswith("ran\n"), result
    assert result.value == "'fresh'" and result.state_reset


# ---------------------------------------------------------------- output encoding


@on_session_loop
async def test_output_under_the_limit_is_returned_exactly(sandbox: DockerSandbox) -> None:
    text = "a" + "é" * 5000  # more than half the limit in bytes: crosses head and tail
    assert len(text.encode()) < sandbox.config.output_limit
    result = await sandbox.run_python(f"print({text!r})")
    assert not result.truncated
    assert result.stdout == text + "\n"


@on_session_loop
async def test_truncated_output_keeps_whole_characters(sandbox: DockerSandbox) -> None:
    result = await sandbox.run_python("print('a' + 'é' * 40000)")
    assert result.truncated
    assert "\ufffd" not in result.stdout, result.stdout[8180:8230]
    head, _, tail = result.stdout.partition("\n[... ")
    assert head.startswith("aé") and head.endswith("é")
    assert tail.endswith("é\n")


# ---------------------------------------------------------------- shell


@on_session_loop
@pytest.mark.parametrize(
    ("command", "hint"),
    [("echo " + "x" * 200_000, "too long"), ("echo a\0b", "NUL")],
)
async def test_a_shell_command_that_cannot_be_run_says_why(
    sandbox: DockerSandbox, command: str, hint: str
) -> None:
    result = await sandbox.run_shell(command)
    assert result.exit_code == 127
    assert hint in result.stderr, result.summary()


# ---------------------------------------------------------------- arguments


def test_nan_limits_are_refused() -> None:
    nan = float("nan")
    with pytest.raises(ValueError, match="timeout"):
        SandboxConfig(timeout=nan)
    with pytest.raises(ValueError, match="cpus"):
        SandboxConfig(cpus=nan)
    with pytest.raises(ValueError, match="cpus"):
        SandboxConfig(cpus=float("inf"))


@on_session_loop
async def test_a_nan_timeout_is_refused_without_losing_the_sandbox(
    sandbox: DockerSandbox,
) -> None:
    with pytest.raises(ValueError, match="timeout"):
        await sandbox.run_python("1", timeout=float("nan"))
    with pytest.raises(ValueError, match="timeout"):
        await sandbox.run_shell("true", timeout=float("nan"))
    assert sandbox.alive
    assert (await sandbox.run_python("1 + 1")).value == "2"


# ---------------------------------------------------------------- files


@on_session_loop
async def test_write_file_sets_the_mode_it_is_given(sandbox: DockerSandbox) -> None:
    await sandbox.write_file("run.sh", "echo first\n")
    await sandbox.write_file("run.sh", "echo ran\n", mode=0o755)  # an existing file
    await sandbox.write_file("shared.txt", "x", mode=0o664)  # beyond the umask
    result = await sandbox.run_shell("bash run.sh && stat -c %a run.sh shared.txt")
    assert result.stdout.split() == ["ran", "755", "664"], result.summary()


# ---------------------------------------------------------------- between users


LEAVE_TRACES = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
queue = libc.mq_open(b"/left-behind", os.O_CREAT | os.O_RDWR, 0o600, None)
assert queue >= 0, ctypes.get_errno()
os.setxattr("/workspace", "user.note", b"answer is 42")
os.utime("/workspace", (123456789, 987654321))
"""

LOOK_FOR_TRACES = r"""
import json, os
info = os.stat("/workspace")
json.dumps({
    "queues": sorted(os.listdir("/dev/mqueue")),
    "xattrs": os.listxattr("/workspace"),
    "times": [int(info.st_atime), int(info.st_mtime)],
})
"""


@on_session_loop
async def test_reset_removes_message_queues_and_workspace_metadata(
    sandbox: DockerSandbox,
) -> None:
    planted = await sandbox.run_python(LEAVE_TRACES)
    assert planted.exit_code == 0, planted.summary()
    await sandbox.reset()
    result = await sandbox.run_python(LOOK_FOR_TRACES)
    assert result.exit_code == 0 and result.value is not None, result.summary()
    traces = json.loads(ast.literal_eval(result.value))
    assert traces["queues"] == [] and traces["xattrs"] == []
    assert 123456789 not in traces["times"] and 987654321 not in traces["times"]


# ---------------------------------------------------------------- closing


def _container_gone(client: docker.DockerClient, container_id: str) -> bool:
    try:
        client.api.inspect_container(container_id)
    except NotFound:
        return True
    return False


@on_session_loop
async def test_remove_container_returns_once_a_removal_in_progress_is_done(
    docker_client: docker.DockerClient, session_labels: dict[str, str]
) -> None:
    # A container with many files in its layer takes a while to remove, so a
    # second removal meets the first one ("removal already in progress", 409).
    fill = "import os\nos.mkdir('/d')\nfor i in range(5000): open(f'/d/{i}', 'w').close()"
    created = await asyncio.to_thread(
        docker_client.api.create_container,
        default_image(),
        entrypoint=["python3", "-c", fill],
        user="0",
        labels={LABEL: "1", **session_labels},
        # no network, as every sandbox: the test needs none, nor the daemon's bridge
        host_config=docker_client.api.create_host_config(network_mode="none"),
    )
    container_id = created["Id"]
    try:
        await asyncio.to_thread(docker_client.api.start, container_id)
        await asyncio.to_thread(docker_client.api.wait, container_id)
    except BaseException:  # never leave the container behind a failed start
        await asyncio.to_thread(remove_container, docker_client, container_id)
        raise
    first = threading.Thread(
        target=docker_client.api.remove_container, args=(container_id,), kwargs={"force": True}
    )
    first.start()
    try:
        await asyncio.sleep(0.05)
        await asyncio.to_thread(remove_container, docker_client, container_id)
        assert _container_gone(docker_client, container_id)
    finally:
        await asyncio.to_thread(first.join)


@on_session_loop
async def test_a_cancelled_close_still_removes_the_container_and_stays_cancelled(
    docker_client: docker.DockerClient, make_config: Any
) -> None:
    sandbox = DockerSandbox(make_config())
    await sandbox.start()
    container_id = sandbox.container_id
    assert container_id is not None
    closing = asyncio.ensure_future(sandbox.close())
    await asyncio.sleep(0)  # close() is now waiting for the stream to shut
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    assert _container_gone(docker_client, container_id)


@on_session_loop
async def test_a_request_to_a_frozen_sandbox_ends_after_its_timeout(
    docker_client: docker.DockerClient, make_config: Any
) -> None:
    async with DockerSandbox(make_config()) as sandbox:
        assert sandbox.container_id is not None
        await asyncio.to_thread(docker_client.api.pause, sandbox.container_id)
        try:
            big = "#" + "x" * 4_000_000  # more than the stream buffers: the send blocks
            result = await asyncio.wait_for(sandbox.run_python(big, timeout=0.1), 30)
        finally:
            await asyncio.to_thread(docker_client.api.unpause, sandbox.container_id)
        assert result.sandbox_lost and "did not answer" in result.stderr
