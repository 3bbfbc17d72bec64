"""vfgym against verifiers 0.1.7 over a real vLLM: rollouts per second, side by side.

The vLLM is the test suite's (tests/vllm_server): CPU vLLM serving a tiny random-weight
model, started on a free loopback port and stopped after (`bash .ci/setup-vllm`
builds its venv once). Its answers are noise, so the runs check the rollouts and
their model calls, not rewards. Each framework runs in its own worker process (the
same workers as core_bench.py), alternating run by run; best of the repeats counts.

    .venv/bin/python benchmarks/vllm_bench.py                 # about 10 minutes
    .venv/bin/python benchmarks/vllm_bench.py --workloads single multi10 --repeats 2
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "core"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "vllm"))

from procs import Worker
from reference_venv import REFERENCE, ensure_reference_venv
from report import best, table
from vllm_process import SERVED_MODEL, running_vllm

#: Few tokens per answer: the model is noise, and the cores are shared.
SAMPLING = {"max_tokens": 8, "temperature": 1.0}
CALLS = {"single": 1, "multi10": 10}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # CPU vLLM answers in seconds on two shared cores: the defaults fit in minutes.
    parser.add_argument("--workloads", nargs="+", choices=list(CALLS), default=["single"])
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 16])
    parser.add_argument("--rollouts", type=int, default=64, help="rollouts per run (64)")
    parser.add_argument("--repeats", type=int, default=1, help="runs per cell, best counts (1)")
    args = parser.parse_args(argv)
    if args.rollouts < 1 or args.repeats < 1 or any(c < 1 for c in args.concurrency):
        parser.error("--rollouts, --repeats and --concurrency must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = " ".join(
        [".venv/bin/python", "benchmarks/vllm_bench.py", *map(shlex.quote, sys.argv[1:])]
    )
    pythons: dict[str, Path | str] = {"vfgym": sys.executable, REFERENCE: ensure_reference_venv()}
    rows: list[list[Any]] = []
    with tempfile.TemporaryDirectory(prefix="vfgym-vllm-bench-") as logs:
        with running_vllm(Path(logs)) as server:
            workers = {name: Worker(python, name) for name, python in pythons.items()}
            try:
                for workload in args.workloads:
                    base = {
                        "workload": workload,
                        "flavour": "sync",
                        "client": {"kind": "http", "base_url": server.base_url},
                        "model": SERVED_MODEL,
                        "sampling_args": SAMPLING,
                        "rewarded": False,
                    }
                    for worker in workers.values():  # imports, env build: not measured
                        worker.run({**base, "rollouts": 8, "concurrency": 8})
                    for concurrency in args.concurrency:
                        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in workers}
                        request = {**base, "rollouts": args.rollouts, "concurrency": concurrency}
                        for _ in range(args.repeats):
                            for name, worker in workers.items():
                                runs[name].append(worker.run(request))
                        ours, theirs = best(runs["vfgym"]), best(runs[REFERENCE])
                        cpu = {
                            name: min(r["cpu_s"] for r in rs) / (args.rollouts * CALLS[workload])
                            for name, rs in runs.items()
                        }
                        row = [
                            workload,
                            concurrency,
                            args.rollouts,
                            f"{ours['rollouts_per_s']:,.1f}" + ("" if ours["ok"] else " (CHECK)"),
                            f"{theirs['rollouts_per_s']:,.1f}"
                            + ("" if theirs["ok"] else " (CHECK)"),
                            f"{ours['rollouts_per_s'] / theirs['rollouts_per_s']:.2f}x",
                            f"{1e6 * cpu['vfgym']:,.0f}",
                            f"{1e6 * cpu[REFERENCE]:,.0f}",
                        ]
                        print("  " + "  ".join(map(str, row)), file=sys.stderr)
                        rows.append(row)
            finally:
                for worker in workers.values():
                    worker.close()
    print(
        f"vfgym vs {REFERENCE} 0.1.7 over a real CPU vLLM (tiny random-weight model, "
        f"max_tokens {SAMPLING['max_tokens']})\nmachine: {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}; best of {args.repeats}\n"
    )
    headers = [
        "workload",
        "concurrency",
        "rollouts",
        "vfgym r/s",
        f"{REFERENCE} r/s",
        "ratio",
        "vfgym cpu us/call",
        f"{REFERENCE} cpu us/call",
    ]
    print(table(headers, rows))
    print(f"\nReproduce: {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
