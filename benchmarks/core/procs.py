"""The benchmark's child processes: one worker per framework, the HTTP model server.

Each child's stderr goes to a log file, so a framework's progress bars and
warnings never mix into the measurements; when a child fails, the tail of its
log is in the error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
WORKER = HERE / "worker.py"
SERVER = HERE / "serve.py"


class ChildError(RuntimeError):
    """A child process died or answered with an error."""


def child_env() -> dict[str, str]:
    """The environment for children: offline Hugging Face, no inherited PYTHONPATH.

    Without PYTHONPATH the reference venv cannot import vfgym by accident; the
    workers find their neighbours through the script's own directory.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    env.update(
        {
            "HF_DATASETS_OFFLINE": "1",
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
            "TQDM_DISABLE": "1",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def _tail(log: IO[str]) -> str:
    log.flush()
    log.seek(0)
    return log.read()[-3000:]


class Worker:
    """A long-lived `worker.py` for one framework, spoken to in JSON lines."""

    def __init__(self, python: Path | str, framework: str) -> None:
        self.framework = framework
        self._log = tempfile.TemporaryFile("w+", prefix=f"vfgym-bench-{framework}-")
        self._proc = subprocess.Popen(
            [str(python), str(WORKER), "--framework", framework],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            cwd=HERE,
            env=child_env(),
        )
        self.info = self._read()

    def _read(self) -> dict[str, Any]:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            code = self._proc.wait()
            raise ChildError(
                f"the {self.framework} worker exited ({code}) before answering:\n{_tail(self._log)}"
            )
        answer = json.loads(line)
        if "error" in answer:
            raise ChildError(f"the {self.framework} worker failed: {answer.get('trace') or ''}")
        return answer

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send one measurement request and wait for its result."""
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        """Ask the worker to quit; end it if it does not within a few seconds."""
        try:
            if self._proc.poll() is None and self._proc.stdin is not None:
                self._proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self._proc.stdin.close()
            self._proc.wait(timeout=15)
        except (OSError, subprocess.TimeoutExpired):
            self._proc.kill()
            self._proc.wait()
        finally:
            self._log.close()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_stress(python: Path | str, framework: str, args: list[str]) -> dict[str, Any]:
    """One stress run in a fresh process, so the peak RSS it reports is that run's alone."""
    with tempfile.TemporaryFile("w+", prefix=f"vfgym-stress-{framework}-") as log:
        proc = subprocess.run(
            [str(python), str(WORKER), "--framework", framework, "--stress", *args],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            cwd=HERE,
            env=child_env(),
            check=False,
        )
        if proc.returncode != 0 or not proc.stdout.strip():
            raise ChildError(
                f"the {framework} stress run failed (exit {proc.returncode}):\n{_tail(log)}"
            )
        return json.loads(proc.stdout.strip().splitlines()[-1])


class ServerProcess:
    """The lean stand-in model server (`serve.py`), serving the scripted policy from
    its own process.

    Its own process, so the server's CPU is not the measured client's: on two
    cores each side gets one. `stats()` gives the requests it served and its CPU
    time so far.
    """

    def __init__(self) -> None:
        self._log = tempfile.TemporaryFile("w+", prefix="vfgym-bench-server-")
        self._proc = subprocess.Popen(
            [sys.executable, str(SERVER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            cwd=HERE,
            env=child_env(),
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            code = self._proc.wait()
            self._log.seek(0)
            raise ChildError(f"the model server exited ({code}):\n{_tail(self._log)}")
        self.base_url: str = json.loads(line)["base_url"]

    def stats(self) -> dict[str, float]:
        """{"requests": served so far, "cpu_s": the server process's CPU time so far}."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write("stats\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise ChildError(f"the model server exited:\n{_tail(self._log)}")
        return dict(json.loads(line))

    def close(self) -> None:
        """Closing stdin tells the server to stop."""
        try:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
            self._proc.wait(timeout=15)
        except (OSError, subprocess.TimeoutExpired):
            self._proc.kill()
            self._proc.wait()
        finally:
            self._log.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
