"""The sandbox command line against a real Docker Engine."""

from __future__ import annotations

import docker
import pytest

from vfgym.cli.sandbox import main as sandbox_cli


def test_cli_gc_and_doctor(
    capsys: pytest.CaptureFixture[str], docker_client: docker.DockerClient
) -> None:
    assert sandbox_cli(["gc", "--dry-run"]) == 0
    assert "orphaned sandbox container" in capsys.readouterr().out
    code = sandbox_cli(["doctor"])
    out = capsys.readouterr().out
    assert "[  ok] docker daemon" in out and "[  ok] sandbox image" in out
    assert code == 0
