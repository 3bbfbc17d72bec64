"""Edge cases of summaries and the HTML report: runs where nothing was scored, metrics
that are missing or NaN, text that is hostile, not valid Unicode or huge, and
metadata written before credentials were redacted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vfgym.results.jsonl import METADATA_FILE, RESULTS_FILE
from vfgym.results.report import render_report, write_report
from vfgym.results.summary import format_summary, histogram, summarize_records

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


def test_a_run_where_every_rollout_errored_is_summarized_without_scores() -> None:
    error = {"type": "APIConnectionError", "message": "Connection error."}
    rows = [summary_record(i, None, error=error, completion_tokens=None) for i in range(4)]
    summary = summarize_records(rows, {"env_id": "e", "model": "m"})
    assert (summary.num_rollouts, summary.num_errored, summary.num_scored) == (4, 4, 0)
    assert summary.reward is None and summary.metrics == {} and summary.pass_at_k == {}
    text = format_summary(summary, {"env_id": "e", "model": "m"})
    assert "reward    none (no rollout was scored)" in text
    assert "error (4 rollouts): APIConnectionError: Connection error." in text
    html = render_report({"env_id": "e"}, rows)
    assert '<div class="value">none</div>' in html


def test_token_counts_that_are_not_numbers_count_zero() -> None:
    rows = [
        summary_record(0, 1.0, completion_tokens=5),
        summary_record(1, 1.0, completion_tokens=float("nan")),
        summary_record(2, 1.0, completion_tokens="many"),
    ]
    assert summarize_records(rows).completion_tokens == 5


def test_a_metric_that_failed_on_every_rollout_is_shown_not_dropped() -> None:
    rows = [
        summary_record(i, 0.5, metrics={"win": 1.0, "judge": None, "reward_errors": 1.0}) for i in range(3)
    ]
    summary = summarize_records(rows)
    assert list(summary.metrics) == ["win", "judge", "reward_errors"]
    assert summary.metrics["judge"].n == 0
    text = format_summary(summary)
    judge = next(line for line in text.splitlines() if line.strip().startswith("judge"))
    assert judge.split() == ["judge", "n/a", "n/a", "n/a", "n/a", "0"]
    assert "nan" not in text
    html = render_report({}, rows)
    assert "<tr><td>judge</td><td>-</td><td>-</td><td>-</td><td>-</td><td>0</td></tr>" in html


def test_a_metric_missing_on_some_rollouts_shows_how_many_it_covers() -> None:
    rows = [
        summary_record(0, 1.0, metrics={"win": 1.0, "bonus": 0.5}),
        summary_record(1, 0.0, metrics={"win": 0.0}),
    ]
    text = format_summary(summarize_records(rows))
    table = [line.split() for line in text.splitlines() if line.startswith("  ")]
    assert table[0] == ["metric", "mean", "std", "min", "max", "n"]
    assert ["bonus", "0.500", "0.000", "0.500", "0.500", "1"] in table
    assert ["win", "0.500", "0.500", "0.000", "1.000", "2"] in table
    # A complete table keeps the plain layout the README shows.
    full = format_summary(summarize_records([summary_record(0, 1.0, metrics={"win": 1.0})]))
    header = next(line for line in full.splitlines() if line.strip().startswith("metric"))
    assert header.split() == ["metric", "mean", "std", "min", "max"]


def test_histogram_of_rewards_near_the_float_limits() -> None:
    bins = histogram([-1e308, 0.0, 1e308], bins=4)
    assert [count for _, _, count in bins] == [1, 0, 1, 1]
    assert bins[0][0] == -1e308 and bins[-1][1] == 1e308


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


def test_the_printed_summary_is_always_valid_utf8() -> None:
    """Error text can carry a lone surrogate (a model's broken text quoted in an exception);
    printing the summary to a UTF-8 terminal must not fail once the run is over."""
    error = {"type": "ValueError", "message": "cannot parse '\udcff' as a move"}
    rows = [summary_record(0, None, error=error), summary_record(1, 1.0)]
    text = format_summary(summarize_records(rows), {"env_id": "e", "model": "m\udc80"})
    text.encode("utf-8")
    assert "cannot parse '\ufffd' as a move" in text
