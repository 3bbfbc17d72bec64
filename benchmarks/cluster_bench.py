"""Rollouts per second of a batch on a Ray cluster with 1, 2 and 4 workers, and the
driver's CPU time per rollout.

The workload is latency-bound, as an evaluation against a remote model is: each
rollout is a game of guess-the-number on 1..1023 played by binary search (9 to 10
model turns), and every model turn waits 100 ms. The model runs in its own process,
so the driver's CPU is the driver's alone. Each worker plays `--groups-per-worker`
groups of two at once; with the same load per worker, linear scaling means the rate
grows with the number of workers, and `fraction_of_linear` is each run's rate over
(workers x the one-worker rate). Workers are started and warmed up before the clock
starts, as in a long run their start is paid once.

    python benchmarks/cluster_bench.py [--workers 1 2 4] [--groups-per-worker 2]

Prints one JSON object. Needs ray (`pip install 'vfgym[ray]'`); starts a local
single-node cluster and shuts it down again.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import time
from typing import Any

LATENCY_S = 0.1
ENV_ARGS = {"low": 1, "high": 1023, "num_examples": 400}


def _serve(url_out: Any, stop: Any) -> None:
    """The model: guess-the-number's binary search, 100 ms per turn, in this process."""
    from vfgym.envs.registry import load_environment
    from vfgym.inference.server import ModelServer

    env = load_environment("guess-the-number", **ENV_ARGS)

    async def policy(messages: Any) -> Any:
        await asyncio.sleep(LATENCY_S)
        return env.reference_policy(messages)

    async def serve() -> None:
        async with ModelServer(policy, record_requests=False) as server:
            url_out.put(server.base_url)
            while not stop.is_set():
                await asyncio.sleep(0.1)

    asyncio.run(serve())


async def _one_run(
    env: Any, base_url: str, workers: int, groups: int, per_worker: int
) -> dict[str, Any]:
    """Start `workers` workers, warm them up with one round, then time `groups` groups."""
    from openai import AsyncOpenAI

    from vfgym.cluster import ClusterGroups, ClusterSettings
    from vfgym.cluster.batch import worker_args
    from vfgym.engine.runner import run_batch

    client = AsyncOpenAI(base_url=base_url, api_key="unused")
    settings = ClusterSettings(address="auto", workers=workers, groups_per_worker=per_worker)
    rows = env.get_eval_inputs(groups, 2)
    args = worker_args(env, client, "m", None, True, None)
    async with ClusterGroups(settings, args) as remote:
        warm = rows[: 2 * workers * per_worker]
        await run_batch(env, warm, client=client, model="m", rollouts_per_example=2, remote=remote)
        cpu_before = time.process_time()
        started = time.perf_counter()
        outputs = await run_batch(
            env, rows, client=client, model="m", rollouts_per_example=2, remote=remote
        )
        seconds = time.perf_counter() - started
        cpu = time.process_time() - cpu_before
    await client.close()
    rollouts = len(outputs.reward)
    turns = [
        sum(1 for message in completion if message.get("role") == "assistant")
        for completion in outputs.completion
    ]
    return {
        "workers": workers,
        "rollouts": rollouts,
        "errors": sum(1 for state in outputs.state if state.get("error")),
        "seconds": round(seconds, 2),
        "rollouts_per_s": round(rollouts / seconds, 2),
        "mean_turns": round(sum(turns) / len(turns), 2),
        "driver_cpu_ms_per_rollout": round(1000 * cpu / rollouts, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--groups-per-worker", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=4, help="groups each slot plays in turn")
    args = parser.parse_args()

    import ray

    from vfgym.envs.registry import load_environment

    context = multiprocessing.get_context("spawn")
    url_out, stop = context.Queue(), context.Event()
    server = context.Process(target=_serve, args=(url_out, stop), daemon=True)
    server.start()
    try:
        base_url = url_out.get(timeout=120)
        ray.init(num_cpus=max(args.workers), include_dashboard=False, log_to_driver=False)
        env = load_environment("guess-the-number", **ENV_ARGS)
        runs = []
        for workers in args.workers:
            groups = workers * args.groups_per_worker * args.rounds
            run = _one_run(env, base_url, workers, groups, args.groups_per_worker)
            runs.append(asyncio.run(run))
        base = runs[0]["rollouts_per_s"] / runs[0]["workers"]
        for run_figures in runs:
            linear = base * run_figures["workers"]
            run_figures["fraction_of_linear"] = round(run_figures["rollouts_per_s"] / linear, 3)
        print(json.dumps({"latency_s": LATENCY_S, "cpus": os.cpu_count(), "runs": runs}, indent=2))
    finally:
        ray.shutdown()
        stop.set()
        server.join(timeout=30)
        if server.is_alive():
            server.terminate()


if __name__ == "__main__":
    main()
