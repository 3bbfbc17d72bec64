"""Profile one benchmark workload under cProfile, in this process.

    .venv/bin/python benchmarks/core/profile_engine.py --workload tool --concurrency 64
    .venv/bin/python benchmarks/core/profile_engine.py --framework verifiers ...  # in its venv

Prints the top functions by own time and by cumulative time, and the cost per
rollout. With the "sync" flavour the reward and the tool may run in worker
threads, and cProfile then charges time spent waiting for the GIL to whatever
the loop thread was running; compare with `--flavour async` to separate that.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import importlib
import io
import pstats
import time

from scripted_model import ScriptedClient, ScriptedModel
from workloads import FLAVOURS, WORKLOADS, build_env, generate_inputs


async def _run(env: object, client: ScriptedClient, n: int, concurrency: int) -> float:
    start = time.perf_counter()
    await env.generate(  # type: ignore[attr-defined]
        generate_inputs(n), client, "scripted", max_concurrent=concurrency, use_tqdm=False
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", default="vfgym", choices=("vfgym", "verifiers"))
    parser.add_argument("--workload", default="multi10", choices=WORKLOADS)
    parser.add_argument("--flavour", default="sync", choices=FLAVOURS)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rollouts", type=int, default=1000)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()

    from datasets import Dataset

    vf = importlib.import_module(args.framework)
    env = build_env(vf, Dataset, args.workload, args.flavour)
    # Built once, outside the timings: creating an openai client loads TLS certificates.
    client = ScriptedClient(ScriptedModel())
    asyncio.run(_run(env, client, 64, 8))  # warm up: lazy imports, first-call caches
    profiler = cProfile.Profile()
    profiler.enable()
    wall = asyncio.run(_run(env, client, args.rollouts, args.concurrency))
    profiler.disable()
    unprofiled = asyncio.run(_run(env, client, args.rollouts, args.concurrency))
    print(
        f"{args.framework} {args.workload} ({args.flavour}) c={args.concurrency}: "
        f"{1e6 * unprofiled / args.rollouts:.0f} us/rollout unprofiled, "
        f"{1e6 * wall / args.rollouts:.0f} us/rollout under cProfile"
    )
    for key in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(key).print_stats(args.top)
        print(out.getvalue())


if __name__ == "__main__":
    main()
