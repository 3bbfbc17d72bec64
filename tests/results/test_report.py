"""`vfgym view` reports and the summary numbers behind them.

The report is loaded in headless Chromium (Debian's `chromium`) and checked after
its script ran: what it shows, what the filter hides, and that model text that
looks like HTML stays text.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from cli_runs import no_configured_model  # noqa: F401 (the fixture is autouse)
from report_dom import chromium, dump_dom, parse
from result_records import guess_record

from vfgym.cli.main import main
from vfgym.results.jsonl import METADATA_FILE, RESULTS_FILE
from vfgym.results.report import render_report, write_report
from vfgym.results.summary import (
    format_summary,
    histogram,
    latest_records,
    pass_at_k,
    pass_at_k_table,
    summarize_records,
)

HOSTILE = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"


def record(index: int, reward: float | None, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "index": index,
        "example_id": index // 2,
        "task": "default",
        "prompt": [{"role": "user", "content": "What is 2+3?"}],
        "completion": [{"role": "assistant", "content": "5"}],
        "answer": "5",
        "info": {},
        "reward": reward,
        "metrics": {"correct": reward if reward is not None else None},
        "stop_reason": "completed",
        "turn": 1,
        "completion_tokens": 4,
        "timing": {"total_ms": 10.0},
    }
    base.update(extra)
    return base


TOOL_COMPLETION = [
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_7",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
            }
        ],
    },
    {"role": "tool", "content": "5", "tool_call_id": "call_7"},
    {"role": "assistant", "content": "The answer is 5. " + HOSTILE},
]


ERROR = {
    "type": "ModelCallError",
    "message": "model server still failing after 5 attempts " + HOSTILE,
}


def sample_records() -> list[dict[str, Any]]:
    return [
        record(0, 1.0, completion=TOOL_COMPLETION, tools_called=["add"]),
        record(1, 0.0),
        record(2, 1.0),
        record(3, None, error=ERROR, stop_reason="error"),
    ]


METADATA = {
    "env_id": "calc<demo>",
    "model": "m",
    "num_examples": 2,
    "rollouts_per_example": 2,
    "status": "complete",
    "duration_s": 1.5,
}


def test_pass_at_k_matches_the_closed_form() -> None:
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2)
    assert pass_at_k(4, 0, 4) == 0.0 and pass_at_k(4, 3, 2) == 1.0
    with pytest.raises(ValueError, match="pass@k needs"):
        pass_at_k(2, 3, 1)


def test_pass_at_k_table_groups_by_example_and_skips_errors() -> None:
    rows = [
        {"example_id": 0, "reward": 1.0},
        {"example_id": 0, "reward": 0.0},
        {"example_id": 1, "reward": 0.0},
        {"example_id": 1, "reward": 0.0},
        {"example_id": 1, "reward": None, "error": {"type": "X"}},
    ]
    table = pass_at_k_table(rows)
    assert table == {1: pytest.approx(0.25), 2: pytest.approx(0.5)}
    assert pass_at_k_table([{"example_id": 0, "reward": 1.0}]) == {}


def test_summary_counts_errors_apart_and_keeps_the_latest_line() -> None:
    rows = [*sample_records(), record(1, 1.0)]  # a resumed run wrote rollout 1 again
    assert [r["reward"] for r in latest_records(rows)][:2] == [1.0, 1.0]
    summary = summarize_records(rows, METADATA)
    assert summary.num_rollouts == 4 and summary.num_errored == 1
    assert summary.reward is not None and summary.reward.mean == 1.0 and summary.reward.n == 3
    assert summary.metrics["correct"].mean == 1.0
    assert summary.completion_tokens == 16 and summary.duration_s == 1.5
    assert summary.errors[0][1] == 1 and summary.errors[0][0].startswith("ModelCallError")


def test_histogram_uses_the_unit_range_unless_rewards_leave_it() -> None:
    bins = histogram([0.0, 0.05, 1.0, None, math.nan], bins=10)
    assert bins[0][:2] == (0.0, pytest.approx(0.1)) and bins[0][2] == 2 and bins[-1][2] == 1
    wide = histogram([-2.0, 2.0], bins=4)
    assert wide[0][0] == -2.0 and wide[-1][1] == 2.0 and sum(b[2] for b in wide) == 2


def test_report_escapes_model_text_and_shows_tool_calls() -> None:
    html = render_report(METADATA, sample_records())
    dom = parse(html)
    scripts = [attrs for tag, attrs in dom.tags if tag == "script"]
    assert len(scripts) == 1 and "src" not in scripts[0]  # only the report's own inline script
    assert not [t for t, _ in dom.tags if t in ("img", "link", "iframe")]
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in html
    assert "calc&lt;demo&gt;" in html
    assert not re.search(r"""(src|href)=["']?https?:""", html) and "url(" not in html
    # tool call with pretty arguments, its output labelled with the tool's name
    first = dom.text_by_id["rollout-0"]
    assert "→ add (call_7)" in first and '"a": 2,\n  "b": 3' in first
    assert "tool · add (call_7)" in first
    statuses = [attrs["data-status"] for tag, attrs in dom.tags if tag == "details"]
    assert statuses == ["passed", "failed", "passed", "errored"]
    assert "model server still failing" in dom.text_by_id["rollout-3"]
    counts = [int(attrs["data-count"] or 0) for tag, attrs in dom.tags if tag == "rect"]
    assert sum(counts) == 3 and counts[0] == 1 and counts[-1] == 2


def test_report_limits_the_conversations_shown() -> None:
    html = render_report(METADATA, sample_records(), max_rollouts=2)
    assert html.count("<details") == 2 and "Showing the first 2 of 4 rollouts" in html


def test_report_of_a_real_run_in_chromium(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    browser = chromium()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    run = tmp_path / "run"
    args = ["eval", "guess-the-number", "-n", "2", "-r", "2", "-o", str(run)]
    assert main([*args, "-a", '{"difficulty": "easy"}']) == 0
    with (run / "results.jsonl").open("a") as handle:  # plus one hostile, errored rollout
        handle.write(json.dumps(record(4, None, error=ERROR, completion=TOOL_COMPLETION)) + "\n")
    assert main(["view", str(run)]) == 0
    assert "report written to" in capsys.readouterr().out
    report = run / "report.html"

    page = dump_dom(browser, report.as_uri(), tmp_path / "profile-1")
    dom = parse(page)
    body = next(attrs for tag, attrs in dom.tags if tag == "body")
    assert body.get("data-ready") == "yes"  # the script ran to the end
    assert dom.text_by_id["shown"] == "5 of 5 rollouts shown"
    assert dom.text_by_id["title"] == "guess-the-number"
    assert (
        re.search(r"<title>(.*?)</title>", page).group(1) == "vfgym · guess-the-number · reference"
    )
    assert not [t for t, _ in dom.tags if t == "img"]  # the model's <img> stayed text
    assert "<img src=x onerror=" in dom.text_by_id["rollout-4"]
    assert "1 errored" not in dom.text_by_id["cards"]  # cards show counts, not sentences
    assert "ERRORED1" in dom.text_by_id["cards"].replace(" ", "").upper()
    assert [a["data-status"] for t, a in dom.tags if t == "details"].count("passed") == 4

    filtered = parse(dump_dom(browser, report.as_uri() + "#filter=errored", tmp_path / "p-2"))
    assert filtered.text_by_id["shown"] == "1 of 5 rollouts shown"
    details = {a["id"]: a for t, a in filtered.tags if t == "details"}
    assert "hidden" not in details["rollout-4"]
    assert all("hidden" in details[f"rollout-{i}"] for i in range(4))
    active = [a for t, a in filtered.tags if t == "button" and "active" in (a.get("class") or "")]
    assert [a["data-filter"] for a in active] == ["errored"]


SECRET = "sk-live-0123456789abcdef"


ATTACK = '<script>alert(1)</script><img src=x onerror="alert(2)">"\'&'


def summary_record(index: Any, reward: float | None, **fields: Any) -> dict[str, Any]:
    base = {
        "index": index,
        "example_id": index // 2 if isinstance(index, int) else index,
        "task": "default",
        "prompt": [{"role": "user", "content": "guess"}],
        "completion": [{"role": "assistant", "content": "42"}],
        "answer": "42",
        "reward": reward,
        "metrics": {},
        "stop_reason": "completed",
    }
    return {**base, **fields}


def write_run(directory: Path, metadata: dict[str, Any], records: list[Any]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / METADATA_FILE).write_text(json.dumps(metadata))
    lines = [json.dumps(r) for r in records]  # ASCII, with \\u escapes: as a reader meets them
    (directory / RESULTS_FILE).write_text("\n".join(lines) + "\n")


def test_a_lone_surrogate_in_the_results_does_not_stop_the_report(tmp_path) -> None:
    completion = [{"role": "assistant", "content": "half a pair: \ud83d, then more"}]
    write_run(tmp_path, {"env_id": "e"}, [summary_record(0, 1.0, completion=completion)])
    path = write_report(tmp_path)
    html = path.read_bytes().decode("utf-8")  # valid UTF-8
    assert "half a pair: \ufffd, then more" in html


def test_the_report_never_shows_an_api_key_from_older_metadata(tmp_path) -> None:
    metadata = {
        "env_id": "e",
        "model": "m",
        "base_url": f"https://user:{SECRET}@models.example/v1?api-key={SECRET}",
        "env_args": {"level": 2, "api_key": SECRET},
        "sampling_args": {"max_tokens": 64, "extra_headers": {"Authorization": SECRET}},
    }
    write_run(tmp_path, metadata, [summary_record(0, 1.0)])
    html = write_report(tmp_path).read_text(encoding="utf-8")
    assert SECRET not in html
    assert "models.example/v1" in html and "&quot;max_tokens&quot;: 64" in html


def test_huge_error_messages_do_not_blow_up_the_report() -> None:
    page = "<html>" + "upstream unavailable " * 50_000 + "</html>"  # about 1 MB
    rows = [
        summary_record(i, None, error={"type": "InternalServerError", "message": page + str(i)})
        for i in range(40)
    ]
    html = render_report({"env_id": "e"}, rows)
    assert len(html) < 500_000  # was 40 rollouts and 10 error-list entries of 1 MB each
    assert "more characters" in html


def test_model_and_user_text_is_escaped_everywhere_in_the_report() -> None:
    call = {"id": ATTACK, "type": "function", "function": {"name": ATTACK, "arguments": ATTACK}}
    hostile = summary_record(
        0,
        1.0,
        task=ATTACK,
        example_id=ATTACK,
        answer=ATTACK,
        stop_reason=ATTACK,
        turn=ATTACK,
        tools_called=[ATTACK],
        metrics={ATTACK: 1.0},
        reward_errors={ATTACK: ATTACK},
        prompt=[{"role": ATTACK, "content": ATTACK}],
        completion=[
            {
                "role": "assistant",
                "content": [{"type": "text", "text": ATTACK}],
                "tool_calls": [call],
            },
            {"role": "tool", "tool_call_id": ATTACK, "content": ATTACK},
        ],
    )
    errored = summary_record("x" + ATTACK, None, error={"type": ATTACK, "message": ATTACK})
    text_only = summary_record(2, 0.0, prompt=ATTACK, completion=ATTACK)
    metadata = {
        "env_id": ATTACK,
        "model": ATTACK,
        "status": ATTACK,
        "started_at": ATTACK,
        "base_url": ATTACK,
        "env_args": {ATTACK: ATTACK},
        "sampling_args": {ATTACK: ATTACK},
    }
    html = render_report(metadata, [hostile, errored, text_only], source=ATTACK)
    assert html.count("<script") == 1  # the report's own
    assert "<img" not in html and 'onerror="' not in html
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") > 15


def tool_call(name: str, arguments: Any, call_id: str = "call_1") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        ],
    }


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


def write_lines(directory: Path, lines: list[bytes], metadata: bytes = b'{"env_id": "e"}') -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / METADATA_FILE).write_bytes(metadata)
    (directory / RESULTS_FILE).write_bytes(b"".join(line + b"\n" for line in lines))


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


def test_no_rollouts_shown_by_the_cap_is_not_called_no_rollout_finished() -> None:
    html = render_report({}, [guess_record(0, 1.0), guess_record(1, 0.0)], max_rollouts=0)
    assert "Showing the first 0 of 2 rollouts" in html
    assert "No rollout has finished yet" not in html


def test_the_error_list_says_how_many_kinds_of_error_it_leaves_out() -> None:
    rows = [
        guess_record(i, None, error={"type": "E", "message": f"failure number {i}"})
        for i in range(13)
    ]
    html = render_report({}, rows)
    assert html.count("failure number") >= 10
    assert "3 more kinds of error" in html
    text = format_summary(summarize_records(rows))
    assert text.count("failure number") == 3
    assert "10 more kinds of error (10 rollouts" in text


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


def test_a_line_the_parser_refuses_is_a_damaged_line_and_cut_metadata_is_noted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A results line holding an integer past Python's digit limit raised a ValueError that
    is not a JSONDecodeError; a cut metadata.json stopped the whole report. Both are
    marked on the page, which shows every rollout it can read."""
    good = json.dumps(guess_record(0, 1.0)).encode()
    write_lines(tmp_path / "run", [b'{"index": 1, "turn": ' + b"9" * 5000 + b"}", good])
    assert main(["view", str(tmp_path / "run")]) == 0
    html = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    assert "1 damaged line of results.jsonl (line 1)" in html
    # a cut metadata.json is named on the page, which still shows the rollouts
    write_lines(tmp_path / "meta", [good], metadata=b'{"env_id"')
    assert main(["view", str(tmp_path / "meta")]) == 0
    assert "unexpected" not in capsys.readouterr().err
    html = (tmp_path / "meta" / "report.html").read_text(encoding="utf-8")
    note = re.search(r'<p class="note" id="no-metadata">(.*?)</p>', html, re.S)
    assert note is not None and f"{METADATA_FILE} cannot be read" in note.group(1)
    assert "restore it" in note.group(1) and html.count('<details class="rollout ') == 1


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
