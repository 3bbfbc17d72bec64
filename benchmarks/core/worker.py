"""One framework's side of the benchmark, run as its own process.

`python worker.py --framework vfgym|verifiers` serves measurement requests, one
JSON object per line on stdin, one JSON answer per line on stdout, so the
orchestrator can alternate between the two frameworks run by run. The same
file runs in vfgym's venv and in the reference venv; it imports only the
framework under test, `datasets`, `openai` and its neighbours in this folder.

`--stress` runs the many-concurrent-rollouts measurement once and exits, so
its peak RSS is that run's alone.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import json
import os
import resource
import sys
import time
import traceback
from typing import Any

import openai
from scripted_model import ScriptedClient, ScriptedModel
from stall import watch_gc, watch_stalls
from workloads import MODEL_CALLS, build_env, generate_inputs

MODEL = "scripted"
FRAMEWORKS = {"vfgym": "vfgym", "verifiers": "verifiers"}


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, in MiB (Linux reports KiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if sys.platform != "darwin" else peak / (1024 * 1024)


class Side:
    """A framework, its environments (built once each) and how to run them."""

    def __init__(self, framework: str) -> None:
        if framework not in FRAMEWORKS:
            raise SystemExit(f"--framework must be one of {sorted(FRAMEWORKS)}, not {framework!r}")
        self.name = framework
        self.vf = importlib.import_module(FRAMEWORKS[framework])
        from datasets import Dataset

        self._dataset_cls = Dataset
        self._envs: dict[tuple[str, str], Any] = {}

    @property
    def version(self) -> str:
        return str(getattr(self.vf, "__version__", "?"))

    def env(self, workload: str, flavour: str) -> Any:
        key = (workload, flavour)
        if key not in self._envs:
            self._envs[key] = build_env(self.vf, self._dataset_cls, workload, flavour)
        return self._envs[key]

    async def generate(
        self,
        env: Any,
        n: int,
        client: Any,
        concurrency: int,
        model: str = MODEL,
        sampling_args: dict[str, Any] | None = None,
    ) -> Any:
        extra = {"sampling_args": sampling_args} if sampling_args else {}
        return await env.generate(
            generate_inputs(n),
            client,
            model,
            max_concurrent=concurrency,
            use_tqdm=False,
            **extra,
        )


def make_client(
    spec: dict[str, Any], model: ScriptedModel | None, framework: str
) -> openai.AsyncOpenAI:
    """The stand-in client for "scripted" runs, or a real openai client for "http" ones.

    vfgym gets the plain client a user writes, which its own transport serves
    (bounded by VFGYM_HTTP_CONNECTIONS_PER_HOST, 1024 by default); the reference
    gets the openai client's own httpx pool with room for every concurrent request.
    """
    if spec["kind"] == "scripted":
        assert model is not None
        return ScriptedClient(model)
    if spec["kind"] == "http" and framework == "vfgym":
        return openai.AsyncOpenAI(
            base_url=spec["base_url"], api_key="vfgym", max_retries=0, timeout=120.0
        )
    if spec["kind"] == "http":
        # The openai client's own httpx flavour, with room for every concurrent request.
        limit = int(spec.get("max_connections", 1024))
        limits = type(openai.DEFAULT_CONNECTION_LIMITS)(
            max_connections=limit, max_keepalive_connections=limit
        )
        return openai.AsyncOpenAI(
            base_url=spec["base_url"],
            api_key="vfgym",
            max_retries=0,
            timeout=120.0,
            http_client=openai.DefaultAsyncHttpxClient(limits=limits, timeout=120.0),
        )
    raise ValueError(f"unknown client kind {spec['kind']!r}; use 'scripted' or 'http'")


def check_outputs(outputs: Any, workload: str, n: int, rewarded: bool = True) -> dict[str, Any]:
    """What the run actually did, so a fast-but-wrong run cannot pass unnoticed.

    `rewarded` False (a real model, whose answers are noise) checks the rollouts and
    their model calls but not that every answer earned the reward.
    """
    states = outputs.state
    calls = sum(len(s.get("responses") or []) for s in states)
    errored = sum(1 for s in states if s.get("error"))
    rewards = list(outputs.reward)
    ok = (
        len(rewards) == n
        and errored == 0
        and calls == n * MODEL_CALLS[workload]
        and (not rewarded or all(r == 1.0 for r in rewards))
    )
    return {
        "rollouts_out": len(rewards),
        "model_calls_per_rollout": calls / max(1, n),
        "mean_reward": sum(rewards) / max(1, len(rewards)),
        "errored": errored,
        "ok": ok,
    }


def run_request(side: Side, loop: asyncio.AbstractEventLoop, req: dict[str, Any]) -> dict[str, Any]:
    """Time one `generate` call of `req["rollouts"]` rollouts at `req["concurrency"]`."""
    workload, flavour = req["workload"], req.get("flavour", "sync")
    n, concurrency = int(req["rollouts"]), int(req["concurrency"])
    env = side.env(workload, flavour)
    scripted = ScriptedModel() if req["client"]["kind"] == "scripted" else None
    client = make_client(req["client"], scripted, side.name)
    try:
        gc.collect()
        cpu0, t0 = time.process_time(), time.perf_counter()
        outputs = loop.run_until_complete(
            side.generate(
                env, n, client, concurrency, req.get("model", MODEL), req.get("sampling_args")
            )
        )
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    finally:
        loop.run_until_complete(client.close())
    result = {
        "framework": side.name,
        "version": side.version,
        "workload": workload,
        "flavour": flavour,
        "rollouts": n,
        "concurrency": concurrency,
        "wall_s": wall,
        "cpu_s": cpu,
        "rollouts_per_s": n / wall,
        **check_outputs(outputs, workload, n, rewarded=req.get("rewarded", True)),
    }
    del outputs
    return result


def serve(side: Side) -> None:
    """Answer requests from stdin until it closes; stdout carries only the answers."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout = sys.stderr  # anything a framework prints must not corrupt the protocol
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    out.write(json.dumps({"ready": True, "framework": side.name, "version": side.version}) + "\n")
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            req = json.loads(line)
            if req.get("op") == "quit":
                break
            try:
                if req.get("op") == "bare":
                    from bare_client import run_bare

                    answer = loop.run_until_complete(
                        run_bare(
                            req["base_url"], req["workload"], req["rollouts"], req["concurrency"]
                        )
                    )
                else:
                    answer = run_request(side, loop, req)
            except Exception as exc:
                answer = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
            out.write(json.dumps(answer) + "\n")
    finally:
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()


async def _stress(side: Side, args: argparse.Namespace) -> dict[str, Any]:
    env = side.env("multi10", args.flavour)
    model = ScriptedModel(latency=(args.latency_low, args.latency_high), fresh=True, seed=0)
    client = ScriptedClient(model)
    inputs_n = args.rollouts
    rss_before = peak_rss_mb()
    try:
        with watch_gc() as collector:
            async with watch_stalls(0.01) as stalls:
                t0 = time.perf_counter()
                cpu0 = time.process_time()
                outputs = await side.generate(env, inputs_n, client, -1)
                wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    finally:
        await client.close()
    return {
        "framework": side.name,
        "version": side.version,
        "workload": "multi10",
        "flavour": args.flavour,
        "rollouts": inputs_n,
        "concurrency": inputs_n,
        "latency_s": [args.latency_low, args.latency_high],
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_mb": peak_rss_mb(),
        "rss_before_run_mb": rss_before,
        "max_in_flight": model.max_in_flight,
        **stalls.as_dict(),
        **collector.as_dict(),
        **check_outputs(outputs, "multi10", inputs_n),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", required=True, choices=sorted(FRAMEWORKS))
    parser.add_argument("--stress", action="store_true", help="run the stress measurement once")
    parser.add_argument("--rollouts", type=int, default=10_000)
    parser.add_argument("--latency-low", type=float, default=2.0)
    parser.add_argument("--latency-high", type=float, default=6.0)
    parser.add_argument("--flavour", default="sync", choices=("sync", "async"))
    args = parser.parse_args()
    side = Side(args.framework)
    if not args.stress:
        serve(side)
        return
    result = asyncio.run(_stress(side, args))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
