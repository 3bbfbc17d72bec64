"""What the tests of the `vfgym` command share: running it in-process, and a clean start."""

from __future__ import annotations

from pathlib import Path

import pytest

from vfgym.cli import main


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
