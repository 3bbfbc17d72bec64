"""The `vfgym` command: list, eval, play, view, serve-model, serve-env, check, init and sandbox.

Every failure a user can cause ends with one clear sentence on stderr and a
non-zero exit code, never a traceback (`-v` shows one for unexpected errors).
Ctrl-C is handled here, in `main`, and nowhere at import time: no signal
handler is installed, a KeyboardInterrupt is caught. (`vfgym eval` alone sets a
SIGTERM handler, from its start-up to the end of its rollouts, and puts the previous
one back: see `cli_support.SigtermCancels`.) So that a Ctrl-C while
the command starts up lands in `main` too, this module imports only what the
parser needs, and each subcommand imports its own modules once it runs.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path
from typing import IO

from vfgym.cli._support import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    CommandError,
    parse_json_object,
)
from vfgym.errors import VFGymError

_EPILOG = """examples:
  vfgym list
  vfgym eval guess-the-number -n 3            # reference policy, no model needed
  vfgym eval wordle -b http://localhost:8000/v1 -m Qwen/Qwen3-8B -n 50 -r 4
  vfgym play tictactoe
  vfgym view outputs/wordle/reference-20250101-120000
  vfgym serve-model wordle --faults 429,500,drop --fault-rate 0.2
  vfgym serve-env wordle --token s3cret --port 8765
  vfgym sandbox doctor
  vfgym init word-ladder --kind game           # a new environment package
  vfgym check word-ladder                      # the quality gate (also module:function, file.py)
"""


#: What an ENV argument may be (see `vfgym.envs.registry.load_environment`).
_ENV_HELP = (
    "a registered name such as wordle (see `vfgym list`), module:function, or a path to "
    "a .py file with a load_environment"
)


def _add_eval(commands: argparse._SubParsersAction) -> None:
    from vfgym.cli.eval import DEFAULT_API_KEY_VAR

    p = commands.add_parser(
        "eval",
        help="evaluate a model on an environment",
        description="Evaluate a model on an environment. With no model server configured (no "
        "-b/--base-url or OPENAI_BASE_URL, and no API key or -m reference/random), the "
        "environment's reference policy plays through vfgym's built-in OpenAI-compatible "
        "server on loopback (model `reference`; `-m random` plays random moves).",
    )
    p.add_argument("env", help=_ENV_HELP)
    p.add_argument("-m", "--model", help="model name (default: `reference` on the built-in server)")
    p.add_argument("-b", "--base-url", help="OpenAI-compatible base URL, e.g. http://HOST:8000/v1")
    p.add_argument(
        "-k",
        "--api-key-var",
        default=DEFAULT_API_KEY_VAR,
        help=f"environment variable holding the API key (default: {DEFAULT_API_KEY_VAR})",
    )
    p.add_argument(
        "-n", "--num-examples", type=int, default=5, help="examples (default: 5; -1: all)"
    )
    p.add_argument(
        "-r", "--rollouts-per-example", type=int, default=3, help="rollouts each (default: 3)"
    )
    p.add_argument(
        "-c",
        "--max-concurrent",
        type=int,
        default=32,
        help="rollouts at once (default: 32; -1: no limit)",
    )
    p.add_argument("-S", "--sampling-args", metavar="JSON", help="""e.g. '{"temperature": 0.7}'""")
    p.add_argument("-a", "--env-args", metavar="JSON", help="""e.g. '{"difficulty": "hard"}'""")
    p.add_argument(
        "-o", "--output-dir", help="results directory (default: outputs/ENV/MODEL-TIMESTAMP)"
    )
    p.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=False,
        metavar="DIR",
        help="continue an interrupted run in DIR (or in -o DIR) without redoing finished rollouts",
    )
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar (default: when stderr is a terminal)",
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log every rollout failure, and show the traceback of an unexpected error",
    )
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="spread the rollouts over a Ray cluster: auto (the running one), local (start "
        "one here) or HOST:PORT; needs pip install 'vfgym[ray]'",
    )


def _add_serve_model(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "serve-model",
        help="serve an environment's policy as an OpenAI-compatible model server",
        description="Serve an environment's reference or random policy as an "
        "OpenAI-compatible model server (any model name, any API key), optionally failing "
        "a share of the requests, to rehearse a trainer or evaluation pipeline against a "
        "flaky server. Stops on Ctrl-C or SIGTERM.",
    )
    p.add_argument("env", help="environment id, e.g. wordle (see `vfgym list`)")
    p.add_argument(
        "--policy",
        choices=("reference", "random"),
        default="reference",
        help="which policy answers (default: reference)",
    )
    p.add_argument("-a", "--env-args", metavar="JSON", help="environment arguments (JSON)")
    p.add_argument("--host", default="127.0.0.1", help="address (default: 127.0.0.1)")
    p.add_argument(
        "--port", type=int, default=8000, help="port (default: 8000; 0 picks a free one)"
    )
    p.add_argument(
        "--faults",
        metavar="KINDS",
        help="fault kinds to inject, comma-separated: 500, 503, 429[=RETRY_AFTER], "
        "slow[=SECONDS], drop, malformed, context",
    )
    p.add_argument(
        "--fault-rate",
        type=float,
        default=0.1,
        help="share of requests that get a fault, 0 to 1 (default: 0.1)",
    )
    p.add_argument("--fault-seed", type=int, default=0, help="seed of the fault draws (default: 0)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random policy (default: 0)")
    _add_verbose(p)


def _add_serve_env(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "serve-env",
        help="serve an environment over OpenEnv's WebSocket protocol",
        description="Serve an environment to remote trainers over OpenEnv's WebSocket "
        "protocol (OpenEnv's clients, or vfgym.remote.RemoteEnv). Stops on Ctrl-C or "
        "SIGTERM, after draining the running sessions.",
    )
    p.add_argument("env", help=_ENV_HELP)
    p.add_argument("-a", "--env-args", metavar="JSON", help="environment arguments (JSON)")
    p.add_argument("--host", default="127.0.0.1", help="address (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (default: 8765; 0: a free one)")
    p.add_argument("--max-sessions", type=int, default=8, help="sessions at once (default: 8)")
    p.add_argument(
        "--idle-timeout", type=float, default=300.0, help="seconds before a silent session ends"
    )
    p.add_argument("--token", help="bearer token clients must send (default: $VFGYM_ENV_TOKEN)")
    p.add_argument("--no-token", action="store_true", help="serve without a token (loopback only)")
    p.add_argument(
        "--max-frame-bytes", type=int, default=1 << 20, help="largest client frame (default: 1 MiB)"
    )
    p.add_argument(
        "--drain-timeout", type=float, default=30.0, help="seconds sessions get to end on SIGTERM"
    )


def _add_check(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "check",
        help="check that an environment keeps the kit's promises (the quality gate)",
        description="Check an environment: Gymnasium's check_env, the same seed gives the "
        "same episode, the reference policy solves every example checked, the random policy "
        "runs without errors, rewards are finite and in the declared range, and no sandbox "
        "container is left behind. Exits 1 when a check fails.",
    )
    p.add_argument("env", help=_ENV_HELP)
    p.add_argument("-a", "--env-args", metavar="JSON", help="environment arguments (JSON)")
    p.add_argument(
        "-n", "--num-examples", type=int, default=3, help="examples to play (default: 3)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the episodes (default: 0)")
    _add_verbose(p)


def _add_init(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "init",
        help="create a new environment package, ready to install and check",
        description="Create NAME/ (or --dir): a package with the environment module (a "
        "working example with a reference policy, to change into yours), a pyproject "
        "registering it, a test that runs `vfgym check` on it, and a README. Then: "
        "pip install -e NAME && pytest NAME.",
    )
    p.add_argument("name", help="the environment's name, e.g. word-ladder")
    p.add_argument(
        "--kind",
        choices=("game", "tool", "sandboxed"),
        default="game",
        help="a text game, a tool task, or a tool task running Python in a Docker sandbox "
        "(default: game)",
    )
    p.add_argument("--dir", help="where to create it (default: ./NAME)")
    _add_verbose(p)


def _add_verbose(parser: argparse.ArgumentParser) -> None:
    """Every subcommand takes -v, since an unexpected error tells the user to add it."""
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="show the traceback of an unexpected error"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vfgym",
        description="Multi-turn text games and tool environments for LLM RL and evaluation.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_verbose(commands.add_parser("list", help="list every registered environment"))
    _add_eval(commands)

    play = commands.add_parser("play", help="play an environment yourself in the terminal")
    play.add_argument("env", help=_ENV_HELP)
    play.add_argument("-a", "--env-args", metavar="JSON", help="environment arguments (JSON)")
    play.add_argument("-i", "--example", type=int, default=0, help="evaluation example index")
    _add_verbose(play)

    view = commands.add_parser("view", help="write an HTML report of an evaluation")
    view.add_argument("results", help="a results directory written by `vfgym eval`")
    view.add_argument("-o", "--output", help="report path (default: RESULTS/report.html)")
    view.add_argument(
        "--max-rollouts", type=int, default=1000, help="conversations shown (default: 1000)"
    )
    _add_verbose(view)

    _add_serve_model(commands)
    _add_serve_env(commands)
    _add_check(commands)
    _add_init(commands)

    commands.add_parser(
        "sandbox",
        help="build, check or clean up Docker sandboxes (build | doctor | gc)",
        add_help=False,
    )
    return parser


def _cmd_list(out: IO[str]) -> int:
    from vfgym.envs.registry import describe, registered_names

    rows = [("NAME", "KIND", "SANDBOX", "DESCRIPTION")]
    broken = 0
    for name in registered_names():
        try:
            info = describe(name)
        except Exception as exc:  # one broken package must not hide the others
            broken += 1
            message = " ".join(f"{type(exc).__name__}: {exc}".split())
            rows.append((name, "?", "?", f"failed to import: {message[:160]}"))
            continue
        rows.append((name, info.kind, "yes" if info.needs_sandbox else "no", info.summary))
    if len(rows) == 1:
        print("No environments are registered; is vfgym installed?", file=out)
        return EXIT_FAILED
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        cells = [c.ljust(w) for c, w in zip(row[:3], widths, strict=True)] + [row[3]]
        print("  ".join(cells).rstrip(), file=out)
    if broken:
        print(f"\n{broken} environment(s) could not be imported; see the errors above.", file=out)
    return 0


def _cmd_sandbox(argv: list[str], err: IO[str]) -> int:
    try:
        from vfgym.cli.sandbox import main as sandbox_main
    except ImportError as exc:
        print(
            f"error: the sandbox runtime is not available in this vfgym installation ({exc}); "
            "`vfgym sandbox build | doctor | gc` needs the vfgym.sandbox package",
            file=err,
        )
        return EXIT_FAILED
    try:
        return int(sandbox_main(argv) or 0)
    except SystemExit as exc:  # its argparse exits on --help and bad arguments
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE


def _cmd_view(args: argparse.Namespace, out: IO[str]) -> int:
    from vfgym.results.report import write_report

    output = Path(args.output) if args.output else None
    path = write_report(Path(args.results), output, max_rollouts=args.max_rollouts)
    print(f"report written to {path}", file=out)
    return 0


def _cmd_serve_model(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from vfgym.cli.serve_model import ServeOptions, serve_model

    options = ServeOptions(
        env_id=args.env,
        policy=args.policy,
        env_args=parse_json_object("-a/--env-args", args.env_args),
        host=args.host,
        port=args.port,
        faults=args.faults,
        fault_rate=args.fault_rate,
        fault_seed=args.fault_seed,
        seed=args.seed,
    )
    return serve_model(options, out, err)


def _cmd_serve_env(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from vfgym.cli.serve_env import ServeEnvOptions, serve_env

    options = ServeEnvOptions(
        env_id=args.env,
        env_args=parse_json_object("-a/--env-args", args.env_args),
        host=args.host,
        port=args.port,
        max_sessions=args.max_sessions,
        idle_timeout=args.idle_timeout,
        token=args.token,
        no_token=args.no_token,
        max_frame_bytes=args.max_frame_bytes,
        drain_timeout=args.drain_timeout,
    )
    return serve_env(options, out, err)


def _cmd_play(args: argparse.Namespace, out: IO[str]) -> int:
    from vfgym.cli.play import play

    env_args = parse_json_object("-a/--env-args", args.env_args)
    return play(args.env, env_args, example=args.example, stdin=sys.stdin, out=out)


def _cmd_check(args: argparse.Namespace, out: IO[str]) -> int:
    from vfgym.cli.check import check_command

    env_args = parse_json_object("-a/--env-args", args.env_args)
    return check_command(
        args.env, env_args, num_examples=args.num_examples, seed=args.seed, out=out
    )


def _cmd_init(args: argparse.Namespace, out: IO[str]) -> int:
    from vfgym.cli.init import init_package

    where = init_package(args.name, kind=args.kind, directory=args.dir)
    print(f"created {where}", file=out)
    print(f"next: pip install -e {where} && python -m pytest {where}", file=out)
    return 0


def _cmd_eval(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from vfgym.cli.eval import EvalOptions, run_eval

    options = EvalOptions(
        env_id=args.env,
        model=args.model,
        base_url=args.base_url,
        api_key_var=args.api_key_var,
        num_examples=args.num_examples,
        rollouts_per_example=args.rollouts_per_example,
        max_concurrent=args.max_concurrent,
        sampling_args=parse_json_object("-S/--sampling-args", args.sampling_args),
        env_args=parse_json_object("-a/--env-args", args.env_args),
        output_dir=args.output_dir,
        resume=args.resume,
        progress=args.progress if args.progress is not None else err.isatty(),
        verbose=args.verbose,
        ray=args.ray,
    )
    return run_eval(options, out=out, err=err)


def main(argv: list[str] | None = None) -> int:
    """Run the `vfgym` command; returns the process exit code.

    Ctrl-C at any point in here, parsing and a subcommand's first imports
    included, ends with "Interrupted." and exit code 130, never a traceback.
    """
    err = sys.stderr
    try:
        return _run(list(sys.argv[1:] if argv is None else argv), sys.stdout, err)
    except KeyboardInterrupt:
        print("\nInterrupted.", file=err)
        return EXIT_INTERRUPTED


def _run(argv: list[str], out: IO[str], err: IO[str]) -> int:
    args = None
    if not (argv and argv[0] == "sandbox"):  # its own parser handles everything after the word
        try:
            args = _parser().parse_args(argv)
        except SystemExit as exc:  # --help, or a usage error argparse already explained
            return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        if args is None:
            return _cmd_sandbox(argv[1:], err)
        return _dispatch(args, out, err)
    except CommandError as exc:
        print(f"error: {exc}", file=err)
        return exc.code
    except ImportError as exc:  # EnvironmentImportError, HollowPackageError: said in full
        if not isinstance(exc, VFGymError):
            _report_unexpected(exc, args, err)
            return EXIT_FAILED
        print(f"error: {exc}", file=err)
        return EXIT_FAILED
    except BrokenPipeError:  # `vfgym list | head`
        return 0
    except Exception as exc:
        _report_unexpected(exc, args, err)
        return EXIT_FAILED


def _dispatch(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    if args.command == "list":
        return _cmd_list(out)
    if args.command == "eval":
        return _cmd_eval(args, out, err)
    if args.command == "play":
        return _cmd_play(args, out)
    if args.command == "view":
        return _cmd_view(args, out)
    if args.command == "serve-model":
        return _cmd_serve_model(args, out, err)
    if args.command == "serve-env":
        return _cmd_serve_env(args, out, err)
    if args.command == "check":
        return _cmd_check(args, out)
    if args.command == "init":
        return _cmd_init(args, out)
    return _cmd_sandbox([], err)


def _report_unexpected(exc: Exception, args: argparse.Namespace | None, err: IO[str]) -> None:
    """One line for a bug; the traceback with -v (`vfgym sandbox` has no -v: shown at once)."""
    show = args is None or bool(getattr(args, "verbose", True))
    if show:
        traceback.print_exc(file=err)
    how = "report it" if show else "run with -v for the traceback and report it"
    print(f"error: {type(exc).__name__}: {exc} (this is unexpected; {how})", file=err)


if __name__ == "__main__":
    sys.exit(main())
