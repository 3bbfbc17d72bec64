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
from report_dom import chromium, dump_dom, parse

from vfgym.cli.main import main
from vfgym.results.report import render_report
from vfgym.results.summary import (
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
