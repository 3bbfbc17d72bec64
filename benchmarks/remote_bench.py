"""What the wire costs: steps/s of `RemoteEnv` over loopback against the same env in-process.

Usage: python benchmarks/remote_bench.py [--seconds 3] [--sessions 64] [--idle-sessions 200]

Measured, for 1 and for `--sessions` concurrent sessions of guess-the-number (every
step the same guess, an episode reset when it ends, in every column alike):

- in-process: `gym.make("vfgym/GuessTheNumber-v0")` stepped in this process (several
  envs are stepped one after another: they have nothing to wait on);
- RemoteEnv: the same env served by `EnvServer` in a `vfgym serve-env` process; one
  session with the sync `step`, many with `astep` gathered on one event loop;
- echo floor: a bare aiohttp WebSocket echo server in another process, sent frames
  the size of a step's, so the wire's own round trip is beside the env's;

and the server's memory per idle session: its resident set before and after
`--idle-sessions` sessions connect and reset, divided by their number.

Each figure is the best of several rounds (a shared machine disturbs some rounds;
the best is the least disturbed). Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import gymnasium as gym

import vfgym.gym  # noqa: F401  (registers the vfgym/... ids)
from vfgym.remote import RemoteEnv

ACTION = "<move>50</move>"
ROUNDS = 5

ECHO_SERVER = """
import sys
from aiohttp import web, WSMsgType

async def echo(request):
    ws = web.WebSocketResponse(max_msg_size=0)
    await ws.prepare(request)
    async for message in ws:
        if message.type is WSMsgType.TEXT:
            await ws.send_str(message.data)
    return ws

app = web.Application()
app.router.add_get("/ws", echo)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=lambda *a: print("up", flush=True))
"""


def best_rate(run_round: Callable[[float], int], seconds: float) -> float:
    """Steps per second: the best of ROUNDS rounds sharing `seconds`."""
    run_round(min(0.2, seconds / ROUNDS))  # warm up
    best = 0.0
    for _ in range(ROUNDS):
        start = time.perf_counter()
        steps = run_round(seconds / ROUNDS)
        best = max(best, steps / (time.perf_counter() - start))
    return best


def in_process(count: int, seconds: float) -> float:
    envs = [gym.make("vfgym/GuessTheNumber-v0") for _ in range(count)]
    for i, env in enumerate(envs):
        env.reset(seed=i)

    def run_round(span: float) -> int:
        steps, deadline = 0, time.perf_counter() + span
        while time.perf_counter() < deadline:
            for env in envs:
                _, _, terminated, truncated, _ = env.step(ACTION)
                if terminated or truncated:
                    env.reset()
                steps += 1
        return steps

    try:
        return best_rate(run_round, seconds)
    finally:
        for env in envs:
            env.close()


def remote_one(url: str, seconds: float) -> float:
    env = RemoteEnv(url)
    env.reset(seed=0)

    def run_round(span: float) -> int:
        steps, deadline = 0, time.perf_counter() + span
        while time.perf_counter() < deadline:
            _, _, terminated, truncated, _ = env.step(ACTION)
            if terminated or truncated:
                env.reset()
            steps += 1
        return steps

    try:
        return best_rate(run_round, seconds)
    finally:
        env.close()


async def remote_many(url: str, count: int, seconds: float) -> float:
    envs = [RemoteEnv(url) for _ in range(count)]
    await asyncio.gather(*(env.areset(seed=i) for i, env in enumerate(envs)))

    async def play(env: RemoteEnv, deadline: float) -> int:
        steps = 0
        while time.perf_counter() < deadline:
            _, _, terminated, truncated, _ = await env.astep(ACTION)
            if terminated or truncated:
                await env.areset()
            steps += 1
        return steps

    try:
        return await best_rate_async(
            lambda span: _gathered(play, envs, time.perf_counter() + span), seconds
        )
    finally:
        await asyncio.gather(*(env.aclose() for env in envs))


async def echo_floor(url: str, count: int, seconds: float) -> float:
    frame = json.dumps({"type": "step", "data": {"content": ACTION}})
    reply = json.dumps(
        {
            "type": "observation",
            "data": {
                "observation": {"text": "50 is too high. Guess again."},
                "reward": 0.0,
                "done": False,
                "metadata": {"terminated": False, "truncated": False, "turn": 3},
            },
        }
    )
    payload = frame if len(frame) > len(reply) else reply
    async with aiohttp.ClientSession() as http:
        sockets = [await http.ws_connect(url) for _ in range(count)]

        async def play(socket: Any, deadline: float) -> int:
            steps = 0
            while time.perf_counter() < deadline:
                await socket.send_str(payload)
                await socket.receive()
                steps += 1
            return steps

        try:
            return await best_rate_async(
                lambda span: _gathered(play, sockets, time.perf_counter() + span), seconds
            )
        finally:
            for socket in sockets:
                await socket.close()


async def _gathered(
    play: Callable[[Any, float], Awaitable[int]], items: list[Any], deadline: float
) -> int:
    return sum(await asyncio.gather(*(play(item, deadline) for item in items)))


async def best_rate_async(run_round: Callable[[float], Awaitable[int]], seconds: float) -> float:
    await run_round(min(0.2, seconds / ROUNDS))
    best = 0.0
    for _ in range(ROUNDS):
        start = time.perf_counter()
        steps = await run_round(seconds / ROUNDS)
        best = max(best, steps / (time.perf_counter() - start))
    return best


def resident_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        found = re.search(r"VmRSS:\s+(\d+) kB", status.read())
    assert found is not None
    return int(found.group(1))


async def idle_session_kib(url: str, pid: int, count: int) -> float:
    """The server's resident memory per idle session (connected, reset, silent)."""
    await asyncio.sleep(0.5)
    before = resident_kib(pid)
    envs = [RemoteEnv(url) for _ in range(count)]
    try:
        for start in range(0, count, 50):
            await asyncio.gather(*(env.areset(seed=0) for env in envs[start : start + 50]))
        await asyncio.sleep(0.5)
        after = resident_kib(pid)
    finally:
        await asyncio.gather(*(env.aclose() for env in envs))
    return (after - before) / count


def start(command: list[str], pattern: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    found = re.search(pattern, line)
    if found is None:
        process.kill()
        raise SystemExit(f"the server did not start: {line!r}")
    return process, found.group(1) if found.groups() else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per figure (default: 3)")
    parser.add_argument("--sessions", type=int, default=64, help="concurrent sessions")
    parser.add_argument("--idle-sessions", type=int, default=200, help="for the memory figure")
    args = parser.parse_args()
    many = args.sessions
    server, url = start(
        [
            sys.executable,
            "-m",
            "vfgym.cli.main",
            "serve-env",
            "guess-the-number",
            "--no-token",
            "--port",
            "0",
            "--max-sessions",
            str(max(many, args.idle_sessions) + 1),
        ],
        r"at (http://127\.0\.0\.1:\d+) ",
    )
    echo_port = _free_port()
    echo, _ = start([sys.executable, "-c", ECHO_SERVER, str(echo_port)], r"up")
    echo_url = f"ws://127.0.0.1:{echo_port}/ws"
    os.environ.pop("VFGYM_ENV_TOKEN", None)
    try:
        figures = {
            "in_process_1": in_process(1, args.seconds),
            f"in_process_{many}": in_process(many, args.seconds),
            "remote_1": remote_one(url, args.seconds),
            f"remote_{many}": asyncio.run(remote_many(url, many, args.seconds)),
            "echo_1": asyncio.run(echo_floor(echo_url, 1, args.seconds)),
            f"echo_{many}": asyncio.run(echo_floor(echo_url, many, args.seconds)),
            "idle_session_kib": asyncio.run(idle_session_kib(url, server.pid, args.idle_sessions)),
        }
    finally:
        for process in (server, echo):
            process.send_signal(signal.SIGTERM)
            process.wait(60)
    print(f"{'sessions':>10} {'in-process':>12} {'RemoteEnv':>12} {'WS echo':>12}   (steps/s)")
    for n in (1, many):
        print(
            f"{n:>10} {figures[f'in_process_{n}']:>12,.0f} {figures[f'remote_{n}']:>12,.0f} "
            f"{figures[f'echo_{n}']:>12,.0f}"
        )
    print(f"server memory per idle session: {figures['idle_session_kib']:.0f} KiB")
    print(json.dumps({key: round(value, 1) for key, value in figures.items()}))


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


if __name__ == "__main__":
    main()
