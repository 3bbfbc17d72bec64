"""Fixtures for the catalogue's sandboxed tool tasks: a real Docker Engine, labelled sandboxes.

Without a reachable Docker Engine (or without the sandbox image) the tests that
need one skip and say why; with VFGYM_REQUIRE_DOCKER=1 (as CI sets) they fail
instead. Every sandbox made here carries a per-session label, and the session
ends by checking that none of them outlived the tests.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator

import pytest

from vfgym.errors import SandboxError
from vfgym.sandbox import SandboxConfig
from vfgym.sandbox.docker_client import make_client
from vfgym.sandbox.gc import sandbox_containers
from vfgym.sandbox.image import default_image, image_exists

SESSION_LABEL = "vfgym-games-test-session"
SESSION_ID = uuid.uuid4().hex[:12]
START_HINT = (
    "start one with `sudo bash sandboxes/setup-docker.sh` and build the image with "
    "`python -m vfgym.sandbox build`"
)


def _unavailable(reason: str) -> None:
    if os.environ.get("VFGYM_REQUIRE_DOCKER") == "1":
        pytest.fail(f"{reason} (VFGYM_REQUIRE_DOCKER=1 makes this a failure)", pytrace=False)
    pytest.skip(f"{reason}; {START_HINT}")


@pytest.fixture(scope="session")
def docker_ready() -> Iterator[None]:
    """A reachable Docker Engine with the sandbox image; checks for leftovers at the end."""
    try:
        client = make_client(None, timeout=60)
    except SandboxError as exc:
        _unavailable(f"no Docker Engine: {exc}")
    try:
        if not image_exists(client, default_image()):
            _unavailable(f"the sandbox image {default_image()} is not built")
        yield
        label = f"{SESSION_LABEL}={SESSION_ID}"
        deadline = time.monotonic() + 15
        remaining = sandbox_containers(client, label)
        while remaining and time.monotonic() < deadline:
            time.sleep(0.2)
            remaining = sandbox_containers(client, label)
        for container_id in remaining:  # remove them anyway, so one failure does not leak
            client.api.remove_container(container_id, force=True)
        assert not remaining, f"sandbox containers outlived the tool-task tests: {remaining}"
    finally:
        client.close()


@pytest.fixture
def sandbox_config(docker_ready: None) -> SandboxConfig:
    """Small limits and this session's label (so leftovers are found)."""
    return SandboxConfig(
        memory="256m",
        workspace_size="32m",
        tmp_size="16m",
        shm_size="16m",
        pids=96,
        timeout=20,
        labels={SESSION_LABEL: SESSION_ID},
    )
