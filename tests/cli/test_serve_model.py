"""`vfgym serve-model`: an environment's policy served over HTTP, faults and all.

The server is a real `vfgym serve-model` process; it is answered by the openai client
and by a `vfgym eval` pointed at it, and stopped with SIGTERM as a job scheduler would.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from vfgym.cli.main import main


class Served:
    """A running `vfgym serve-model` process and the base URL it announced."""

    def __init__(self, *args: str) -> None:
        command = [sys.executable, "-m", "vfgym.cli.main", "serve-model", *args, "--port", "0"]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        self.banner = self.process.stdout.readline()
        found = re.search(r"at (http://127\.0\.0\.1:\d+/v1)", self.banner)
        if found is None:
            self.process.kill()
            _, err = self.process.communicate(timeout=30)
            raise AssertionError(f"no address announced: {self.banner!r} {err}")
        self.base_url = found.group(1)

    def stop(self) -> tuple[int, str]:
        """SIGTERM, as a scheduler sends: the exit code and stderr."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        _, err = self.process.communicate(timeout=60)
        return self.process.returncode, err


@pytest.fixture
def served() -> Iterator[list[Served]]:
    """Servers a test starts, stopped after it whatever happens."""
    started: list[Served] = []
    try:
        yield started
    finally:
        for server in started:
            if server.process.poll() is None:
                server.process.kill()
                server.process.communicate(timeout=30)


@pytest.fixture(autouse=True)
def _in_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "any")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)


def test_the_reference_policy_wins_an_eval_through_injected_faults(
    served: list[Served], capsys: pytest.CaptureFixture[str]
) -> None:
    server = Served("guess-the-number", "--faults", "500,503,drop", "--fault-rate", "0.2")
    served.append(server)
    assert "reference policy" in server.banner and "rate=0.2" in server.banner
    args = ["eval", "guess-the-number", "-b", server.base_url, "-m", "reference", "-n", "4"]
    code = main([*args, "-r", "2", "-o", "run"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"reward\s+1\.000", out), out  # every game won, faults ridden out

    code, err = server.stop()
    assert code == 0, err
    injected = re.search(r"faults injected: (.+)", err)
    assert injected is not None and injected.group(1) != "none", err


def test_the_random_policy_answers_the_openai_client(served: list[Served]) -> None:
    server = Served("guess-the-number", "--policy", "random", "--seed", "3")
    served.append(server)
    with openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0) as client:
        assert [card.id for card in client.models.list()] == ["random"]
        question = "I am thinking of a number between 1 and 100. Guess it."
        reply = client.chat.completions.create(
            model="anything", messages=[{"role": "user", "content": question}]
        )
    assert reply.choices[0].message.content
    code, err = server.stop()
    assert code == 0 and "faults injected: none" in err, err


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--faults", "500", "--fault-rate", "2"], "from 0 to 1"),
        (["--faults", "teapot"], "unknown fault kind"),
        (["--port", "70000"], "--port"),
        (["-a", "[1]"], "-a/--env-args must be a JSON object"),
    ],
)
def test_bad_options_are_refused_with_exit_code_2(
    args: list[str], problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["serve-model", "guess-the-number", *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert problem in err and "unexpected" not in err


def test_a_port_in_use_is_named(served: list[Served], capsys: pytest.CaptureFixture[str]) -> None:
    server = Served("guess-the-number")
    served.append(server)
    port = server.base_url.rsplit(":", 1)[1].split("/")[0]
    code = main(["serve-model", "guess-the-number", "--port", port])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"cannot serve on 127.0.0.1:{port}" in err and "--port 0" in err
