"""What the tests of the `vfgym` command share: running it in-process, a clean start,
and a model policy that holds rollouts until released."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from vfgym.cli.main import main
from vfgym.envs.registry import load_environment


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """`vfgym ARGV` in this process: its exit code, stdout and stderr."""
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(autouse=True)
def no_configured_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every test starts with no model server configured, in its own directory."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)


class Gate:
    """guess-the-number's reference policy that holds rollout number `hold` (1-based, in
    the order their first turns arrive) and every later one until released."""

    def __init__(self, hold: int) -> None:
        self.env = load_environment("guess-the-number", difficulty="easy")
        self.hold = hold
        self.first_turns = 0
        self.blocked = threading.Event()
        self.release = threading.Event()

    async def __call__(self, messages: list[dict[str, Any]]) -> Any:
        if len(messages) == 2:  # system prompt + question: a rollout's first turn
            self.first_turns += 1
            if self.first_turns >= self.hold and not self.release.is_set():
                self.blocked.set()
                while not self.release.is_set():
                    await asyncio.sleep(0.02)
        return self.env.reference_policy(messages)
