"""`vfgym serve-env`: an environment served over OpenEnv's WebSocket protocol.

A trainer in another process, container or machine drives the environment through
OpenEnv's clients (TRL, verifiers' OpenEnv taskset, SkyRL) or `vfgym.remote.RemoteEnv`;
the sandboxed tool tasks can run on the machine with Docker while the GPUs sit
elsewhere. The server is `vfgym.remote.EnvServer`; this module turns the command
line into one, runs it until Ctrl-C or SIGTERM, and then drains it.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import IO, Any

from vfgym.cli._support import (
    EXIT_USAGE,
    CommandError,
    build_environment,
    check_docker,
    describe_environment,
)
from vfgym.cli.serve_model import _sigterm_sets

DEFAULT_PORT = 8765

#: Where the token is read from when --token is not given.
TOKEN_VARIABLE = "VFGYM_ENV_TOKEN"


@dataclass
class ServeEnvOptions:
    """What `vfgym serve-env` was asked to do, as parsed from the command line."""

    env_id: str
    env_args: dict[str, Any] | None = None
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    max_sessions: int = 8
    idle_timeout: float = 300.0
    token: str | None = None
    no_token: bool = False
    max_frame_bytes: int = 1 << 20
    drain_timeout: float = 30.0


def serve_env(
    options: ServeEnvOptions, out: IO[str], err: IO[str], environ: dict[str, str] | None = None
) -> int:
    """Serve until Ctrl-C or SIGTERM, drain, say how the sessions ended; returns 0."""
    from vfgym.remote.server import EnvServer

    environ = dict(os.environ) if environ is None else environ
    token = options.token or environ.get(TOKEN_VARIABLE) or None
    if token is not None and options.no_token:
        raise CommandError(
            "--no-token was given, but so was a token (--token or VFGYM_ENV_TOKEN): choose one",
            EXIT_USAGE,
        )
    if token is None and not options.no_token:
        raise CommandError(
            "a bearer token is required: pass --token TOKEN or set VFGYM_ENV_TOKEN (clients "
            "send it as 'Authorization: Bearer TOKEN'), or --no-token to serve without one on "
            "loopback only",
            EXIT_USAGE,
        )
    info = describe_environment(options.env_id)
    if info is not None and info.needs_sandbox:
        check_docker(options.env_id)
    env = build_environment(options.env_id, options.env_args or {})
    try:
        server = EnvServer(
            env,
            host=options.host,
            port=options.port,
            token=token,
            allow_no_token=options.no_token,
            max_sessions=options.max_sessions,
            idle_timeout=options.idle_timeout,
            max_frame_bytes=options.max_frame_bytes,
            drain_timeout=options.drain_timeout,
            env_id=options.env_id,
        )
    except (TypeError, ValueError) as exc:
        raise CommandError(f"cannot serve {options.env_id}: {exc}", EXIT_USAGE) from None
    with asyncio.Runner() as runner:
        try:
            runner.run(_serve(server, out, err))
        except OSError as exc:
            raise CommandError(
                f"cannot serve on {options.host}:{options.port}: {exc.strerror or exc}; "
                "choose another --port (--port 0 picks a free one) or --host",
                EXIT_USAGE,
            ) from None
        except KeyboardInterrupt:
            runner.run(server.stop())
    ended = ", ".join(f"{n} {why}" for why, n in sorted(server.ended.items())) or "none"
    print(f"stopped; sessions ended: {ended}", file=err, flush=True)
    return 0


async def _serve(server: Any, out: IO[str], err: IO[str]) -> None:
    """Start the server, announce it, wait for SIGTERM (or Ctrl-C), then drain.

    The SIGTERM handler stays in place through the drain, so a second SIGTERM (a
    scheduler repeating itself) does not cut the drain short; the drain is bounded by
    --drain-timeout anyway."""
    stop = asyncio.Event()
    await server.start()
    try:
        with _sigterm_sets(stop):
            auth = "bearer token required" if server.token else "no token (loopback only)"
            print(
                f"serving {server.env_id} at {server.base_url} (OpenEnv sessions at "
                f"{server.ws_url}; {auth}; at most {server.max_sessions} sessions). Stop with "
                "Ctrl-C or SIGTERM.",
                file=out,
                flush=True,
            )
            await stop.wait()
            print(
                f"draining {len(server.sessions)} session(s) (up to {server.drain_timeout:g} s)",
                file=err,
                flush=True,
            )
            await server.stop()
    finally:
        await server.stop()


__all__ = ["DEFAULT_PORT", "TOKEN_VARIABLE", "ServeEnvOptions", "serve_env"]
