"""`vfgym serve-env`: a real server process, driven by `RemoteEnv`, stopped by signals.

SIGTERM, as a job scheduler sends it, drains: the running session gets the drain
time, then is closed with code 1001, and the process exits 0 saying how its sessions
ended. SIGKILL leaves no one to say goodbye: the client must still fail within its
timeout, never hang.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from remote_servers import TOKEN

from vfgym.cli.main import main
from vfgym.errors import RemoteEnvUnavailable
from vfgym.remote import RemoteEnv


class ServedEnv:
    """A running `vfgym serve-env` process and the base URL it announced."""

    def __init__(self, *args: str, token: str | None = TOKEN) -> None:
        command = [sys.executable, "-m", "vfgym.cli.main", "serve-env", *args, "--port", "0"]
        environ = dict(os.environ)
        environ.pop("VFGYM_ENV_TOKEN", None)
        if token is not None:
            environ["VFGYM_ENV_TOKEN"] = token
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ
        )
        assert self.process.stdout is not None
        self.banner = self.process.stdout.readline()
        found = re.search(r"at (http://127\.0\.0\.1:\d+) ", self.banner)
        if found is None:
            self.process.kill()
            _, err = self.process.communicate(timeout=30)
            raise AssertionError(f"no address announced: {self.banner!r} {err}")
        self.base_url = found.group(1)

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        """Send `sig`; the exit code and stderr."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        _, err = self.process.communicate(timeout=60)
        return self.process.returncode, err


@pytest.fixture
def started() -> Iterator[list[ServedEnv]]:
    """Servers a test starts, killed after it whatever happens."""
    servers: list[ServedEnv] = []
    try:
        yield servers
    finally:
        for server in servers:
            if server.process.poll() is None:
                server.process.kill()
                server.process.communicate(timeout=30)


def test_sigterm_drains_the_running_session_and_exits_zero(started: list[ServedEnv]) -> None:
    server = ServedEnv("guess-the-number", "--drain-timeout", "1")
    started.append(server)
    assert "bearer token required" in server.banner
    env = RemoteEnv(server.base_url, token=TOKEN, timeout=10)
    try:
        env.reset(seed=0)
        env.step("<move>50</move>")
        server.process.send_signal(signal.SIGTERM)
        time.sleep(0.3)  # draining: the session may still step
        assert env.step("<move>25</move>")[4]["turn"] == 2
        _, err = server.process.communicate(timeout=60)
        assert server.process.returncode == 0, err
        assert "draining 1 session(s)" in err and "sessions ended: 1 drained" in err
        with pytest.raises(RemoteEnvUnavailable, match=r"shutting down|dropped|cannot reach"):
            env.step("<move>12</move>")
    finally:
        env.close()


def test_a_killed_server_is_an_error_within_the_timeout(started: list[ServedEnv]) -> None:
    server = ServedEnv("guess-the-number")
    started.append(server)
    env = RemoteEnv(server.base_url, token=TOKEN, timeout=3)
    try:
        env.reset(seed=0)
        server.stop(signal.SIGKILL)
        began = time.monotonic()
        with pytest.raises(RemoteEnvUnavailable):
            env.step("<move>50</move>")
        assert time.monotonic() - began < 4
        with pytest.raises(RemoteEnvUnavailable, match=r"cannot reach|could not connect"):
            env.reset(seed=1)
    finally:
        env.close()


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["guess-the-number"], "a bearer token is required: pass --token"),
        (["guess-the-number", "--no-token", "--token", "x"], "choose one"),
        (["guess-the-number", "--no-token", "--host", "0.0.0.0"], "loopback only"),
        (["guess-the-number", "--token", "x", "--max-sessions", "0"], "max_sessions must be"),
        (["no-such-env", "--token", "x"], "no-such-env"),
    ],
)
def test_bad_options_are_refused_with_exit_code_2(
    argv: list[str],
    said: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("VFGYM_ENV_TOKEN", raising=False)
    code = main(["serve-env", *argv])
    err = capsys.readouterr().err
    assert code == 2 and said in err and "Traceback" not in err
