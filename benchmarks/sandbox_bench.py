"""Sandbox speed: the pooled runner stream against raw `docker exec`, side by side.

    python benchmarks/sandbox_bench.py [--runtime runc|runsc] [--runs 500]
    python benchmarks/sandbox_bench.py --compare old=IMAGE[,SOURCE] new=IMAGE --rounds 10
    python benchmarks/sandbox_bench.py --filter-cost [--runtime runsc]

Measures, on the same image: warm `run_python("print(1)")` latency (p50/p99),
throughput with a pool of 4 on this machine, acquire time from a warm pool, cold
start (create, start, runner ready) and idle memory per sandbox; and the same
call made with `docker exec <container> python3 -c ...`. Needs a Docker Engine
and the image from `python -m vfgym.sandbox build`.

`--compare` measures two or more runner images against each other on a busy
machine: rounds of warm p50 and throughput, each in a fresh process, taking turns
(the order reversed every other round), then the medians and the median of the
per-round ratios to the first variant. SOURCE, when given, is a checkout of the
vfgym version that goes with IMAGE (put first on PYTHONPATH for its rounds), for
runner images the current host code would refuse.

`--filter-cost` times one cheap system call (getppid) in a container with vfgym's
JSON profile, in fresh processes taking turns: with no filter of their own, and
with the runner's seccomp filter installed, which is what the runner's filter adds
to every system call sandboxed code makes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable

from vfgym.sandbox import DockerSandbox, SandboxConfig, SandboxPool
from vfgym.sandbox.docker_client import make_client
from vfgym.sandbox.image import default_image

TARGETS = {
    "warm p50 (ms)": "< 5",
    "warm p99 (ms)": "< 20",
    "throughput, 4 sandboxes (runs/s)": ">= 300",
    "acquire p50 (ms)": "< 1",
    "cold start p50 (ms)": "< 500",
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


async def timed(call: Callable[[], Awaitable[object]], runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def runner_figures(config: SandboxConfig, runs: int, seconds: float) -> dict[str, float]:
    figures: dict[str, float] = {}
    async with SandboxPool(config, size=4) as pool:
        async with pool.acquire() as sandbox:
            await timed(lambda: sandbox.run_python("print(1)"), 20)  # warm up
            latency = await timed(lambda: sandbox.run_python("print(1)"), runs)
        figures["warm p50 (ms)"] = statistics.median(latency)
        figures["warm p99 (ms)"] = percentile(latency, 99)

        count = 0
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal count
            async with pool.acquire() as sandbox:
                while time.perf_counter() < deadline:
                    result = await sandbox.run_python("print(1)")
                    assert result.stdout == "1\n", result.summary()
                    count += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(4)))
        figures["throughput, 4 sandboxes (runs/s)"] = count / (time.perf_counter() - started)

        acquire = []
        for _ in range(200):
            started = time.perf_counter()
            async with pool.acquire():
                acquire.append((time.perf_counter() - started) * 1000)
        figures["acquire p50 (ms)"] = statistics.median(acquire)

        client = make_client(config.docker_host)
        memory = []
        for sandbox in list(pool._idle):  # the pool's own warm sandboxes, idle
            stats = client.api.stats(sandbox.container_id, stream=False)
            usage = stats.get("memory_stats", {})
            cache = usage.get("stats", {}).get("cache", 0) or usage.get("stats", {}).get("file", 0)
            memory.append((usage.get("usage", 0) - cache) / 1024**2)
        client.close()
        if memory:
            figures["idle memory per sandbox (MiB)"] = statistics.mean(memory)

    cold = []
    client = make_client(config.docker_host)
    try:
        for _ in range(10):
            sandbox = DockerSandbox(config, client=client)
            started = time.perf_counter()
            await sandbox.start()
            cold.append((time.perf_counter() - started) * 1000)
            await sandbox.close()
    finally:
        client.close()
    figures["cold start p50 (ms)"] = statistics.median(cold)
    return figures


def exec_figures(config: SandboxConfig, runs: int, seconds: float) -> dict[str, float]:
    """The same call through `docker exec` on a container of the same image."""
    image = config.image or default_image()
    args = ["docker", "run", "-d", "--rm", "--network", "none", "--runtime", config.runtime]
    args += ["--label", "vfgym.bench=1", "--entrypoint", "sleep", image, "infinity"]
    container = subprocess.run(args, check=True, capture_output=True, text=True).stdout.strip()
    command = ["docker", "exec", container, "python3", "-c", "print(1)"]
    figures: dict[str, float] = {}
    try:
        for _ in range(3):
            subprocess.run(command, check=True, capture_output=True)
        latency = []
        for _ in range(runs):
            started = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True)
            latency.append((time.perf_counter() - started) * 1000)
        figures["warm p50 (ms)"] = statistics.median(latency)
        figures["warm p99 (ms)"] = percentile(latency, 99)

        deadline = time.perf_counter() + seconds
        started = time.perf_counter()
        count = 0
        while time.perf_counter() < deadline:
            batch = [subprocess.Popen(command, stdout=subprocess.DEVNULL) for _ in range(4)]
            for proc in batch:
                proc.wait()
            count += len(batch)
        figures["throughput, 4 sandboxes (runs/s)"] = count / (time.perf_counter() - started)
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True, check=False)
    return figures


async def round_figures(config: SandboxConfig, runs: int, seconds: float) -> dict[str, float]:
    """One round of a comparison: warm p50 and pooled throughput only."""
    async with SandboxPool(config, size=4) as pool:
        async with pool.acquire() as sandbox:
            await timed(lambda: sandbox.run_python("print(1)"), 20)  # warm up
            latency = await timed(lambda: sandbox.run_python("print(1)"), runs)
        count = 0
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal count
            async with pool.acquire() as sandbox:
                while time.perf_counter() < deadline:
                    result = await sandbox.run_python("print(1)")
                    assert result.stdout == "1\n", result.summary()
                    count += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(4)))
        throughput = count / (time.perf_counter() - started)
    return {"p50": statistics.median(latency), "throughput": throughput}


def compare(variants: list[str], runtime: str, rounds: int, runs: int, seconds: float) -> int:
    """Alternate rounds of each variant (NAME=IMAGE[,SOURCE]); print medians and ratios."""
    parsed = {}
    for variant in variants:
        name, _, rest = variant.partition("=")
        image, _, source = rest.partition(",")
        if not name or not image:
            raise SystemExit(f"--compare takes NAME=IMAGE[,SOURCE], not {variant!r}")
        parsed[name] = (image, source)
    names = list(parsed)
    figures: dict[str, dict[int, dict[str, float]]] = {name: {} for name in names}
    for index in range(rounds):
        for name in names if index % 2 == 0 else names[::-1]:
            image, source = parsed[name]
            env = dict(os.environ)
            if source:
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
            command = [sys.executable, __file__, "--round", "--image", image]
            command += ["--runtime", runtime, "--runs", str(runs), "--seconds", str(seconds)]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(f"round {index} {name}: failed\n{done.stderr[-2000:]}", flush=True)
                continue
            result = json.loads(done.stdout.strip().splitlines()[-1])
            figures[name][index] = result
            print(
                f"round {index} {name}: p50 {result['p50']:.2f} ms, "
                f"{result['throughput']:.0f} runs/s",
                flush=True,
            )
    base = names[0]
    print(f"\n{'variant':<12}{'p50 (ms)':>10}{'runs/s':>10}{'p50 ratio':>11}{'runs/s ratio':>14}")
    for name in names:
        rows = list(figures[name].values())
        if not rows:
            continue
        both = [i for i in figures[name] if i in figures[base]]  # rounds both completed
        pairs = [(figures[base][i], figures[name][i]) for i in both]
        p50_ratio = statistics.median(b["p50"] / a["p50"] for a, b in pairs) if pairs else 0
        rate_ratio = (
            statistics.median(b["throughput"] / a["throughput"] for a, b in pairs) if pairs else 0
        )
        print(
            f"{name:<12}{statistics.median(r['p50'] for r in rows):>10.2f}"
            f"{statistics.median(r['throughput'] for r in rows):>10.0f}"
            f"{p50_ratio:>11.3f}{rate_ratio:>14.3f}"
        )
    return 0


#: Runs inside the image: alternating children time getppid without and with the
#: runner's filter (`vfgym_runner.seccomp_filter`, as the image ships it).
FILTER_COST_PROBE = r"""
import json, os, statistics, struct, sys, time
sys.path.insert(0, "/opt/vfgym")
from vfgym_runner import seccomp_filter
calls, rounds = int(sys.argv[1]), int(sys.argv[2])

def child_time(with_filter):
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        if with_filter:
            seccomp_filter.install(refuse_mq_open=True)
        started = time.perf_counter()
        for _ in range(calls):
            os.getppid()
        elapsed = (time.perf_counter() - started) / calls * 1e9
        os.write(write_end, struct.pack("d", elapsed))
        os._exit(0)
    os.waitpid(pid, 0)
    return struct.unpack("d", os.read(read_end, 8))[0]

times = {"no filter": [], "runner filter": []}
for index in range(rounds):
    for name in (list(times) if index % 2 == 0 else list(times)[::-1]):
        times[name].append(child_time(name == "runner filter"))
print(json.dumps(times))
"""


def filter_cost(config: SandboxConfig, calls: int, rounds: int) -> int:
    """Time getppid without and with the runner's filter, in the sandbox image."""
    from vfgym.sandbox.seccomp import load_profile

    image = config.image or default_image()
    with tempfile.NamedTemporaryFile("w", suffix=".json") as profile:
        json.dump(load_profile(), profile)
        profile.flush()
        command = ["docker", "run", "--rm", "--network", "none", "--runtime", config.runtime]
        command += ["--security-opt", "no-new-privileges"]
        command += ["--security-opt", f"seccomp={profile.name}", "--label", "vfgym.bench=1"]
        command += ["--entrypoint", "python3", image, "-c", FILTER_COST_PROBE]
        command += [str(calls), str(rounds)]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
    times = json.loads(done.stdout)
    print(f"getppid under {config.runtime}, {rounds} alternating rounds of {calls} calls:")
    for name, values in times.items():
        print(
            f"  {name:<14} median {statistics.median(values):8.0f} ns"
            f"  (spread {min(values):.0f}-{max(values):.0f})"
        )
    ratios = [b / a for a, b in zip(times["no filter"], times["runner filter"], strict=True)]
    ratio = statistics.median(ratios)
    print(f"  runner filter / no filter, median of per-round ratios: {ratio:.3f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", default="runc")
    parser.add_argument("--runs", type=int, default=500, help="sequential calls for latency")
    parser.add_argument("--exec-runs", type=int, default=50, help="sequential docker execs")
    parser.add_argument("--seconds", type=float, default=5.0, help="throughput window")
    parser.add_argument("--image", default=None, help="the image to measure (default: built)")
    parser.add_argument(
        "--compare", nargs="+", metavar="NAME=IMAGE[,SOURCE]", help="variants to alternate"
    )
    parser.add_argument("--rounds", type=int, default=10, help="rounds of --compare")
    parser.add_argument("--filter-cost", action="store_true", help="what the filter adds")
    parser.add_argument("--round", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.compare:
        return compare(args.compare, args.runtime, args.rounds, args.runs, args.seconds)
    config = SandboxConfig(runtime=args.runtime, image=args.image)
    if args.filter_cost:
        return filter_cost(config, calls=5000, rounds=args.rounds)
    if args.round:
        print(json.dumps(asyncio.run(round_figures(config, args.runs, args.seconds))))
        return 0

    print(f"image {config.image or default_image()}, runtime {args.runtime}", flush=True)
    ours = asyncio.run(runner_figures(config, args.runs, args.seconds))
    theirs = exec_figures(config, args.exec_runs, args.seconds)

    rows = list(ours)
    print(f"\n{'metric':<36}{'vfgym runner':>14}{'docker exec':>14}{'speed-up':>10}  target")
    for name in rows:
        mine = ours[name]
        other = theirs.get(name)
        if other is None:
            ratio = ""
        elif "runs/s" in name:
            ratio = f"{mine / other:.0f}x"
        else:
            ratio = f"{other / mine:.0f}x"
        other_text = f"{other:.1f}" if other is not None else "-"
        print(f"{name:<36}{mine:>14.2f}{other_text:>14}{ratio:>10}  {TARGETS.get(name, '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
