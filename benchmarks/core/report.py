"""Turning measurements into the tables the benchmark prints, with PASS/FAIL marks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

RATIO_TARGET = 2.0
HTTP_RATIO_TARGET = 3.0
HTTP_CPU_TARGET = 1.5
STALL_TARGET_MS = 100.0
RSS_TARGET_MB = 1024.0


@dataclass(frozen=True)
class Verdict:
    """One target's outcome, for the summary at the end."""

    name: str
    passed: bool
    detail: str


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A plain fixed-width table (first column left-aligned, the rest right-aligned)."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        pairs = enumerate(zip(row, widths, strict=True))
        parts = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in pairs]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


def best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The fastest of repeated runs: interference from other processes only slows a run."""
    return max(runs, key=lambda r: r["rollouts_per_s"])


def throughput_section(
    results: dict[tuple[str, int], dict[str, list[dict[str, Any]]]],
    frameworks: Sequence[str],
    *,
    judge: bool,
    label: str,
) -> tuple[str, list[Verdict]]:
    """The side-by-side rollouts-per-second table and the ratio verdicts."""
    headers = ["workload", "concurrency", "rollouts"]
    for fw in frameworks:
        headers += [f"{fw} r/s", f"{fw} cpu us/rollout"]
    if len(frameworks) == 2:
        headers += ["ratio", f"target >= {RATIO_TARGET:g}x" if judge else "ratio target"]
    rows, verdicts = [], []
    for (workload, concurrency), by_fw in results.items():
        picked = {fw: best(by_fw[fw]) for fw in frameworks if by_fw.get(fw)}
        if not picked:
            continue
        any_run = next(iter(picked.values()))
        row: list[Any] = [workload, concurrency, any_run["rollouts"]]
        for fw in frameworks:
            run = picked.get(fw)
            if run is None:
                row += ["-", "-"]
                continue
            mark = "" if run["ok"] else " (CHECK FAILED)"
            cpu = min(r["cpu_s"] / r["rollouts"] for r in by_fw[fw])
            row += [f"{run['rollouts_per_s']:,.0f}{mark}", f"{1e6 * cpu:,.0f}"]
        if len(frameworks) == 2 and len(picked) == 2:
            ours, theirs = (picked[fw]["rollouts_per_s"] for fw in frameworks)
            ratio = ours / theirs
            ok = ratio >= RATIO_TARGET and all(r["ok"] for r in picked.values())
            row += [f"{ratio:.2f}x", ("PASS" if ok else "FAIL") if judge else "(info)"]
            if judge:
                verdicts.append(
                    Verdict(
                        f"{label} {workload} @ {concurrency}: vfgym >= {RATIO_TARGET:g}x reference",
                        ok,
                        f"{ratio:.2f}x",
                    )
                )
        rows.append(row)
    return table(headers, rows), verdicts


def _cpu_per_call(runs: list[dict[str, Any]]) -> float:
    """The least process CPU per model call over repeated runs, in seconds."""
    return min(
        r["cpu_s"] / max(1.0, r.get("model_calls") or r["rollouts"] * r["model_calls_per_rollout"])
        for r in runs
    )


def http_section(
    results: dict[tuple[str, int], dict[str, list[dict[str, Any]]]],
    frameworks: Sequence[str],
    bare: str,
) -> tuple[str, list[Verdict]]:
    """The HTTP table: rollouts/s of each framework, vfgym's CPU per model call against
    the bare client's, and the server's CPU per request; both targets judged per cell."""
    ours, theirs = frameworks[0], (frameworks[1] if len(frameworks) > 1 else None)
    headers = ["workload", "concurrency", "rollouts", f"{ours} r/s"]
    if theirs:
        headers += [f"{theirs} r/s", "ratio", f">= {HTTP_RATIO_TARGET:g}x"]
    headers += [
        f"{ours} cpu us/call",
        f"{bare} cpu us/call",
        "cpu ratio",
        f"<= {HTTP_CPU_TARGET:g}x",
        "server cpu us/req",
    ]
    rows, verdicts = [], []
    for (workload, concurrency), by_fw in results.items():
        mine = best(by_fw[ours])
        row: list[Any] = [workload, concurrency, mine["rollouts"], f"{mine['rollouts_per_s']:,.0f}"]
        if theirs:
            other = best(by_fw[theirs])
            ratio = mine["rollouts_per_s"] / other["rollouts_per_s"]
            ok = ratio >= HTTP_RATIO_TARGET and mine["ok"] and other["ok"]
            row += [f"{other['rollouts_per_s']:,.0f}", f"{ratio:.2f}x", "PASS" if ok else "FAIL"]
            verdicts.append(
                Verdict(
                    f"http {workload} @ {concurrency}: vfgym >= {HTTP_RATIO_TARGET:g}x reference",
                    ok,
                    f"{ratio:.2f}x",
                )
            )
        cpu_mine, cpu_bare = _cpu_per_call(by_fw[ours]), _cpu_per_call(by_fw[bare])
        cpu_ratio = cpu_mine / cpu_bare
        cpu_ok = cpu_ratio <= HTTP_CPU_TARGET and mine["ok"] and all(r["ok"] for r in by_fw[bare])
        server = min(r["server_cpu_us_per_request"] for runs in by_fw.values() for r in runs)
        row += [
            f"{1e6 * cpu_mine:,.0f}",
            f"{1e6 * cpu_bare:,.0f}",
            f"{cpu_ratio:.2f}x",
            "PASS" if cpu_ok else "FAIL",
            f"{server:,.0f}",
        ]
        verdicts.append(
            Verdict(
                f"http {workload} @ {concurrency}: vfgym CPU per model call <= "
                f"{HTTP_CPU_TARGET:g}x a bare aiohttp client",
                cpu_ok,
                f"{cpu_ratio:.2f}x ({1e6 * cpu_mine:,.0f} vs {1e6 * cpu_bare:,.0f} us)",
            )
        )
        rows.append(row)
    return table(headers, rows), verdicts


def stress_section(runs: list[dict[str, Any]], *, judge: bool) -> tuple[str, list[Verdict]]:
    """The many-concurrent-rollouts figures, one column per framework; vfgym's are judged."""
    metrics: list[tuple[str, Any]] = [
        ("rollouts (all started at once)", lambda r: f"{r['rollouts']:,}"),
        ("most model calls in flight", lambda r: f"{r['max_in_flight']:,}"),
        ("wall s", lambda r: f"{r['wall_s']:.1f}"),
        (
            "process CPU s (loop busy %)",
            lambda r: f"{r['cpu_s']:.1f} ({100 * r['cpu_s'] / r['wall_s']:.0f}%)",
        ),
        ("max stall ms (at s)", lambda r: f"{r['max_stall_ms']:.0f} ({r['max_stall_at_s']:.1f})"),
        ("  loop-thread CPU in that stall ms", lambda r: f"{r['max_stall_cpu_ms']:.0f}"),
        ("p99 stall ms", lambda r: f"{r['p99_stall_ms']:.0f}"),
        ("stalls over 100 ms", lambda r: r["stalls_over_100ms"]),
        ("gc full collections", lambda r: r["gc_collections"][2]),
        ("gc longest full collection ms", lambda r: f"{r['gc_max_pause_ms'][2]:.0f}"),
        ("gc pauses total s", lambda r: f"{r['gc_total_pause_s']:.1f}"),
        ("gc-tracked objects at end", lambda r: f"{r['gc_tracked_objects']:,}"),
        ("peak RSS MiB", lambda r: f"{r['peak_rss_mb']:.0f}"),
        ("  of which before the run MiB", lambda r: f"{r['rss_before_run_mb']:.0f}"),
        ("outputs checked", lambda r: "ok" if r["ok"] else "FAILED"),
    ]
    verdicts: list[Verdict] = []
    stall_row: list[Any] = [f"max stall < {STALL_TARGET_MS:.0f} ms"]
    rss_row: list[Any] = ["peak RSS < 1 GiB"]
    for run in runs:
        stall_ok = run["max_stall_ms"] < STALL_TARGET_MS and run["ok"]
        rss_ok = run["peak_rss_mb"] < RSS_TARGET_MB and run["ok"]
        judged = judge and run["framework"] == "vfgym"
        stall_row.append(("PASS" if stall_ok else "FAIL") if judged else "(info)")
        rss_row.append(("PASS" if rss_ok else "FAIL") if judged else "(info)")
        if judged:
            n = run["rollouts"]
            verdicts += [
                Verdict(
                    f"stress: {n:,} concurrent 10-turn rollouts, max stall < 100 ms",
                    stall_ok,
                    f"{run['max_stall_ms']:.0f} ms",
                ),
                Verdict(
                    f"stress: {n:,} concurrent 10-turn rollouts, peak RSS < 1 GiB",
                    rss_ok,
                    f"{run['peak_rss_mb']:.0f} MiB",
                ),
            ]
    rows = [[name, *(fmt(r) for r in runs)] for name, fmt in metrics]
    rows += [stall_row, rss_row]
    return table(["", *(r["framework"] for r in runs)], rows), verdicts


def summary(verdicts: list[Verdict]) -> str:
    """One line per target, then the count."""
    lines = [f"  [{'PASS' if v.passed else 'FAIL'}] {v.name}: {v.detail}" for v in verdicts]
    passed = sum(v.passed for v in verdicts)
    lines.append(f"  {passed} of {len(verdicts)} targets met")
    return "\n".join(lines)
