"""Summary statistics of an evaluation, computed from its result lines.

`vfgym eval` prints them and `vfgym view` puts them at the top of the report, so
both read the same numbers from the same place: the records in `results.jsonl`.
Errored rollouts (a server or sandbox that failed) are counted apart and left out
of every score, because they say nothing about the model.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

#: A rollout passes (for pass@k) when its reward reaches this value.
DEFAULT_PASS_THRESHOLD = 1.0
_SURROGATE = re.compile("[\ud800-\udfff]")
#: Above this magnitude, statistics are computed in scaled units (see `Stats.of`).
_LARGE = 1e100


@dataclass(frozen=True)
class Stats:
    """Mean and spread of one column of numbers (NaN and None left out)."""

    n: int
    mean: float
    std: float
    min: float
    max: float

    @classmethod
    def of(cls, values: Iterable[float | None]) -> Stats | None:
        """The statistics of the finite values, or None when there are none."""
        finite = [float(v) for v in values if _is_finite(v)]
        if not finite:
            return None
        # Values past about 1e154 overflow when squared (an OverflowError, after the
        # run) and two near 1e308 sum to inf: such columns are computed in units of
        # their largest magnitude. Ordinary values are left exact.
        scale = max(abs(v) for v in finite)
        scale = scale if scale > _LARGE else 1.0
        scaled = [v / scale for v in finite]
        mean = sum(scaled) / len(scaled)
        var = sum((v - mean) ** 2 for v in scaled) / len(scaled)
        return cls(len(finite), mean * scale, math.sqrt(var) * scale, min(finite), max(finite))

    @classmethod
    def none(cls) -> Stats:
        """A column with no finite value (n=0, every statistic NaN), for a metric that was
        recorded but never had a value, so it is shown as such rather than left out."""
        return cls(0, math.nan, math.nan, math.nan, math.nan)


@dataclass(frozen=True)
class RunSummary:
    """Everything the summary table and the report header show about one run."""

    num_rollouts: int
    num_errored: int
    num_truncated: int
    reward: Stats | None
    metrics: dict[str, Stats]
    pass_at_k: dict[int, float]
    pass_threshold: float
    completion_tokens: int
    duration_s: float | None
    rollout_ms: Stats | None
    stop_reasons: dict[str, int] = field(default_factory=dict)
    errors: list[tuple[str, int]] = field(default_factory=list)
    #: Rollouts a resumed run took over from before; `duration_s` timed only the rest.
    resumed_rollouts: int = 0

    @property
    def num_scored(self) -> int:
        return self.num_rollouts - self.num_errored


def _is_finite(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _mapping(value: Any) -> Mapping[str, Any]:
    """`value` when it is a JSON object, else an empty one: a hand-edited or foreign line
    with a list or a number where an object belongs costs that field, not the summary."""
    return value if isinstance(value, Mapping) else {}


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:  # a list or an object, from a line vfgym did not write
        return False
    return True


def _group_key(value: Any) -> Any:
    """`value` as a dictionary key; a list or object stands for its JSON text."""
    return value if _hashable(value) else ("json", json.dumps(value, sort_keys=True, default=str))


def latest_records(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One record per rollout index, the last line winning, in index order.

    A resumed run appends a fresh line for a rollout that errored before, so the
    file can hold several lines for one index; only the latest one counts. A line
    whose index is no index (a list, an object) is kept apart, like one without.
    """
    by_index: dict[Any, dict[str, Any]] = {}
    extra: list[dict[str, Any]] = []
    for record in records:
        index = record.get("index")
        if index is None or not _hashable(index):
            extra.append(dict(record))
        else:
            by_index[index] = dict(record)
    ordered = [by_index[i] for i in sorted(by_index, key=_sort_key)]
    return ordered + extra


def _sort_key(value: Any) -> tuple[int, Any]:
    return (0, value) if isinstance(value, int) else (1, str(value))


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from n samples of which c passed.

    The chance that at least one of k samples drawn without replacement from the
    n passes: 1 - C(n-c, k) / C(n, k).
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_at_k_table(
    records: Iterable[Mapping[str, Any]], threshold: float = DEFAULT_PASS_THRESHOLD
) -> dict[int, float]:
    """pass@k for k = 1, 2, 4, ... up to the number of rollouts per example.

    Rollouts are grouped by (task, example_id); errored ones are left out, so an
    example's n is its number of scored rollouts. Empty when no example has more
    than one scored rollout.
    """
    groups: dict[tuple[Any, Any], list[float]] = {}
    for record in records:
        if record.get("error") or not _is_finite(record.get("reward")):
            continue
        task = record.get("task", "default")
        key = (_group_key(task), _group_key(record.get("example_id", record.get("index"))))
        groups.setdefault(key, []).append(float(record["reward"]))
    if not groups:
        return {}
    largest = max(len(rewards) for rewards in groups.values())
    if largest < 2:
        return {}
    ks = sorted({*(2**i for i in range(largest.bit_length()) if 2**i <= largest), largest})
    table: dict[int, float] = {}
    for k in ks:
        estimates = [
            pass_at_k(len(rewards), sum(r >= threshold for r in rewards), k)
            for rewards in groups.values()
            if len(rewards) >= k
        ]
        if estimates:
            table[k] = sum(estimates) / len(estimates)
    return table


def error_text(error: Any) -> str:
    """A one-line description of a record's `error` field."""
    if isinstance(error, Mapping):
        text = f"{error.get('type', 'Error')}: {error.get('message', '')}".strip()
    else:
        text = str(error)
    return " ".join(text.split())


def summarize_records(
    records: Iterable[Mapping[str, Any]],
    metadata: Mapping[str, Any] | None = None,
    pass_threshold: float = DEFAULT_PASS_THRESHOLD,
) -> RunSummary:
    """The run's summary from its result lines (deduplicated by rollout index)."""
    rows = latest_records(records)
    scored = [r for r in rows if not r.get("error")]
    metric_names: dict[str, None] = {}
    for record in scored:
        metric_names.update(dict.fromkeys(_mapping(record.get("metrics"))))
    metrics = {}
    for name in metric_names:
        # A metric whose function failed on every rollout (all NaN) is shown with n=0.
        stats = Stats.of(_mapping(r.get("metrics")).get(name) for r in scored)
        metrics[name] = stats if stats is not None else Stats.none()
    errors = Counter(error_text(r["error"]) for r in rows if r.get("error"))
    stops = Counter(str(r.get("stop_reason")) for r in rows if r.get("stop_reason"))
    duration = (metadata or {}).get("duration_s")
    resumed = (metadata or {}).get("resumed_rollouts")
    return RunSummary(
        num_rollouts=len(rows),
        num_errored=len(rows) - len(scored),
        num_truncated=sum(1 for r in rows if r.get("is_truncated")),
        reward=Stats.of(r.get("reward") for r in scored),
        metrics=metrics,
        pass_at_k=pass_at_k_table(scored, pass_threshold),
        pass_threshold=pass_threshold,
        completion_tokens=sum(_count(r.get("completion_tokens")) for r in rows),
        duration_s=float(duration) if _is_finite(duration) else None,
        rollout_ms=Stats.of(_mapping(r.get("timing")).get("total_ms") for r in rows),
        stop_reasons=dict(stops.most_common()),
        errors=errors.most_common(),
        resumed_rollouts=resumed if isinstance(resumed, int) and resumed > 0 else 0,
    )


def _count(value: Any) -> int:
    """A token count as a whole number; anything else (missing, NaN, text) counts 0."""
    return int(value) if _is_finite(value) else 0


def histogram(values: Iterable[float | None], bins: int = 10) -> list[tuple[float, float, int]]:
    """Counts of the finite values in equal-width bins: (low, high, count) each.

    Rewards usually live in [0, 1], so that range is used whenever the values fit
    it, which keeps histograms of different runs comparable.
    """
    if bins < 1:
        raise ValueError("bins must be at least 1")
    finite = [float(v) for v in values if _is_finite(v)]
    low, high = (0.0, 1.0)
    if finite and (min(finite) < 0.0 or max(finite) > 1.0):
        low, high = min(finite), max(finite)
        if low == high:
            # One value: a bin around it, wide enough to register at its magnitude (0.5
            # is no change at all beyond 1e16), and kept within the finite floats.
            half = max(0.5, abs(low) * 2.0**-20)
            low = max(low - half, -sys.float_info.max)
            high = min(high + half, sys.float_info.max)
    # Rewards near the float limits are binned at half scale: their span overflows to inf.
    scale = 1.0 if math.isfinite(high - low) else 0.5
    low_s = low * scale
    width = (high * scale - low_s) / bins
    counts = [0] * bins
    for v in finite:
        counts[min(bins - 1, int((v * scale - low_s) / width))] += 1
    edges = [(low_s + i * width) / scale for i in range(bins + 1)]
    return [(edges[i], edges[i + 1], counts[i]) for i in range(bins)]


def _fmt(value: float) -> str:
    """Three decimals; `n/a` for NaN (a column without a single finite value)."""
    return f"{value:.3f}" if math.isfinite(value) else "n/a"


def format_table(rows: list[tuple[str, ...]], indent: str = "  ") -> list[str]:
    """Plain text columns, left-aligned first column, right-aligned numbers."""
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append(indent + "  ".join(cells).rstrip())
    return lines


def _pairs(rows: list[tuple[str, str]]) -> list[str]:
    width = max(len(label) for label, _ in rows)
    return [f"{label.ljust(width)}  {value}" for label, value in rows]


def metric_counts_differ(summary: RunSummary) -> bool:
    """True when some metric has fewer values than there are scored rollouts."""
    return any(s.n != summary.num_scored for s in summary.metrics.values())


def format_summary(summary: RunSummary, metadata: Mapping[str, Any] | None = None) -> str:
    """The summary as the plain aligned text `vfgym eval` prints."""
    meta = metadata or {}
    lines = []
    title = f"{meta.get('env_id') or 'environment'} · model {meta.get('model') or '?'}"
    per = meta.get("rollouts_per_example")
    if meta.get("num_examples") is not None and per:
        title += f" · {meta['num_examples']} examples x {per} rollouts"
    lines.append(title)
    counts = f"{summary.num_rollouts} ({summary.num_errored} errored, "
    counts += f"{summary.num_truncated} truncated)"
    head: list[tuple[str, str]] = [("rollouts", counts)]
    if summary.reward is not None:
        r = summary.reward
        head.append(
            (
                "reward",
                f"{_fmt(r.mean)} ± {_fmt(r.std)}  (min {_fmt(r.min)}, max {_fmt(r.max)}, n={r.n})",
            )
        )
    else:
        head.append(("reward", "none (no rollout was scored)"))
    lines += _pairs(head)
    if summary.metrics:
        lines.append("")
        # n is shown only when some metric is missing or NaN on some scored rollouts,
        # since its mean then covers fewer rollouts than the reward's.
        counted = metric_counts_differ(summary)
        table = [("metric", "mean", "std", "min", "max", *(("n",) if counted else ()))]
        for name, s in summary.metrics.items():
            row = (name, _fmt(s.mean), _fmt(s.std), _fmt(s.min), _fmt(s.max))
            table.append((*row, *((str(s.n),) if counted else ())))
        lines += format_table(table)
    if summary.pass_at_k:
        lines.append("")
        label = f"pass@k (reward >= {summary.pass_threshold:g})"
        lines.append(label)
        lines += format_table([(f"pass@{k}", _fmt(v)) for k, v in summary.pass_at_k.items()])
    lines.append("")
    tail: list[tuple[str, str]] = []
    tokens = f"{summary.completion_tokens} completion tokens"
    if summary.num_rollouts:
        tokens += f" ({summary.completion_tokens / summary.num_rollouts:.1f} per rollout)"
    tail.append(("tokens", tokens))
    timing = f"{summary.duration_s:.2f} s" if summary.duration_s is not None else "unknown"
    if summary.resumed_rollouts and summary.duration_s is not None:
        timing += f" this session ({summary.resumed_rollouts} rollouts carried over)"
    if summary.rollout_ms is not None:
        timing += f" (rollout mean {summary.rollout_ms.mean:.0f} ms)"
    tail.append(("time", timing))
    if summary.stop_reasons:
        tail.append(("stopped", ", ".join(f"{k} {v}" for k, v in summary.stop_reasons.items())))
    lines += _pairs(tail)
    for message, count in summary.errors[:3]:
        lines.append(f"error ({count} rollouts): {message[:300]}")
    rest = summary.errors[3:]
    if rest:  # counted, so three lines are not read as all that went wrong
        more = sum(count for _, count in rest)
        lines.append(
            f"… and {len(rest)} more kinds of error ({more} rollouts; `vfgym view` lists them)"
        )
    # Printed to a terminal or log: a lone surrogate (from a model's broken text, or a
    # name given as undecodable bytes) would fail there, after the run, so it is replaced.
    return _SURROGATE.sub("\ufffd", "\n".join(lines))


__all__ = [
    "DEFAULT_PASS_THRESHOLD",
    "RunSummary",
    "Stats",
    "error_text",
    "format_summary",
    "format_table",
    "histogram",
    "latest_records",
    "metric_counts_differ",
    "pass_at_k",
    "pass_at_k_table",
    "summarize_records",
]
