"""Sandbox operations against a real Docker Engine: config checks, gc, doctor, build, CLI."""

from __future__ import annotations

import json
import os
import shutil
import socketserver
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import docker
import pytest

from vfgym.cli.sandbox import main as sandbox_cli
from vfgym.errors import SandboxImageError
from vfgym.sandbox import SandboxConfig
from vfgym.sandbox.env import SandboxEnv
from vfgym.sandbox.gc import find_orphans
from vfgym.sandbox.image import build_image, default_image, image_exists
from vfgym.sandbox.labels import LABEL, OWNER_LABEL

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"cpus": 0.001}, "cpus"),  # Docker's floor is 0.01: the runner never starts
        ({"memory": "8m"}, "memory"),  # the runner cannot start in so little
        ({"pids": 10**12}, "pids"),  # beyond any kernel's pid_max: the start fails
        ({"user": "nobody"}, "user"),  # a name ends up in the tmpfs uid= option
        ({"user": "10001:staff"}, "user"),
        ({"user": ""}, "user"),
    ],
)
def test_config_refuses_values_no_sandbox_can_start_with(
    changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        SandboxConfig(**changes)


def test_config_still_accepts_the_edges() -> None:
    config = SandboxConfig(cpus=0.01, memory="16m", pids=4_194_304, user="10001")
    assert config.memory == 16 * 1024**2 and config.user == "10001"


def test_sandbox_env_takes_a_dict_as_sandbox_config() -> None:
    env = SandboxEnv(sandbox_config={"timeout": 5, "memory": "256m"}, dataset=[])
    assert isinstance(env.sandbox_config, SandboxConfig)
    assert env.sandbox_config.timeout == 5 and env.sandbox_config.memory == 256 * 1024**2


def test_sandbox_env_refuses_a_bad_sandbox_config_at_once() -> None:
    with pytest.raises(ValueError, match="timout"):
        SandboxEnv(sandbox_config={"timout": 5}, dataset=[])
    with pytest.raises(TypeError, match="SandboxConfig"):
        SandboxEnv(sandbox_config="runsc", dataset=[])  # type: ignore[arg-type]


def test_image_exists_says_when_a_reference_is_invalid(
    docker_client: docker.DockerClient,
) -> None:
    with pytest.raises(SandboxImageError, match="Bad Name"):
        image_exists(docker_client, "Bad Name")


def test_doctor_reports_an_invalid_image_as_a_failed_check(
    capsys: pytest.CaptureFixture[str], docker_client: docker.DockerClient
) -> None:
    assert sandbox_cli(["doctor", "--image", "Bad Name"]) == 1
    out = capsys.readouterr().out
    assert "[fail] sandbox image" in out and "Bad Name" in out
    assert "[  ok] docker daemon" in out


def test_build_on_an_unpullable_base_does_not_claim_a_debian_fallback(
    docker_client: docker.DockerClient,
) -> None:
    logs: list[str] = []
    # An explicit base is checked before anything is built.
    with pytest.raises(SandboxImageError, match="vfgym-no-such-base"):
        build_image(docker_client, base="vfgym-no-such-base:ops-test", force=True, log=logs.append)
    assert logs and not any("Debian" in line for line in logs), logs


def _as_nobody(*args: str) -> subprocess.CompletedProcess[str]:
    command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable]
    env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    return subprocess.run(
        [*command, "-m", "vfgym.sandbox", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=env,
        check=False,
    )


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to run as a user the Docker socket refuses",
)
def test_a_refused_socket_says_it_is_a_permission_problem(
    docker_client: docker.DockerClient,
) -> None:
    gc = _as_nobody("gc")
    assert gc.returncode == 1 and "Traceback" not in gc.stderr
    assert "permission" in gc.stderr.lower() and "docker group" in gc.stderr, gc.stderr
    assert "Start a Docker Engine" not in gc.stderr  # the engine is running
    doctor = _as_nobody("doctor")
    assert doctor.returncode == 1
    assert "usermod -aG docker" in doctor.stdout, doctor.stdout


def _token_in_other_pid_namespace() -> subprocess.Popen[str]:
    """A live process in its own pid namespace (as in a container on the host's
    network, which shares the hostname) that printed its owner token."""
    code = (
        "import sys, time\nfrom vfgym.sandbox.labels import owner_token\n"
        "print(owner_token(), flush=True)\ntime.sleep(120)\n"
    )
    return subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="needs root and unshare to run an owner in another pid namespace",
)
def test_gc_keeps_sandboxes_of_a_live_owner_in_another_pid_namespace(
    docker_client: docker.DockerClient, session_labels: dict[str, str]
) -> None:
    owner = _token_in_other_pid_namespace()
    container_id = None
    try:
        token = (owner.stdout.readline() if owner.stdout else "").strip()
        if not token:
            pytest.skip(f"cannot start a process in a new pid namespace: {owner.stderr}")
        created = docker_client.api.create_container(
            default_image(), labels={LABEL: "1", OWNER_LABEL: token, **session_labels}
        )
        container_id = created["Id"]
        orphans = [orphan.container_id for orphan in find_orphans(docker_client)]
        assert container_id not in orphans, f"a live owner's sandbox ({token}) taken for orphan"
    finally:
        owner.kill()
        owner.wait()
        if container_id is not None:
            docker_client.api.remove_container(container_id, force=True)


class _FailingEngineHandler(BaseHTTPRequestHandler):
    """An engine that answers the handshake and fails every other request with 500,
    as a daemon with a broken storage driver does."""

    def do_GET(self) -> None:
        if self.path.endswith("/_ping"):
            self._send(200, b"OK", "text/plain")
        elif self.path.endswith("/version"):
            self._send(200, json.dumps({"ApiVersion": "1.41", "Version": "24.0"}).encode())
        else:
            self._send(500, json.dumps({"message": "engine storage failure"}).encode())

    def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads the CLI's output, not the engine's."""

    def address_string(self) -> str:
        return "unix"


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def test_cli_turns_a_failed_engine_request_into_an_error_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    socket_path = tmp_path / "engine.sock"
    server = _UnixHTTPServer(str(socket_path), _FailingEngineHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        code = sandbox_cli(["--docker-host", f"unix://{socket_path}", "gc", "--dry-run"])
    finally:
        server.shutdown()
        server.server_close()
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("error:") and "engine storage failure" in err and "doctor" in err, err


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        # A string such as "false" is truthy: it silently turned networking on.
        ({"network": "false"}, "network must be True or False"),
        ({"network": 1}, "network must be True or False"),
        ({"timeout": True}, "timeout must be a positive number"),
        ({"start_timeout": True}, "start_timeout must be a positive number"),
        ({"labels": None}, "labels must be a dict"),
        ({"labels": "team=a"}, "labels must be a dict"),
        ({"labels": {"team": 1}}, "labels must map str to str"),
        ({"workspace": 5}, "workspace must be an absolute directory path"),
        ({"user": 10001}, "user must be numeric ids"),
        ({"image": 5}, "image must be an image name"),
        ({"docker_host": 5}, "docker_host must be"),
    ],
)
def test_config_refuses_odd_types_with_a_clear_error(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SandboxConfig(**changes)
