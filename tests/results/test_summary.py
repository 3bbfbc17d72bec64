"""Summaries of a run: runs where nothing was scored, metrics that failed or are missing on
some rollouts, token counts that are not numbers, statistics and histograms near the
float limits, and a printed summary that is always valid UTF-8."""

from __future__ import annotations

import math
from typing import Any

import pytest
from cli_runs import no_configured_model, run  # noqa: F401 (the fixture is autouse)
from result_records import guess_record

from vfgym.results.jsonl import RESULTS_FILE, read_results
from vfgym.results.report import render_report
from vfgym.results.summary import Stats, format_summary, histogram, summarize_records


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
        summary_record(i, 0.5, metrics={"win": 1.0, "judge": None, "reward_errors": 1.0})
        for i in range(3)
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


def test_the_printed_summary_is_always_valid_utf8() -> None:
    """Error text can carry a lone surrogate (a model's broken text quoted in an exception);
    printing the summary to a UTF-8 terminal must not fail once the run is over."""
    error = {"type": "ValueError", "message": "cannot parse '\udcff' as a move"}
    rows = [summary_record(0, None, error=error), summary_record(1, 1.0)]
    text = format_summary(summarize_records(rows), {"env_id": "e", "model": "m\udc80"})
    text.encode("utf-8")
    assert "cannot parse '\ufffd' as a move" in text


def test_summary_reads_a_run_with_a_cut_last_line(tmp_path, capsys) -> None:
    """A killed run's cut-off line is skipped by every reader, the summary included."""
    assert run(["eval", "guess-the-number", "-n", "2", "-r", "1", "-o", "run"], capsys)[0] == 0
    path = tmp_path / "run" / RESULTS_FILE
    text = path.read_text()
    path.write_text(text[: len(text) - 20])
    _, records = read_results(tmp_path / "run")
    assert len(records) == 1
    code, out, err = run(
        ["eval", "guess-the-number", "-n", "2", "-r", "1", "--resume", "run"], capsys
    )
    assert code == 0, err
    assert "2 (0 errored" in out


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
