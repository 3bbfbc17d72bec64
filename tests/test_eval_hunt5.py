"""`vfgym eval` with odd numbers and odd results directories, run as a user runs it:
the real command against vfgym's own built-in model server."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runs import no_configured_model, run  # noqa: F401  (an autouse fixture)


def test_a_run_too_large_to_hold_is_refused_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-r 100000000000000` (a slip of the finger) asks for 5e14 rollouts, every one of
    them an input row built up front: the process ran out of memory and was killed
    (exit 137) with nothing said. It is refused at once, saying how many it asked for."""
    code, out, err = run(
        ["eval", "guess-the-number", "-n", "5", "-r", "100000000000000", "-o", "big"], capsys
    )
    assert code == 2, err
    assert "500,000,000,000,000 rollouts" in err
    assert "-r/--rollouts-per-example" in err and "-n/--num-examples" in err
    assert not (tmp_path / "big").exists()
    assert out == ""
