"""vfgym's seccomp policy: which system calls sandboxed code may never make, and why.

The policy is enforced twice, so that neither runtime depends on a daemon's
defaults. The JSON profile shipped beside this module (Docker's format, built on
Docker's default allow-list) goes to every container as `seccomp=<json>`; runc
applies it, gVisor ignores it unless runsc runs with `--oci-seccomp`. The runner
(the sandbox's PID 1, `sandboxes/python/vfgym_runner/seccomp_filter.py`) also installs a
filter denying the same calls before any other process exists, on both runtimes,
and reports the calls it denies; `DockerSandbox` refuses a sandbox whose runner
reports fewer than `DENIED_CALLS`.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from vfgym.errors import SandboxImageError

PROFILE_NAME = "seccomp_profile.json"
ALLOW = "SCMP_ACT_ALLOW"
#: clone(2)'s namespace flags: CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET.
CLONE_NAMESPACE_FLAGS = 0x7E020000
CLONE_NEWUSER = 0x10000000
ENOSYS = 38


@dataclass(frozen=True)
class DeniedCall:
    """A system call the policy denies, and why untrusted code has no use for it."""

    name: str
    why: str
    #: "always", "namespace flags" (denied only when asking for a new namespace),
    #: "ENOSYS" (answered as if the kernel lacked it).
    when: str = "always"


DENIED_CALLS: tuple[DeniedCall, ...] = (
    DeniedCall(
        "unshare",
        "a new user namespace hands back every capability inside it (under gVisor: raw "
        "and packet sockets, priority over PID 1) and escapes per-user process limits",
        "namespace flags",
    ),
    DeniedCall(
        "clone", "the same as unshare, when a child is born in new namespaces", "namespace flags"
    ),
    DeniedCall(
        "clone3",
        "its flags sit in memory a filter cannot read, so it cannot be allowed without "
        "namespaces; ENOSYS makes the C library fall back to clone",
        "ENOSYS",
    ),
    DeniedCall("setns", "joining another namespace is never what sandboxed code needs"),
    DeniedCall(
        "io_uring_setup",
        "io_uring's operations run unseen by seccomp, and it has been the way into several "
        "kernel exploits (Docker's own default denies it since 25.0)",
    ),
    DeniedCall("io_uring_enter", "part of io_uring (see io_uring_setup)"),
    DeniedCall("io_uring_register", "part of io_uring (see io_uring_setup)"),
    DeniedCall("bpf", "loads programs into the kernel; a frequent exploit path"),
    DeniedCall(
        "userfaultfd",
        "lets code stall the kernel mid-copy, the usual way to win a kernel race",
    ),
    DeniedCall("perf_event_open", "exposes kernel addresses and timing; a large attack surface"),
    DeniedCall("keyctl", "the kernel keyring is not namespaced: keys could cross sandboxes"),
    DeniedCall("add_key", "the kernel keyring (see keyctl)"),
    DeniedCall("request_key", "the kernel keyring (see keyctl)"),
    DeniedCall("kexec_load", "loads a new kernel"),
    DeniedCall("kexec_file_load", "loads a new kernel"),
    DeniedCall(
        "open_by_handle_at",
        "opens files by handle past the container's mount view (the 'shocker' escape)",
    ),
    DeniedCall("init_module", "loads kernel modules"),
    DeniedCall("finit_module", "loads kernel modules"),
    DeniedCall("delete_module", "unloads kernel modules"),
    DeniedCall("mount", "changes the filesystem view the limits rely on"),
    DeniedCall("umount2", "uncovers what mounts hide"),
    DeniedCall("pivot_root", "changes the root filesystem"),
    DeniedCall("open_tree", "the new mount API (see mount)"),
    DeniedCall("move_mount", "the new mount API (see mount)"),
    DeniedCall("fsopen", "the new mount API (see mount)"),
    DeniedCall("fsconfig", "the new mount API (see mount)"),
    DeniedCall("fsmount", "the new mount API (see mount)"),
    DeniedCall("fspick", "the new mount API (see mount)"),
    DeniedCall("mount_setattr", "the new mount API (see mount)"),
)
DENIED_NAMES = frozenset(call.name for call in DENIED_CALLS)


@functools.cache
def load_profile() -> dict[str, Any]:
    """The JSON profile shipped in the package (read once; treat it as read-only)."""
    text = (resources.files("vfgym.sandbox") / PROFILE_NAME).read_text()
    profile: dict[str, Any] = json.loads(text)
    return profile


@functools.cache
def security_option() -> str:
    """The `security_opt` entry that applies the profile to a container."""
    return "seccomp=" + json.dumps(load_profile(), separators=(",", ":"))


def profile_problems(profile: dict[str, Any]) -> list[str]:
    """Where `profile` would let a denied call through; empty when it holds the policy.

    A call is let through by an allow rule without arguments, or (clone, unshare)
    by an allow rule that does not mask out CLONE_NEWUSER.
    """
    problems = []
    if profile.get("defaultAction") == ALLOW:
        problems.append("the profile allows every call it does not name (defaultAction)")
    for rule in profile.get("syscalls", []):
        if rule.get("action") != ALLOW:
            continue
        for name in set(rule.get("names", [])) & DENIED_NAMES:
            if name in ("clone", "unshare") and _masks_new_user(rule.get("args") or []):
                continue
            problems.append(f"the profile allows {name}")
    clone3_rules = [r for r in profile.get("syscalls", []) if "clone3" in r.get("names", [])]
    if not any(r.get("errnoRet") == ENOSYS for r in clone3_rules):
        problems.append("the profile does not answer clone3 with ENOSYS (threads would fail)")
    return problems


def _masks_new_user(args: list[dict[str, Any]]) -> bool:
    return any(
        arg.get("index") == 0
        and arg.get("op") == "SCMP_CMP_MASKED_EQ"
        and int(arg.get("value", 0)) & CLONE_NEWUSER
        and not int(arg.get("valueTwo", 0)) & CLONE_NEWUSER
        for arg in args
    )


def check_runner_report(denied: object, runtime: str) -> None:
    """Refuse a sandbox whose runner does not deny every call of the policy.

    `denied` is what the runner's ping reported; an image built before the runner
    had its filter reports nothing.
    """
    if not isinstance(denied, list):
        raise SandboxImageError(
            f"the sandbox runner on {runtime} reports no seccomp filter: the image predates "
            "vfgym's seccomp policy; rebuild it with `python -m vfgym.sandbox build`"
        )
    missing = sorted(DENIED_NAMES - set(denied))
    if missing:
        raise SandboxImageError(
            f"the sandbox runner on {runtime} does not deny {', '.join(missing)}; rebuild the "
            "image with `python -m vfgym.sandbox build`"
        )
