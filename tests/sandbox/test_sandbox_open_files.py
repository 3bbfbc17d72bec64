"""A `max_open_files` above what the Docker daemon may grant fails with a clear error.

The limit becomes the container's `nofile` ulimit, which runc sets when the container
starts; above the daemon's own hard limit (when it may not raise it) or above the
kernel's `fs.nr_open`, Docker answers with a raw OCI error. The sandbox must say what
the limit is and what to do, and the limit it names must really be grantable.
Driven against the real Docker daemon.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import docker
import pytest

from vfgym.errors import SandboxStartError
from vfgym.sandbox import DockerSandbox
from vfgym.sandbox.rlimits import rlimit_error

NR_OPEN = int(Path("/proc/sys/fs/nr_open").read_text())


async def _start_error(config: Any) -> str:
    with pytest.raises(SandboxStartError) as caught:
        async with DockerSandbox(config):
            pass
    return str(caught.value)


async def test_open_files_above_the_kernel_limit_name_the_limit_and_the_fix(
    docker_client: docker.DockerClient, make_config: Any
) -> None:
    message = await _start_error(make_config(max_open_files=NR_OPEN + 1))
    assert f"max_open_files={NR_OPEN + 1}" in message
    assert "rlimit type 7" not in message  # no raw OCI error in the first place
    assert "runtime 'runc' may not be registered" not in message  # not a runtime problem
    found = re.search(r"at most (\d+)", message)
    assert found, message
    limit = int(found.group(1))
    assert 0 < limit <= NR_OPEN
    assert "lower max_open_files" in message


async def test_the_limit_the_error_names_is_one_the_daemon_grants(
    docker_client: docker.DockerClient, make_config: Any
) -> None:
    message = await _start_error(make_config(max_open_files=NR_OPEN + 1))
    limit = int(re.search(r"at most (\d+)", message).group(1))  # type: ignore[union-attr]
    async with DockerSandbox(make_config(max_open_files=limit)) as sandbox:
        shown = await sandbox.run_shell("ulimit -Hn")
    assert shown.stdout.strip() == str(limit)
    if limit < NR_OPEN:  # the daemon's own limit is the ceiling: one above it fails too
        above = await _start_error(make_config(max_open_files=limit + 1))
        assert f"at most {limit}" in above and "lower max_open_files" in above


RAW = (
    '500 Server Error: Internal Server Error ("failed to create shim task: OCI runtime '
    "create failed: runc create failed: unable to start container process: error during "
    "container init: error setting rlimits for ready process: error setting rlimit type 7: "
    'operation not permitted: unknown")'
)


def test_a_remote_daemon_s_refusal_still_names_the_knob_and_how_to_find_the_limit(
    make_config: Any,
) -> None:
    """Where the daemon's process cannot be read, the message says where to look."""
    message = rlimit_error(RAW, make_config(max_open_files=99999), "tcp://127.0.0.1:9")
    assert message is not None
    assert "max_open_files=99999" in message and "lower max_open_files" in message
    assert "/proc/$(pidof dockerd)/limits" in message
    assert rlimit_error("500 Server Error: no such image", make_config(), "tcp://x:1") is None
