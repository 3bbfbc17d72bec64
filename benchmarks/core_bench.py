"""Rollout-engine benchmark: vfgym against verifiers 0.1.7.post0, side by side.

Measures framework overhead (rollouts per second with a model stand-in that
answers at once) for a single-turn env, a 10-turn multi-turn env and a tool env
at several concurrencies, for both frameworks in one invocation, and prints the
ratio. Then the same workloads over loopback HTTP against a lean stand-in server
(`core/serve.py`), with a bare aiohttp client making the same rollouts as the floor
of CPU per model call (`--http-only` runs this table alone), and the stress run:
many concurrent 10-turn rollouts in one process, with the longest event-loop stall and the peak RSS.

The reference library runs in a venv of its own, built on first use under
~/.cache/vfgym-bench (override with VFGYM_BENCH_CACHE). Each framework runs in
its own worker process; runs alternate between them and the best of the repeats
counts, so load from other processes hurts both sides alike.

    .venv/bin/python benchmarks/core_bench.py            # full run, a few minutes
    .venv/bin/python benchmarks/core_bench.py --quick    # seconds
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "core"))

from procs import ServerProcess, Worker, run_stress
from reference_venv import REFERENCE, ensure_reference_venv
from report import Verdict, http_section, stress_section, summary, throughput_section
from workloads import WORKLOADS

# Rollouts per measured run (the same for every concurrency and both frameworks).
FULL_ROLLOUTS = {"single": 4096, "multi10": 1024, "tool": 2048}
QUICK_ROLLOUTS = {"single": 512, "multi10": 128, "tool": 256}
HTTP_FULL_ROLLOUTS = {"single": 1024, "multi10": 128, "tool": 512}
HTTP_QUICK_ROLLOUTS = {"single": 128, "multi10": 16, "tool": 64}
CONCURRENCIES = (1, 64, 1024)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="vfgym rollout-engine benchmark against verifiers 0.1.7.post0",
    )
    parser.add_argument("--quick", action="store_true", help="a short run (seconds)")
    parser.add_argument(
        "--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS), metavar="NAME"
    )
    parser.add_argument("--concurrency", nargs="+", type=int, default=list(CONCURRENCIES))
    parser.add_argument(
        "--repeats", type=int, default=None, help="runs per cell, best counts (3; quick 1)"
    )
    parser.add_argument(
        "--no-reference", action="store_true", help=f"measure vfgym only (no {REFERENCE} venv)"
    )
    parser.add_argument("--no-async", action="store_true", help="skip the async-hooks table")
    parser.add_argument(
        "--http",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the loopback-HTTP table (on by default, off with --quick)",
    )
    parser.add_argument(
        "--http-repeats",
        type=int,
        default=None,
        help="runs per HTTP cell, best counts (2; quick 1)",
    )
    parser.add_argument("--no-stress", action="store_true", help="skip the stress run")
    parser.add_argument(
        "--http-only",
        action="store_true",
        help="only the loopback-HTTP table (no in-process tables, no stress run)",
    )
    parser.add_argument(
        "--stress-rollouts", type=int, default=None, help="stress rollouts (10000; quick 1000)"
    )
    parser.add_argument(
        "--stress-latency",
        nargs=2,
        type=float,
        default=None,
        metavar=("LOW", "HIGH"),
        help="per-turn model latency in seconds, uniform (2 6; quick 0.2 0.6)",
    )
    parser.add_argument("--stress-reference", action="store_true", help=f"stress {REFERENCE} too")
    parser.add_argument("--json", type=Path, default=None, help="also write every run here")
    args = parser.parse_args(argv)
    if any(c < 1 for c in args.concurrency):
        parser.error("--concurrency values must be at least 1")
    if args.http_only:
        if args.http is False:
            parser.error("--http-only and --no-http contradict each other")
        args.http, args.no_stress = True, True
    if args.http is None:
        args.http = not args.quick
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    if args.http_repeats is None:
        args.http_repeats = 1 if args.quick else 2
    if args.repeats < 1 or args.http_repeats < 1:
        parser.error("--repeats and --http-repeats must be at least 1")
    if args.stress_rollouts is None:
        args.stress_rollouts = 1000 if args.quick else 10_000
    if args.stress_latency is None:
        args.stress_latency = [0.2, 0.6] if args.quick else [2.0, 6.0]
    low, high = args.stress_latency
    if not 0 <= low <= high:
        parser.error("--stress-latency needs 0 <= LOW <= HIGH")
    return args


def check_interpreter() -> None:
    """The vfgym side runs in this interpreter's venv: it must have vfgym."""
    try:
        import vfgym  # noqa: F401
    except ImportError:
        raise SystemExit(
            "vfgym is not importable from this Python; run the benchmark with the project's "
            "venv: .venv/bin/python benchmarks/core_bench.py"
        ) from None


def load1() -> float | None:
    """The 1-minute load average, or None where the platform has none."""
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def measure(
    workers: dict[str, Worker],
    rollouts: dict[str, int],
    args: argparse.Namespace,
    *,
    flavour: str,
    client: dict[str, Any],
    repeats: int,
) -> dict[tuple[str, int], dict[str, list[dict[str, Any]]]]:
    """Every (workload, concurrency) cell, frameworks alternating run by run."""
    results: dict[tuple[str, int], dict[str, list[dict[str, Any]]]] = {}
    for workload in args.workloads:
        warm = {"workload": workload, "flavour": flavour, "client": client}
        for worker in workers.values():  # imports, env build, thread pools: not measured
            worker.run({**warm, "rollouts": min(64, rollouts[workload]), "concurrency": 8})
        for concurrency in args.concurrency:
            cell = results.setdefault((workload, concurrency), {fw: [] for fw in workers})
            request = {**warm, "rollouts": rollouts[workload], "concurrency": concurrency}
            for _ in range(repeats):
                for name, worker in workers.items():
                    cell[name].append(worker.run(request))
            line = "  ".join(
                f"{fw} {max(r['rollouts_per_s'] for r in runs):,.0f}/s" for fw, runs in cell.items()
            )
            print(f"  {flavour:5} {workload:8} c={concurrency:<5} {line}", file=sys.stderr)
    return results


BARE = "bare aiohttp"


def measure_http(
    workers: dict[str, Worker],
    server: ServerProcess,
    rollouts: dict[str, int],
    args: argparse.Namespace,
) -> dict[tuple[str, int], dict[str, list[dict[str, Any]]]]:
    """The HTTP cells: each framework and a bare aiohttp client (run by vfgym's worker,
    in the same run), alternating, with the server's CPU per request of every run."""
    results: dict[tuple[str, int], dict[str, list[dict[str, Any]]]] = {}
    client = {"kind": "http", "base_url": server.base_url}
    bare_worker = workers["vfgym"]

    def timed(name: str, request: dict[str, Any]) -> dict[str, Any]:
        before = server.stats()
        worker = bare_worker if name == BARE else workers[name]
        run = worker.run(request)
        after = server.stats()
        served = after["requests"] - before["requests"]
        run["server_cpu_us_per_request"] = 1e6 * (after["cpu_s"] - before["cpu_s"]) / max(1, served)
        return run

    for workload in args.workloads:
        warm = {"workload": workload, "flavour": "sync", "client": client}
        bare = {"op": "bare", "workload": workload, "base_url": server.base_url}
        for worker in workers.values():  # imports, env build, connections: not measured
            worker.run({**warm, "rollouts": min(64, rollouts[workload]), "concurrency": 8})
        bare_worker.run({**bare, "rollouts": min(64, rollouts[workload]), "concurrency": 8})
        for concurrency in args.concurrency:
            cell = results.setdefault(
                (workload, concurrency), {name: [] for name in [*workers, BARE]}
            )
            sized = {"rollouts": rollouts[workload], "concurrency": concurrency}
            for _ in range(args.http_repeats):
                for name in workers:
                    cell[name].append(timed(name, {**warm, **sized}))
                cell[BARE].append(timed(BARE, {**bare, **sized}))
            line = "  ".join(
                f"{fw} {max(r['rollouts_per_s'] for r in runs):,.0f}/s" for fw, runs in cell.items()
            )
            print(f"  http  {workload:8} c={concurrency:<5} {line}", file=sys.stderr)
    return results


def flatten(results: dict[Any, dict[str, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    """Every run of a measured table, for the JSON record."""
    return [run for cell in results.values() for runs in cell.values() for run in runs]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    check_interpreter()
    command = " ".join(
        [".venv/bin/python", "benchmarks/core_bench.py", *map(shlex.quote, sys.argv[1:])]
    )
    started = time.perf_counter()
    loads = [load1()]
    pythons: dict[str, Path | str] = {"vfgym": sys.executable}
    if not args.no_reference:
        pythons[REFERENCE] = ensure_reference_venv()
    frameworks = list(pythons)
    rollouts = QUICK_ROLLOUTS if args.quick else FULL_ROLLOUTS
    http_rollouts = HTTP_QUICK_ROLLOUTS if args.quick else HTTP_FULL_ROLLOUTS
    record: dict[str, Any] = {"command": command, "argv": sys.argv[1:]}
    sections: list[str] = []
    verdicts: list[Verdict] = []

    workers: dict[str, Worker] = {}
    try:
        for name, python in pythons.items():
            workers[name] = Worker(python, name)
        versions = {name: w.info["version"] for name, w in workers.items()}
        record["versions"] = versions
        print(f"[bench] workers up: {versions}", file=sys.stderr)

        scripted = {"kind": "scripted"}
        flavours = ["sync"] if (args.quick or args.no_async) else ["sync", "async"]
        if args.http_only:
            flavours = []
        for flavour in flavours:
            res = measure(
                workers, rollouts, args, flavour=flavour, client=scripted, repeats=args.repeats
            )
            record[f"scripted_{flavour}"] = flatten(res)
            text, v = throughput_section(res, frameworks, judge=flavour == "sync", label="overhead")
            verdicts += v
            title = (
                "Framework overhead, zero-latency in-process model, sync reward + tool (HEADLINE)"
                if flavour == "sync"
                else "Framework overhead, zero-latency in-process model, async reward + tool"
            )
            sections.append(f"{title}\n\n{text}")
            loads.append(load1())

        if args.http:
            with ServerProcess() as server:
                res = measure_http(workers, server, http_rollouts, args)
            record["http_sync"] = flatten(res)
            loads.append(load1())
            text, v = http_section(res, frameworks, BARE)
            verdicts += v
            sections.append(
                "Over loopback HTTP (HEADLINE): a lean stand-in server in its own process; "
                "vfgym with a plain AsyncOpenAI (its own transport), the reference with the "
                "openai client's httpx pool, and a bare aiohttp client making the same "
                f"rollouts; sync hooks\n\n{text}"
            )
    finally:
        for worker in workers.values():
            worker.close()

    if not args.no_stress:
        stress_args = [
            "--rollouts",
            str(args.stress_rollouts),
            "--latency-low",
            str(args.stress_latency[0]),
            "--latency-high",
            str(args.stress_latency[1]),
        ]
        stress_runs = [run_stress(sys.executable, "vfgym", stress_args)]
        if args.stress_reference and REFERENCE in pythons:
            stress_runs.append(run_stress(pythons[REFERENCE], REFERENCE, stress_args))
        record["stress"] = stress_runs
        text, v = stress_section(stress_runs, judge=True)
        verdicts += v
        low, high = args.stress_latency
        sections.append(
            f"Stress: {args.stress_rollouts:,} concurrent 10-turn rollouts in one process "
            f"(model latency uniform {low:g}-{high:g} s per turn, fresh response objects, "
            f"10 ms stall ticker)\n\n{text}"
        )

    loads.append(load1())
    known = [x for x in loads if x is not None]
    elapsed = time.perf_counter() - started
    header = (
        f"vfgym rollout-engine benchmark ({'quick' if args.quick else 'full'} run)\n"
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
        + (f", 1-min load average {min(known):.1f}-{max(known):.1f}" if known else "")
        + "\n"
        f"versions: {', '.join(f'{k} {v}' for k, v in record['versions'].items())}\n"
        f"best of {args.repeats} run(s) per cell ({args.http_repeats} over HTTP), frameworks "
        "alternating; r/s = rollouts per "
        f"second of generate() incl. scoring (wall clock); cpu us/rollout = process CPU time "
        "per rollout, best run"
    )
    print(header)
    busy = max(known, default=0.0)
    if busy > (os.cpu_count() or 1):
        print(
            f"NOTE: the load average ({busy:.1f}) exceeded the {os.cpu_count()} cores: other "
            "processes competed for CPU, so wall-clock figures and stalls are pessimistic; "
            "cpu us/rollout and the loop-thread CPU of a stall are the figures less affected."
        )
    for section in sections:
        print(f"\n{section}")
    print(f"\nTargets\n{summary(verdicts)}")
    print(f"\nReproduce: {command}   ({elapsed:.0f} s)")
    if args.json is not None:
        record["verdicts"] = [v.__dict__ for v in verdicts]
        args.json.write_text(json.dumps(record, indent=1))
    return 0 if all(v.passed for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
