"""Disk trouble ends a run with a clear message, a distinct exit code and a strict file.

A full disk is a real one: a small tmpfs mounted for the test (root only), grown
afterwards so the run can be resumed to its end. A read-only file system is the same
tmpfs remounted read-only; a permission error is met by a process that runs as an
process without the capability to override permissions (root may write anywhere).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vfgym.cli._support import EXIT_DISK
from vfgym.cli.main import main
from vfgym.errors import ResultsDiskError, VFGymError
from vfgym.results.jsonl import RESULTS_FILE, ResultsWriter, make_record

needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("mount") is None,
    reason="mounting a small file system needs root and mount(8)",
)


def _refuse(constant: str) -> Any:
    raise ValueError(f"{constant} is not strict JSON")


def strict_indices(path: Path) -> list[int]:
    """The rollout index of every line, each line read as strict JSON (NaN refused)."""
    data = path.read_bytes()
    assert not data or data.endswith(b"\n"), f"{path} ends inside a line"
    return [json.loads(line, parse_constant=_refuse)["index"] for line in data.splitlines()]


@contextlib.contextmanager
def small_disk(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted at `where` for the `with` block (unmounted after)."""
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _remount(where: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(where)], check=True)


def _eval(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["eval", "guess-the-number", "-n", "12", "-r", "2", "-c", "4", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(autouse=True)
def _no_configured_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)


@needs_root
def test_a_full_disk_stops_the_run_with_a_message_and_a_strict_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with small_disk(tmp_path / "disk", "24k") as disk:
        run = disk / "run"
        code, _, err = _eval(capsys, "-o", str(run))
        assert code == EXIT_DISK, err
        assert "No space left on device" in err and "ENOSPC" in err
        assert str(run) in err
        assert f"--resume {run}" in err
        assert "unexpected" not in err and "Traceback" not in err
        kept = strict_indices(run / RESULTS_FILE)
        assert 0 < len(kept) < 24
        assert f"{len(kept)} finished rollout(s) are kept" in err

        _remount(disk, "size=8m")  # space freed: the printed command finishes the run
        code, _, err = _eval(capsys, "--resume", str(run))
        assert code == 0, err
        assert sorted(strict_indices(run / RESULTS_FILE)) == list(range(24))


@needs_root
def test_a_read_only_file_system_is_named_before_and_inside_the_writer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with small_disk(tmp_path / "disk", "4m") as disk:
        run = disk / "run"
        with ResultsWriter(run, {"model": "m"}) as writer:
            writer.write(make_record(0, {"prompt": "p"}, "c", {}, 1.0, {}))
        _remount(disk, "ro")
        before = (run / RESULTS_FILE).read_bytes()

        with pytest.raises(ResultsDiskError) as caught:
            ResultsWriter(run, {"model": "m"}, resume=True).__enter__()
        assert caught.value.errno == errno.EROFS
        assert isinstance(caught.value, OSError) and isinstance(caught.value, VFGymError)
        assert "Read-only file system" in str(caught.value) and str(run) in str(caught.value)
        assert (run / RESULTS_FILE).read_bytes() == before

        code, _, err = _eval(capsys, "--resume", str(run))
        assert code == 2, err  # refused before anything starts
        assert f"cannot write results to {run}: Read-only file system" in err
        assert "unexpected" not in err


_WITHOUT_PERMISSION = textwrap.dedent(
    """
    import os, sys
    from vfgym.errors import ResultsDiskError
    from vfgym.results.jsonl import ResultsWriter, make_record

    run = sys.argv[1]
    writer = ResultsWriter(run, {"model": "m"}).__enter__()
    writer.write(make_record(0, {"prompt": "p"}, "c", {}, 1.0, {}))
    os.chmod(run, 0o555)  # the directory turns read-only for this user mid-run
    try:
        writer.close("complete")
    except ResultsDiskError as exc:
        print(exc.errno, exc.kept, exc, sep="|")
    """
)


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv(1)")
def test_a_permission_error_is_a_results_disk_error_that_counts_what_is_kept(
    tmp_path: Path,
) -> None:
    """The writer runs without the capability to override file permissions (which root
    has, and an ordinary user has not), so a directory turned read-only refuses it."""
    run = tmp_path / "run"
    no_override = "-dac_override,-dac_read_search"
    done = subprocess.run(
        ["setpriv", f"--bounding-set={no_override}", f"--inh-caps={no_override}", "--",
         sys.executable, "-c", _WITHOUT_PERMISSION, str(run)],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    if "setpriv:" in done.stderr:
        pytest.skip(f"cannot drop capabilities here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    number, kept, message = done.stdout.strip().split("|", 2)
    assert int(number) == errno.EACCES
    assert int(kept) == 1
    assert "Permission denied" in message and str(run) in message
    assert strict_indices(run / RESULTS_FILE) == [0]
