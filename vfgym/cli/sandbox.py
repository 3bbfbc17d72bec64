"""Command line of the sandbox runtime: build, doctor, gc.

`python -m vfgym.sandbox ...` runs it; the `vfgym sandbox ...` command delegates here.
"""

from __future__ import annotations

import argparse
import sys

from docker.errors import DockerException
from requests import RequestException

from vfgym.errors import SandboxError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vfgym sandbox", description="Build, check and clean up vfgym's Docker sandboxes."
    )
    parser.add_argument(
        "--docker-host",
        default=None,
        help="Docker endpoint such as unix:///var/run/docker.sock (default: DOCKER_HOST)",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    build = commands.add_parser("build", help="build the default sandbox image")
    build.add_argument(
        "--base",
        default="auto",
        help="'auto' (public Python image if pullable, else Debian), 'debian' "
        "(mmdebstrap root filesystem), or an image reference",
    )
    build.add_argument("--force", action="store_true", help="rebuild even if up to date")

    doctor = commands.add_parser("doctor", help="say what is missing and how to fix it")
    doctor.add_argument("--image", default=None, help="image to check (default: the built one)")
    doctor.add_argument(
        "--deep", action="store_true", help="also start a sandbox with each runtime"
    )

    gc = commands.add_parser("gc", help="remove sandbox containers of dead processes")
    gc.add_argument(
        "--all",
        action="store_true",
        help="also remove containers created on other hosts of a shared Docker endpoint, "
        "or in other pid namespaces (containers) of this one, whose owners cannot be checked",
    )
    gc.add_argument("--dry-run", action="store_true", help="list, do not remove")
    return parser


def _build(args: argparse.Namespace) -> int:
    from vfgym.sandbox.docker_client import make_client
    from vfgym.sandbox.image import build_image

    client = make_client(args.docker_host, timeout=600)
    try:
        report = build_image(client, base=args.base, force=args.force)
    finally:
        client.close()
    state = "up to date" if report.cached else f"built in {report.seconds:.1f}s"
    print(f"{report.image} ({state}, base {report.base})")
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from vfgym.sandbox.doctor import format_checks, run_checks

    checks = run_checks(args.docker_host, image=args.image, deep=args.deep)
    print(format_checks(checks))
    return 1 if any(check.status == "fail" for check in checks) else 0


def _gc(args: argparse.Namespace) -> int:
    from vfgym.sandbox.docker_client import make_client
    from vfgym.sandbox.gc import find_orphans, remove_orphans

    client = make_client(args.docker_host)
    try:
        if args.dry_run:
            orphans = find_orphans(client, include_foreign=args.all)
        else:
            orphans = remove_orphans(client, include_foreign=args.all)
    finally:
        client.close()
    verb = "would remove" if args.dry_run else "removed"
    for orphan in orphans:
        print(f"{verb} {orphan.container_id[:12]} (owner {orphan.owner}, {orphan.status})")
    print(f"{verb} {len(orphans)} orphaned sandbox container(s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run one sandbox subcommand; returns the process exit code."""
    args = _parser().parse_args(argv)
    handlers = {"build": _build, "doctor": _doctor, "gc": _gc}
    try:
        return handlers[args.command](args)
    except SandboxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (DockerException, RequestException) as exc:
        # The engine answered the handshake but failed (or dropped) a later request.
        from vfgym.sandbox.docker_client import docker_host

        print(
            f"error: the Docker Engine at {docker_host(args.docker_host)} failed a request: "
            f"{exc}. Check it with `python -m vfgym.sandbox doctor` and its log, then retry.",
            file=sys.stderr,
        )
        return 1
