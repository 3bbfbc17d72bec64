"""Defects found by probing `vfgym view` and the summary with what a model, a damaged file
or a hand-edited guess_record can hold: numbers near the float limits, tool arguments the
JSON parser refuses, fields of the wrong shape, damaged lines, a URL fragment that is
not valid percent-encoding."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from report_dom import chromium, dump_dom, parse

from vfgym.cli.main import main
from vfgym.results.jsonl import METADATA_FILE, RESULTS_FILE
from vfgym.results.report import render_report, write_report
from vfgym.results.summary import Stats, format_summary, histogram, summarize_records


def guess_record(index: Any, reward: float | None, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "index": index,
        "example_id": 0,
        "task": "default",
        "prompt": [{"role": "user", "content": "guess"}],
        "completion": [{"role": "assistant", "content": "42"}],
        "answer": "42",
        "reward": reward,
        "metrics": {"win": reward},
        "stop_reason": "completed",
        "timing": {"total_ms": 5.0},
    }
    return {**base, **fields}


def tool_call(name: str, arguments: Any, call_id: str = "call_1") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        ],
    }


# ------------------------------------------------------------------ numbers


def test_stats_of_values_near_the_float_limits_are_finite_and_right() -> None:
    """Squaring 1e200 overflowed (OverflowError, so `vfgym eval` and `vfgym view` crashed
    after the run), and summing two 1e308 gave a mean of inf."""
    spread = Stats.of([1e200, -1e200])
    assert spread is not None
    assert (spread.mean, spread.std) == (0.0, 1e200)
    top = Stats.of([1e308, 1e308, 1e308])
    assert top is not None
    assert top.mean == pytest.approx(1e308) and top.std == 0.0
    rows = [guess_record(0, 1e300), guess_record(1, -1e300)]
    summary = summarize_records(rows)
    assert summary.reward is not None and summary.reward.std == pytest.approx(1e300)
    assert "reward" in format_summary(summary)


def test_a_single_repeated_reward_of_large_magnitude_still_bins() -> None:
    """All rewards equal and outside [0, 1]: the bins are widened by 0.5 each way, which
    at 1e17 and beyond is no change at all, so the width was 0 (ZeroDivisionError)."""
    for value in (1e17, -3e200, 1.7976931348623157e308):
        bins = histogram([value, value], bins=4)
        assert sum(count for _, _, count in bins) == 2
        assert all(low < high and math.isfinite(high) for low, high, _ in bins)
    html = render_report({}, [guess_record(0, 1e17), guess_record(1, 1e17)])
    assert 'data-count="2"' in html


# ---------------------------------------------------- what the model wrote


def test_tool_arguments_the_json_parser_refuses_are_shown_as_written() -> None:
    """The model's arguments are parsed to be pretty-printed; nesting too deep for the
    parser (RecursionError) or an integer past Python's digit limit (ValueError) crashed
    the whole report instead of being shown as sent."""
    deep = "[" * 100_000
    long_int = '{"a": ' + "7" * 5000 + "}"
    rows = [
        guess_record(0, 0.0, completion=[tool_call("f", deep)]),
        guess_record(1, 0.0, completion=[tool_call("f", long_int)]),
    ]
    html = render_report({}, rows)
    assert "[[[[[[[[" in html and "7777777777" in html


def test_a_huge_tool_name_or_call_id_does_not_blow_up_the_report() -> None:
    """Names and ids come from the model's reply like any text; they were inlined whole
    (twice per call: the call and its result's label), 1 MB for each rollout."""
    name = "x" * 1_000_000
    completion = [tool_call(name, "{}", call_id=name), {"role": "tool", "tool_call_id": name}]
    rows = [guess_record(i, 0.0, completion=completion) for i in range(10)]
    html = render_report({}, rows)
    assert len(html) < 500_000
    assert "more characters" in html


# ------------------------------------------------------------- odd shapes

ODD_FIELDS: list[tuple[str, Any]] = [
    ("index", [1, 2]),
    ("index", {"a": 1}),
    ("example_id", [0]),
    ("task", {"name": "t"}),
    ("metrics", [1.0, 2.0]),
    ("metrics", "win"),
    ("metrics", 3.5),
    ("timing", 12.0),
    ("timing", ["slow"]),
    ("prompt", 5),
    ("completion", [tool_call("f", "{}") | {"tool_calls": 5}]),
    ("completion", [tool_call("f", "{}") | {"tool_calls": [{"function": "f"}]}]),
    ("completion", [{"role": "assistant", "content": [{"type": "text", "text": None}]}]),
    ("tools_called", 7),
]


@pytest.mark.parametrize(("field", "value"), ODD_FIELDS)
def test_a_record_with_a_field_of_the_wrong_shape_costs_that_field_only(
    field: str, value: Any
) -> None:
    """A hand-edited or foreign line with a list where an object belongs (or the reverse)
    crashed the summary and the report with a TypeError or AttributeError."""
    odd = {**guess_record(0, 1.0), field: value}
    rows = [odd, guess_record(1, 0.0, metrics={"win": 0.0})]
    summary = summarize_records(rows)
    assert summary.num_rollouts == 2 and summary.reward is not None
    assert summary.metrics["win"].n >= 1  # the well-formed guess_record still counts
    format_summary(summary)
    html = render_report({}, rows)
    assert html.count('<details class="rollout') == 2
    assert "None" not in html.split("<main>", 1)[1]


def test_a_completion_that_is_one_message_object_is_shown_not_dropped() -> None:
    odd = guess_record(0, 1.0, completion={"role": "assistant", "content": "visible answer"})
    assert "visible answer" in render_report({}, [odd])


# -------------------------------------------------------- the page itself


def test_no_rollouts_shown_by_the_cap_is_not_called_no_rollout_finished() -> None:
    html = render_report({}, [guess_record(0, 1.0), guess_record(1, 0.0)], max_rollouts=0)
    assert "Showing the first 0 of 2 rollouts" in html
    assert "No rollout has finished yet" not in html


def test_the_error_list_says_how_many_kinds_of_error_it_leaves_out() -> None:
    rows = [
        guess_record(i, None, error={"type": "E", "message": f"failure number {i}"}) for i in range(13)
    ]
    html = render_report({}, rows)
    assert html.count("failure number") >= 10
    assert "3 more kinds of error" in html
    text = format_summary(summarize_records(rows))
    assert text.count("failure number") == 3
    assert "10 more kinds of error (10 rollouts" in text


def write_lines(directory: Path, lines: list[bytes], metadata: bytes = b'{"env_id": "e"}') -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / METADATA_FILE).write_bytes(metadata)
    (directory / RESULTS_FILE).write_bytes(b"".join(line + b"\n" for line in lines))


def test_damaged_lines_are_reported_not_silently_left_out(tmp_path: Path) -> None:
    """Lines that are not JSON (a run killed mid-write, a disk error) were skipped without
    a word, so the report's counts silently covered fewer rollouts than were run."""
    good = [json.dumps(guess_record(i, 1.0)).encode() for i in range(3)]
    cut = json.dumps(guess_record(9, 1.0)).encode()[:40]
    write_lines(tmp_path, [good[0], cut, good[1], b"\xff\xfe garbage", good[2]])
    html = write_report(tmp_path).read_text(encoding="utf-8")
    assert html.count('<details class="rollout') == 3
    assert "2 damaged lines of results.jsonl" in html and "lines 2 and 4" in html
    clean = tmp_path / "clean"
    write_lines(clean, good)
    assert 'id="damaged"' not in write_report(clean).read_text(encoding="utf-8")


def test_a_line_the_parser_refuses_is_a_damaged_line_and_bad_metadata_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A results line holding an integer past Python's digit limit raised a ValueError that
    is not a JSONDecodeError, and a cut metadata.json gave a bare parser message: `vfgym
    view` called the first unexpected and named neither file nor a way out."""
    good = json.dumps(guess_record(0, 1.0)).encode()
    write_lines(tmp_path / "run", [b'{"index": 1, "turn": ' + b"9" * 5000 + b"}", good])
    assert main(["view", str(tmp_path / "run")]) == 0
    html = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    assert "1 damaged line of results.jsonl (line 1)" in html
    write_lines(tmp_path / "meta", [good], metadata=b'{"env_id"')
    assert main(["view", str(tmp_path / "meta")]) == 1
    err = capsys.readouterr().err
    assert "unexpected" not in err and METADATA_FILE in err and "move it aside" in err


def test_report_script_survives_a_fragment_that_is_not_percent_encoding(
    tmp_path: Path,
) -> None:
    """`report.html#%E0%A4%A` (a mangled link) made decodeURIComponent throw, so the
    filters, search and expand buttons never started."""
    browser = chromium()
    path = tmp_path / "report.html"
    path.write_text(render_report({}, [guess_record(0, 1.0)]), encoding="utf-8")
    dom = parse(dump_dom(browser, path.as_uri() + "#%E0%A4%A", tmp_path / "profile"))
    body = next(attrs for tag, attrs in dom.tags if tag == "body")
    assert body.get("data-ready") == "yes"
    assert dom.text_by_id["shown"] == "1 of 1 rollouts shown"
