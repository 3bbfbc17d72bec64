"""`vfgym view` renders whatever a results directory holds, marking what it cannot show.

Integers too large for a float (valid JSON), nesting hundreds or thousands of levels
deep, 5,000-character names and a missing metadata.json each end in a page, with the
damaged parts marked; only a directory with nothing readable is refused. The layout is
checked in Chromium: long names wrap or are cut, so the page stays the window's width.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from report_dom import chromium, parse

from vfgym.cli.main import main
from vfgym.results.jsonl import METADATA_FILE, RESULTS_FILE

HUGE = "1" + "0" * 400  # valid JSON; no float holds it


def _record(index: int, **fields: Any) -> dict[str, Any]:
    return {
        "index": index,
        "example_id": index,
        "task": "default",
        "prompt": [{"role": "user", "content": "q"}],
        "completion": [{"role": "assistant", "content": "a"}],
        "answer": "a",
        "reward": 1.0,
        "metrics": {"exact": 1.0},
        "stop_reason": "done",
        **fields,
    }


def _write(directory: Path, lines: list[str], metadata: str | None = '{"env_id": "e"}') -> Path:
    directory.mkdir(parents=True)
    (directory / RESULTS_FILE).write_text("".join(line + "\n" for line in lines))
    if metadata is not None:
        (directory / METADATA_FILE).write_text(metadata)
    return directory


def _view(directory: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["view", str(directory)])
    captured = capsys.readouterr()
    html = (directory / "report.html").read_text() if code == 0 else ""
    return code, html, captured.err


def _nested(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


def test_numbers_too_large_for_a_float_are_marked_not_fatal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = json.dumps(_record(0)).replace('"reward": 1.0', f'"reward": {HUGE}')
    line = line.replace('"exact": 1.0', f'"exact": {HUGE}, "big": -{HUGE}')
    line = line[:-1] + f', "completion_tokens": {HUGE}, "timing": {{"total_ms": {HUGE}}}}}'
    metadata = f'{{"env_id": "e", "duration_s": {HUGE}, "resumed_rollouts": {HUGE}}}'
    run = _write(tmp_path / "run", [line, json.dumps(_record(1))], metadata)
    code, html, err = _view(run, capsys)
    assert code == 0, err
    dom = parse(html)
    assert "could not be shown as written" in dom.text_by_id["tamed"]
    assert "a number too large to show: about 401 digits" in dom.text_by_id["rollout-0"]
    assert "2" in dom.text_by_id["cards"]  # both rollouts are counted


def test_deep_nesting_in_metadata_lines_and_tool_arguments_renders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": None}}
    deep_args = json.dumps(_record(0, completion=[{"role": "assistant", "tool_calls": [call]}]))
    deep_args = deep_args.replace('"arguments": null', f'"arguments": {_nested(400)}')
    too_deep_line = json.dumps(_record(1)).replace('"answer": "a"', f'"answer": {_nested(5000)}')
    metadata = f'{{"env_id": "e", "env_args": {_nested(300)}}}'
    run = _write(tmp_path / "run", [deep_args, too_deep_line, json.dumps(_record(2))], metadata)
    code, html, err = _view(run, capsys)
    assert code == 0, err
    dom = parse(html)
    assert "nested deeper than 40 levels" in dom.text_by_id["rollout-0"]
    assert "1 damaged line of results.jsonl (line 2)" in dom.text_by_id["damaged"]
    assert dom.text_by_id["tamed"]

    (run / METADATA_FILE).write_text(f'{{"env_id": {_nested(5000)}}}')  # past the parser
    code, html, err = _view(run, capsys)
    assert code == 0, err
    assert "metadata.json nests too deep to read" in parse(html).text_by_id["no-metadata"]


def test_a_missing_metadata_file_is_said_on_the_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _write(tmp_path / "run", [json.dumps(_record(0))], metadata=None)
    code, html, err = _view(run, capsys)
    assert code == 0, err
    note = parse(html).text_by_id["no-metadata"]
    assert "metadata.json is missing" in note and "settings" in note


def test_a_directory_with_nothing_readable_is_refused_with_a_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _write(tmp_path / "run", ['{"index": 0, "prom'], metadata=None)
    code, _, err = _view(run, capsys)
    assert code == 1
    assert f"nothing in {run} can be read" in err
    assert "metadata.json is missing" in err and "1 line(s)" in err
    assert "unexpected" not in err


def _page_width(browser: str, report: Path, profile: Path) -> int:
    """The page's scroll width in a 1200-pixel-wide Chromium window."""
    probe = report.with_name("probe.html")
    html = report.read_text()
    measure = (
        "<script>document.body.setAttribute('data-width', "
        "String(document.documentElement.scrollWidth));</script>"
    )
    probe.write_text(html.replace("</body>", measure + "</body>"))
    done = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1200,900", f"--user-data-dir={profile}", "--dump-dom", probe.as_uri()],
        capture_output=True,
        text=True,
        timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'data-width="(\d+)"', done.stdout)
    assert found, done.stdout[:500]
    return int(found.group(1))


def test_long_names_are_cut_and_wrapped_in_chromium(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    browser = chromium()
    long = "N" * 5000
    record = _record(0, task=long, stop_reason=long, metrics={long: 1.0})
    metadata = json.dumps({"env_id": long, "model": long, "status": long, "base_url": long})
    run = _write(tmp_path / "run", [json.dumps(record)], metadata)
    code, html, err = _view(run, capsys)
    assert code == 0, err
    assert long not in html  # every place a name is shown cuts it
    assert "more characters" in parse(html).text_by_id["title"]
    assert _page_width(browser, run / "report.html", tmp_path / "profile") <= 1200
