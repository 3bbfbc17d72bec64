"""`vfgym serve-model`: an environment's policy as an OpenAI-compatible model server.

A trainer or an evaluation pipeline has to survive a flaky model server: 429s,
5xx, dropped connections, bodies that are not JSON, slow answers. Rehearsing that
against a real server means waiting for it to misbehave; this command serves an
environment's reference (or random) policy over real HTTP and, with `--faults`,
fails a chosen share of requests reproducibly, so the pipeline's handling of each
failure can be watched, and replayed with the same seed.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from vfgym.cli._support import (
    EXIT_USAGE,
    CommandError,
    build_environment,
    check_docker,
    describe_environment,
)

POLICIES = ("reference", "random")
DEFAULT_PORT = 8000


@dataclass
class ServeOptions:
    """What `vfgym serve-model` was asked to do, as parsed from the command line."""

    env_id: str
    policy: str = "reference"
    env_args: dict[str, Any] | None = None
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    faults: str | None = None
    fault_rate: float = 0.1
    fault_seed: int = 0
    seed: int = 0


def make_policy(env: Any, env_id: str, policy: str, seed: int) -> Any:
    """The environment's `policy` ("reference" or "random") as a server policy."""
    if policy == "reference":
        reference = getattr(env, "reference_policy", None)
        if callable(reference):
            return reference
        raise CommandError(
            f"{env_id} has no reference policy to serve; try --policy random, or another "
            "environment (`vfgym list`)",
            EXIT_USAGE,
        )
    if policy == "random":
        make_random = getattr(env, "make_random_policy", None)
        if callable(make_random):
            return make_random(seed)
        raise CommandError(
            f"{env_id} has no random policy to serve; use --policy reference", EXIT_USAGE
        )
    raise CommandError(f"--policy must be one of {', '.join(POLICIES)}, not {policy!r}", EXIT_USAGE)


def make_fault_mix(options: ServeOptions) -> Any:
    """The `FaultMix` the options ask for, or None; CommandError naming the bad flag."""
    from vfgym.inference.server.faults import FAULT_KINDS, parse_fault_mix

    if not options.faults:
        return None
    try:
        return parse_fault_mix(options.faults, options.fault_rate, options.fault_seed)
    except ValueError as exc:
        raise CommandError(
            f"--faults {options.faults!r} / --fault-rate {options.fault_rate}: {exc}. Kinds: "
            f"{', '.join(FAULT_KINDS)}, e.g. --faults 429,500,drop,slow=0.5 --fault-rate 0.2",
            EXIT_USAGE,
        ) from None


def serve_model(options: ServeOptions, out: IO[str], err: IO[str]) -> int:
    """Serve until Ctrl-C or SIGTERM; then say what faults were injected and return 0."""
    from vfgym.inference.server import ModelServer

    info = describe_environment(options.env_id)
    if info is not None and info.needs_sandbox:
        check_docker(options.env_id)
    env = build_environment(options.env_id, options.env_args or {})
    policy = make_policy(env, options.env_id, options.policy, options.seed)
    mix = make_fault_mix(options)
    try:
        server = ModelServer(
            policy,
            host=options.host,
            port=options.port,
            model_name=options.policy,
            record_requests=False,
            faults=mix,
        )
    except ValueError as exc:
        raise CommandError(f"{exc}; give --port a number from 0 to 65535", EXIT_USAGE) from None
    with asyncio.Runner() as runner:
        try:
            runner.run(_serve(server, options, mix, out))
        except OSError as exc:
            raise CommandError(
                f"cannot serve on {options.host}:{options.port}: {exc.strerror or exc}; "
                "choose another --port (--port 0 picks a free one) or --host",
                EXIT_USAGE,
            ) from None
        except KeyboardInterrupt:
            pass
    injected = mix.injected if mix is not None else {}
    done = ", ".join(f"{n} x {kind}" for kind, n in sorted(injected.items())) or "none"
    print(f"stopped; faults injected: {done}", file=err, flush=True)
    return 0


async def _serve(server: Any, options: ServeOptions, mix: Any, out: IO[str]) -> None:
    """Start the server, announce its address, and wait for SIGTERM (or Ctrl-C)."""
    stop = asyncio.Event()
    async with server:
        with _sigterm_sets(stop):
            faults = f" with faults {mix!r}" if mix is not None else ""
            print(
                f"serving {options.env_id}'s {options.policy} policy at {server.base_url} "
                f"(any model name; API key: any){faults}. Stop with Ctrl-C.",
                file=out,
                flush=True,
            )
            await stop.wait()


@contextlib.contextmanager
def _sigterm_sets(stop: asyncio.Event) -> Iterator[None]:
    """While the server runs, SIGTERM stops it as Ctrl-C does (installed from the main
    thread only, and removed afterwards)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    except (NotImplementedError, RuntimeError):  # no signal support on this loop
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


__all__ = [
    "DEFAULT_PORT",
    "POLICIES",
    "ServeOptions",
    "make_fault_mix",
    "make_policy",
    "serve_model",
]
