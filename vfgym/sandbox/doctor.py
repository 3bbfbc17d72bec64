"""`vfgym sandbox doctor`: what is missing for sandboxes to run, and how to fix it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from importlib import resources

import docker

from vfgym.errors import SandboxError
from vfgym.sandbox.config import SandboxConfig
from vfgym.sandbox.docker_client import (
    PERMISSION_FIX,
    docker_host,
    is_permission_problem,
    make_client,
)
from vfgym.sandbox.gc import find_orphans
from vfgym.sandbox.image import default_image, image_exists


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "ok", "warn" or "fail"
    detail: str
    fix: str = ""


def setup_script() -> str:
    """Where the Docker setup script is, for messages that tell the user to run it."""
    return str(resources.files("vfgym.sandboxes") / "setup-docker.sh")


def run_checks(
    configured_host: str | None = None, image: str | None = None, deep: bool = False
) -> list[Check]:
    """Check the daemon, image, runtimes and limits; `deep` also starts a sandbox per runtime."""
    checks: list[Check] = []
    setup = f"sudo bash {setup_script()}"
    try:
        client = make_client(configured_host, timeout=30)
    except SandboxError as exc:
        fix = PERMISSION_FIX if is_permission_problem(exc.__cause__) else setup
        checks.append(Check("docker daemon", "fail", str(exc), fix))
        return checks
    try:
        info = client.info()
        version = client.version()
        checks.append(
            Check(
                "docker daemon",
                "ok",
                f"{docker_host(configured_host)}: Docker {version.get('Version')} "
                f"(API {client.api.api_version}), storage {info.get('Driver')}, "
                f"cgroup v{info.get('CgroupVersion', '?')}",
            )
        )
        for key, what in (("MemoryLimit", "memory"), ("SwapLimit", "swap"), ("PidsLimit", "pids")):
            if info.get(key) is False:
                checks.append(
                    Check(
                        f"{what} limits",
                        "warn",
                        f"the daemon reports no {what} limit support on this kernel",
                        "enable the cgroup controller (kernel command line or cgroup v2)",
                    )
                )
        tag = image or default_image()
        image_check = _check_image(client, tag)
        checks.append(image_check)
        runtimes = set(info.get("Runtimes") or {})
        checks.append(Check("runtime runc", "ok" if "runc" in runtimes else "fail", "default"))
        if "runsc" in runtimes:
            checks.append(Check("runtime runsc", "ok", "gVisor is registered"))
        else:
            checks.append(
                Check(
                    "runtime runsc",
                    "warn",
                    "gVisor (runsc) is not registered with the daemon; only runc is available",
                    f"{setup} (installs runsc and registers it with --network=none)",
                )
            )
        orphans = find_orphans(client)
        if orphans:
            checks.append(
                Check(
                    "orphans",
                    "warn",
                    f"{len(orphans)} sandbox containers of dead processes remain",
                    "python -m vfgym.sandbox gc",
                )
            )
        else:
            checks.append(Check("orphans", "ok", "no leftover sandbox containers"))
        if deep and image_check.status == "ok":
            for runtime in sorted(runtimes & {"runc", "runsc"}):
                checks.append(_try_runtime(configured_host, tag, runtime))
    finally:
        client.close()
    return checks


def _check_image(client: docker.DockerClient, tag: str) -> Check:
    try:
        present = image_exists(client, tag)
    except SandboxError as exc:  # a malformed reference
        return Check("sandbox image", "fail", str(exc), "name an image with --image repo:tag")
    if present:
        return Check("sandbox image", "ok", tag)
    return Check("sandbox image", "fail", f"{tag} is not built", "python -m vfgym.sandbox build")


def _try_runtime(configured_host: str | None, image: str, runtime: str) -> Check:
    from vfgym.sandbox.sandbox import DockerSandbox

    async def attempt() -> str:
        config = SandboxConfig(image=image, runtime=runtime, docker_host=configured_host)
        async with DockerSandbox(config) as sandbox:
            result = await sandbox.run_python("print(6 * 7)", timeout=20)
            return result.stdout.strip()

    try:
        output = asyncio.run(attempt())
    except Exception as exc:
        return Check(f"sandbox on {runtime}", "fail", f"{type(exc).__name__}: {exc}")
    if output != "42":
        return Check(f"sandbox on {runtime}", "fail", f"unexpected output {output!r}")
    return Check(f"sandbox on {runtime}", "ok", "started a sandbox and ran Python")


def format_checks(checks: list[Check]) -> str:
    lines = []
    for check in checks:
        lines.append(f"[{check.status:>4}] {check.name}: {check.detail}")
        if check.fix and check.status != "ok":
            lines.append(f"       fix: {check.fix}")
    return "\n".join(lines)
