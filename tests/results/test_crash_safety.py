"""results.jsonl stays strict JSON lines, one line per rollout, however a run ends.

The file is checked with a reader that knows nothing of vfgym and forgives nothing:
every line must be a JSON object `json.loads` takes with NaN and Infinity refused,
and the file must end with a newline. The runs are real `vfgym eval` processes,
SIGKILLed while they write, and resumed until done.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from vfgym.envs.registry import load_environment
from vfgym.inference.server import FaultMix, ModelServer
from vfgym.results.durable import SUPERSEDED_FILE, truncate_torn_tail
from vfgym.results.jsonl import RESULTS_FILE, ResultsWriter, make_record


def _refuse(constant: str) -> Any:
    raise ValueError(f"{constant} is not strict JSON")


def strict_records(path: Path) -> list[dict[str, Any]]:
    """Every line of `path` as a JSON object, or an AssertionError naming the bad line."""
    data = path.read_bytes()
    assert not data or data.endswith(b"\n"), f"{path} ends inside a line: {data[-80:]!r}"
    records = []
    for number, line in enumerate(data.split(b"\n")[:-1], 1):
        try:
            record = json.loads(line, parse_constant=_refuse)
        except ValueError as exc:
            raise AssertionError(f"{path}:{number} is not strict JSON: {line[:80]!r}") from exc
        assert isinstance(record, dict), f"{path}:{number} is not a JSON object"
        records.append(record)
    return records


def _record(index: int, *, error: bool = False) -> dict[str, Any]:
    state = {"error": {"type": "ModelCallError", "message": "boom"}} if error else {}
    return make_record(index, {"prompt": f"p{index}"}, "c", state, 0.0 if error else 1.0, {})


def test_resume_cuts_off_a_torn_last_line_instead_of_closing_it(tmp_path: Path) -> None:
    with ResultsWriter(tmp_path, {"model": "m"}) as writer:
        writer.write(_record(0))
        writer.write(_record(1))
    path = tmp_path / RESULTS_FILE
    whole = path.read_bytes()
    path.write_bytes(whole + json.dumps(_record(2)).encode()[:30])  # a kill mid-write

    with ResultsWriter(tmp_path, {"model": "m"}, resume=True) as writer:
        assert sorted(writer.finished) == [0, 1]
        assert path.read_bytes() == whole  # the fragment is gone before anything is appended
        writer.write(_record(2))
    assert [r["index"] for r in strict_records(path)] == [0, 1, 2]


def test_truncate_torn_tail_keeps_whole_lines_and_reports_what_it_cut(tmp_path: Path) -> None:
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b'{"a": 1}\n' + b"x" * 200_000)  # a fragment longer than one read chunk
    assert truncate_torn_tail(path) == 200_000
    assert path.read_bytes() == b'{"a": 1}\n'
    assert truncate_torn_tail(path) == 0
    path.write_bytes(b"no newline at all")
    assert truncate_torn_tail(path) == len(b"no newline at all")
    assert path.read_bytes() == b""


def test_a_completed_resume_leaves_one_line_per_rollout(tmp_path: Path) -> None:
    """Errored attempts a resume ran again move to superseded.jsonl; results.jsonl keeps
    the last attempt of each rollout, so any reader counts each rollout once."""
    with ResultsWriter(tmp_path, {"model": "m"}) as writer:
        writer.write(_record(0))
        writer.write(_record(1, error=True))
        writer.write(_record(2, error=True))
    with ResultsWriter(tmp_path, {"model": "m"}, resume=True) as writer:
        assert sorted(writer.finished) == [0]
        writer.write(_record(1))
        writer.write(_record(2))
    records = strict_records(tmp_path / RESULTS_FILE)
    assert sorted(r["index"] for r in records) == [0, 1, 2]
    assert not any(r.get("error") for r in records)
    aside = strict_records(tmp_path / SUPERSEDED_FILE)
    assert sorted(r["index"] for r in aside) == [1, 2]
    assert all(r.get("error") for r in aside)


def test_an_old_fragment_closed_with_a_newline_is_dropped_at_the_end_of_a_resume(
    tmp_path: Path,
) -> None:
    """Earlier versions closed a killed run's fragment with a newline; the resume that
    finishes the run leaves no such line behind."""
    with ResultsWriter(tmp_path, {"model": "m"}) as writer:
        writer.write(_record(0))
    path = tmp_path / RESULTS_FILE
    path.write_bytes(path.read_bytes() + b'{"index": 1, "prom\n')
    with ResultsWriter(tmp_path, {"model": "m"}, resume=True) as writer:
        writer.write(_record(1))
    assert [r["index"] for r in strict_records(path)] == [0, 1]


# ------------------------------------------------------- a real process, SIGKILLed


def _eval(directory: Path, base_url: str, *extra: str) -> subprocess.Popen[str]:
    command = [
        sys.executable, "-m", "vfgym.cli.main", "eval", "guess-the-number",
        "-b", base_url, "-m", "reference", "-n", "10", "-r", "4", "-c", "4", *extra,
    ]  # fmt: skip
    environ = {**os.environ, "OPENAI_API_KEY": "test"}
    return subprocess.Popen(
        command,
        cwd=directory,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _lines_on_disk(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _kill_after(process: subprocess.Popen[str], path: Path, lines: int) -> None:
    """SIGKILL `process` once `path` holds `lines` more lines than now (or it ended)."""
    target = _lines_on_disk(path) + lines
    deadline = time.monotonic() + 60
    while process.poll() is None and time.monotonic() < deadline:
        if _lines_on_disk(path) >= target:
            break
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)


def test_sigkill_while_writing_then_resume_ends_with_strict_lines(tmp_path: Path) -> None:
    env = load_environment("guess-the-number")
    mix = FaultMix([("slow", 0.02)], rate=1.0, seed=1)  # turns take time: kills land mid-run
    with ModelServer({"reference": env.reference_policy}, faults=mix) as server:
        results = tmp_path / "run" / RESULTS_FILE
        _kill_after(_eval(tmp_path, server.base_url, "-o", "run"), results, 8)
        first = _lines_on_disk(results)
        assert 0 < first < 40, "the kill should land while rollouts are being written"

        # As a kill inside write() leaves it: the start of a line, no newline.
        with results.open("ab") as handle:
            handle.write(b'{"index": 39, "example_id": 9, "task": "def')
        for _ in range(2):  # killed again, mid-resume
            _kill_after(_eval(tmp_path, server.base_url, "--resume", "run"), results, 5)
            assert _lines_on_disk(results) > first

        done = _eval(tmp_path, server.base_url, "--resume", "run")
        out, err = done.communicate(timeout=120)
        assert done.returncode == 0, err

    records = strict_records(results)
    assert sorted(r["index"] for r in records) == list(range(40))  # each rollout once
    assert not any(r.get("error") for r in records)
    assert "40" in out  # the summary counts every rollout
