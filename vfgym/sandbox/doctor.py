"""`vfgym sandbox doctor`: what is missing for sandboxes to run, and how to fix it."""

from __future__ import annotations

import asyncio
import json
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
from vfgym.sandbox.seccomp import DENIED_CALLS, load_profile, profile_problems

#: Runs in a sandbox for `--deep`: calls the policy denies, made as hostile code would.
#: Without the policy a new user namespace is made and io_uring answers EFAULT.
POLICY_PROBE = r"""
import ctypes, errno, json, os
NUMBERS = {"x86_64": (272, 425, 308), "aarch64": (97, 425, 268)}[os.uname().machine]
libc = ctypes.CDLL(None, use_errno=True)
answers = {}
for name, number, args in zip(("unshare", "io_uring_setup", "setns"), NUMBERS,
                              ((0x10000000,), (1, 0), (-1, 0))):
    result = libc.syscall(number, *args)
    answers[name] = "ok" if result >= 0 else errno.errorcode[ctypes.get_errno()]
print(json.dumps(answers))
"""


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
        checks.extend(seccomp_checks(info))
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
                checks.extend(_try_runtime(configured_host, tag, runtime))
    finally:
        client.close()
    return checks


def seccomp_checks(info: dict, profile: dict | None = None) -> list[Check]:
    """The seccomp policy in force on each runtime, from the daemon's `info`.

    Fails where a sandbox could start without the policy: a profile that lets a
    denied call through, or a daemon that cannot apply a seccomp profile at all.
    """
    profile = load_profile() if profile is None else profile
    checks = []
    problems = profile_problems(profile)
    count = len(DENIED_CALLS)
    if problems:
        checks.append(
            Check(
                "seccomp policy",
                "fail",
                "vfgym's seccomp profile does not hold the policy: " + "; ".join(problems),
                "reinstall vfgym (the profile shipped in vfgym/sandbox/ was changed)",
            )
        )
    else:
        checks.append(
            Check(
                "seccomp policy", "ok", f"vfgym's profile denies {count} calls (docs/security.md)"
            )
        )
    options = " ".join(info.get("SecurityOptions") or [])
    if "name=seccomp" in options:
        runc = "vfgym's JSON profile (not the daemon's default) and the runner's filter"
        checks.append(Check("seccomp on runc", "ok", runc))
    else:
        checks.append(
            Check(
                "seccomp on runc",
                "fail",
                "the daemon reports no seccomp support, so it cannot apply vfgym's profile",
                "run dockerd on a kernel with CONFIG_SECCOMP_FILTER and a seccomp-enabled build",
            )
        )
    runsc = (info.get("Runtimes") or {}).get("runsc")
    if runsc is not None:
        oci = "--oci-seccomp" in (runsc.get("runtimeArgs") or [])
        detail = "the runner's filter (the same denied calls), installed before any user code"
        detail += (
            "; gVisor also applies the JSON profile (--oci-seccomp)"
            if oci
            else "; gVisor ignores Docker's JSON profile (runsc without --oci-seccomp)"
        )
        checks.append(Check("seccomp on runsc", "ok", detail))
    return checks


def assess_policy_probe(runtime: str, output: str) -> Check:
    """Whether POLICY_PROBE's `output` shows the policy in force on `runtime`."""
    name = f"seccomp in a sandbox on {runtime}"
    try:
        answers = json.loads(output)
    except ValueError:
        return Check(name, "fail", f"the policy probe printed {output[:200]!r}")
    allowed = sorted(call for call, answer in answers.items() if answer not in ("EPERM", "ENOSYS"))
    if allowed:
        return Check(
            name,
            "fail",
            f"a sandbox ran without vfgym's seccomp policy: {', '.join(allowed)} got through "
            f"({answers})",
            "rebuild the image (python -m vfgym.sandbox build) and check the runtime's setup",
        )
    return Check(name, "ok", "unshare(CLONE_NEWUSER), io_uring_setup and setns are refused")


def _check_image(client: docker.DockerClient, tag: str) -> Check:
    try:
        present = image_exists(client, tag)
    except SandboxError as exc:  # a malformed reference
        return Check("sandbox image", "fail", str(exc), "name an image with --image repo:tag")
    if present:
        return Check("sandbox image", "ok", tag)
    return Check("sandbox image", "fail", f"{tag} is not built", "python -m vfgym.sandbox build")


def _try_runtime(configured_host: str | None, image: str, runtime: str) -> list[Check]:
    from vfgym.sandbox.sandbox import DockerSandbox

    async def attempt() -> tuple[str, str]:
        config = SandboxConfig(image=image, runtime=runtime, docker_host=configured_host)
        async with DockerSandbox(config) as sandbox:
            result = await sandbox.run_python("print(6 * 7)", timeout=20)
            probe = await sandbox.run_python(POLICY_PROBE, timeout=20)
            return result.stdout.strip(), probe.stdout.strip()

    try:
        output, probe = asyncio.run(attempt())
    except Exception as exc:
        return [Check(f"sandbox on {runtime}", "fail", f"{type(exc).__name__}: {exc}")]
    if output != "42":
        return [Check(f"sandbox on {runtime}", "fail", f"unexpected output {output!r}")]
    started = Check(f"sandbox on {runtime}", "ok", "started a sandbox and ran Python")
    return [started, assess_policy_probe(runtime, probe)]


def format_checks(checks: list[Check]) -> str:
    lines = []
    for check in checks:
        lines.append(f"[{check.status:>4}] {check.name}: {check.detail}")
        if check.fix and check.status != "ok":
            lines.append(f"       fix: {check.fix}")
    return "\n".join(lines)
