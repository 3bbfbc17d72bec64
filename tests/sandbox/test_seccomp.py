"""vfgym's seccomp policy: every call it lists fails from user code, on runc and on gVisor.

The calls are made with raw system call numbers through ctypes, the way hostile code
would, from the Python session and from a shell command. Many of them would fail
anyway for want of a capability, so a check that only saw EPERM could pass without
the policy: `test_the_probe_tells_the_policy_from_a_missing_privilege` runs the same
probe in a container without any seccomp filter and shows the answers differ there.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import docker
import pytest
from runner_filter import runner_filter_module

from vfgym.errors import SandboxImageError
from vfgym.sandbox import SandboxPool
from vfgym.sandbox.doctor import POLICY_PROBE, assess_policy_probe, run_checks, seccomp_checks
from vfgym.sandbox.image import default_image
from vfgym.sandbox.seccomp import (
    DENIED_CALLS,
    DENIED_NAMES,
    check_runner_report,
    load_profile,
    profile_problems,
    security_option,
)

# Each denied call with arguments that, without the policy, would reach the kernel's
# own checks (and mostly fail differently: EFAULT, EBADF, EINVAL, or succeed).
PROBE = r"""
import ctypes, errno, json, os
CLONE_NEWUSER, SIGCHLD = 0x10000000, 17
NUMBERS = {
    "x86_64": dict(unshare=272, clone=56, clone3=435, setns=308, io_uring_setup=425,
                   io_uring_enter=426, io_uring_register=427, bpf=321, userfaultfd=323,
                   perf_event_open=298, keyctl=250, add_key=248, request_key=249,
                   kexec_load=246, kexec_file_load=320, open_by_handle_at=304,
                   init_module=175, finit_module=313, delete_module=176, mount=165,
                   umount2=166, pivot_root=155, open_tree=428, move_mount=429, fsopen=430,
                   fsconfig=431, fsmount=432, fspick=433, mount_setattr=442),
    "aarch64": dict(unshare=97, clone=220, clone3=435, setns=268, io_uring_setup=425,
                    io_uring_enter=426, io_uring_register=427, bpf=280, userfaultfd=282,
                    perf_event_open=241, keyctl=219, add_key=217, request_key=218,
                    kexec_load=104, kexec_file_load=294, open_by_handle_at=265,
                    init_module=105, finit_module=273, delete_module=106, mount=40,
                    umount2=39, pivot_root=41, open_tree=428, move_mount=429, fsopen=430,
                    fsconfig=431, fsmount=432, fspick=433, mount_setattr=442),
}[os.uname().machine]
ARGS = {
    "unshare": [CLONE_NEWUSER], "clone": [CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0],
    "clone3": [0, 0], "setns": [-1, 0], "io_uring_setup": [1, 0],
    "io_uring_enter": [-1, 0, 0, 0, 0, 0], "io_uring_register": [-1, 0, 0, 0],
    "bpf": [0, 0, 0], "userfaultfd": [0], "perf_event_open": [0, 0, -1, -1, 0],
    "keyctl": [0, -3, 0], "add_key": [0, 0, 0, 0, 0], "request_key": [0, 0, 0, 0],
    "open_by_handle_at": [-1, 0, 0], "mount": [0, 0, 0, 0, 0], "umount2": [0, 0],
}
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
answers = {}
for name, number in NUMBERS.items():
    args = [ctypes.c_long(a) for a in ARGS.get(name, [0, 0, 0, 0, 0])]
    result = libc.syscall(ctypes.c_long(number), *args)
    if result == 0 and name == "clone":
        os._exit(0)  # a child that got through: say nothing, the parent reports "ok"
    answers[name] = "ok" if result >= 0 else errno.errorcode[ctypes.get_errno()]
status = open("/proc/self/status").read()
answers["CapEff"] = [l.split()[1] for l in status.splitlines() if l.startswith("CapEff")][0]
print(json.dumps(answers))
"""

# What the probe must see for each call: clone3 looks absent, the rest forbidden.
EXPECTED = {call.name: "ENOSYS" if call.when == "ENOSYS" else "EPERM" for call in DENIED_CALLS}


# ------------------------------------------------------------------ the policy itself


def test_the_shipped_profile_holds_the_whole_policy() -> None:
    profile = load_profile()
    assert profile_problems(profile) == []
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    allowed = {
        name
        for rule in profile["syscalls"]
        if rule["action"] == "SCMP_ACT_ALLOW" and not rule.get("args")
        for name in rule["names"]
    }
    # Docker's base stays: ordinary programs keep what they use.
    assert {"read", "openat", "execve", "fork", "vfork", "wait4", "mmap", "futex"} <= allowed
    assert not allowed & DENIED_NAMES
    assert security_option().startswith("seccomp={")
    assert json.loads(security_option().removeprefix("seccomp=")) == profile


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        (lambda p: p["syscalls"][0]["names"].append("io_uring_setup"), "allows io_uring_setup"),
        (lambda p: p["syscalls"][0]["names"].append("clone"), "allows clone"),
        (lambda p: p.update(defaultAction="SCMP_ACT_ALLOW"), "defaultAction"),
        (
            lambda p: p["syscalls"].append({"names": ["unshare"], "action": "SCMP_ACT_ALLOW"}),
            "allows unshare",
        ),
        (
            lambda p: p.update(syscalls=[r for r in p["syscalls"] if "clone3" not in r["names"]]),
            "clone3",
        ),
    ],
    ids=[
        "io_uring allowed",
        "clone unfiltered",
        "allow by default",
        "unshare unfiltered",
        "no clone3 rule",
    ],
)
def test_a_profile_that_lets_a_denied_call_through_is_flagged(change: Any, complaint: str) -> None:
    profile = copy.deepcopy(load_profile())
    change(profile)
    problems = profile_problems(profile)
    assert any(complaint in problem for problem in problems), problems


def test_the_runner_filter_denies_the_same_calls_as_the_profile() -> None:
    runner_filter = runner_filter_module()
    assert set(runner_filter.policy_names(refuse_mq_open=False)) == DENIED_NAMES
    assert set(runner_filter.policy_names(refuse_mq_open=True)) == DENIED_NAMES | {"mq_open"}
    for arch in runner_filter.ARCHES.values():
        assert DENIED_NAMES <= set(arch.numbers)
        program = runner_filter.build_program(arch, refuse_mq_open=True)
        assert len(program) % 8 == 0 and len(program) // 8 < 100


def test_a_runner_that_denies_less_is_refused() -> None:
    with pytest.raises(SandboxImageError, match="rebuild"):
        check_runner_report(None, "runc")
    with pytest.raises(SandboxImageError, match="io_uring_setup"):
        check_runner_report(sorted(DENIED_NAMES - {"io_uring_setup"}), "runsc")
    check_runner_report(sorted(DENIED_NAMES), "runc")


# ----------------------------------------------------------- in a real sandbox


session_loop = pytest.mark.asyncio(loop_scope="session")


@session_loop
async def test_every_denied_call_fails_from_the_python_session(
    hostile_pool: SandboxPool,
) -> None:
    async with hostile_pool.acquire() as sandbox:
        assert set(sandbox.runner_info["seccomp"]) >= DENIED_NAMES
        result = await sandbox.run_python(PROBE)
    assert result.exit_code == 0, result.summary()
    answers = json.loads(result.stdout)
    assert {name: answers[name] for name in EXPECTED} == EXPECTED
    assert int(answers["CapEff"], 16) == 0  # no capability came back


@session_loop
async def test_every_denied_call_fails_from_a_shell_command(hostile_pool: SandboxPool) -> None:
    async with hostile_pool.acquire() as sandbox:
        await sandbox.write_file("probe.py", PROBE)
        result = await sandbox.run_shell(
            "python3 probe.py; unshare --user --map-root-user id; echo unshare=$?"
        )
    lines = result.stdout.splitlines()
    answers = json.loads(lines[0])
    assert {name: answers[name] for name in EXPECTED} == EXPECTED
    assert "uid=0" not in result.stdout and lines[-1] == "unshare=1", result.summary()
    assert "Operation not permitted" in result.stderr, result.stderr


@session_loop
async def test_ordinary_processes_threads_and_unsharing_still_work(
    hostile_pool: SandboxPool,
) -> None:
    code = r"""
import ctypes, os, subprocess, threading
libc = ctypes.CDLL(None, use_errno=True)
pid = os.fork()
if pid == 0:
    os._exit(7)
forked = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
ran = subprocess.run(["sh", "-c", "exit 3"]).returncode
box = []
thread = threading.Thread(target=box.append, args=(1,))
thread.start(); thread.join()
CLONE_FILES = 0x400
(forked, ran, box, libc.unshare(CLONE_FILES))
"""
    async with hostile_pool.acquire() as sandbox:
        result = await sandbox.run_python(code)
    assert result.value == "(7, 3, [1], 0)", result.summary()


@session_loop
async def test_the_runners_own_modules_stay_out_of_the_session(hostile_pool: SandboxPool) -> None:
    """The filter and the runner's other modules are imported before user code runs;
    they must not shadow a user's module of the same name."""
    async with hostile_pool.acquire() as sandbox:
        await sandbox.write_file("seccomp_filter.py", "MINE = True\n")
        result = await sandbox.run_python(
            "import sys, seccomp_filter\n"
            "(seccomp_filter.MINE, [n for n in sys.modules if n.startswith('vfgym_runner')])"
        )
    assert result.value == "(True, [])", result.summary()


def test_the_probe_tells_the_policy_from_a_missing_privilege(
    runtime: str, docker_client: docker.DockerClient, session_labels: dict[str, str]
) -> None:
    """Without any filter (and with every capability still dropped) the same probe gets
    other answers, so the sandbox tests above see the policy, not the missing privilege."""
    output = docker_client.containers.run(
        default_image(),
        entrypoint=["python3", "-c", PROBE],
        runtime=runtime,
        user="10001:10001",
        cap_drop=["ALL"],
        security_opt=["no-new-privileges", "seccomp=unconfined"],
        network_mode="none",
        remove=True,
        labels={**session_labels, "vfgym.sandbox": "1"},
    )
    answers = json.loads(output)
    unlike = {name for name, errno_name in EXPECTED.items() if answers[name] != errno_name}
    # A new user namespace, io_uring and the keyring reach the kernel without the policy.
    assert {"unshare", "io_uring_setup", "keyctl"} <= unlike, answers
    assert len(unlike) >= 8, answers


# ------------------------------------------------------------------------- doctor


def test_doctor_reports_the_policy_on_each_runtime(docker_client: docker.DockerClient) -> None:
    info = docker_client.info()
    checks = {check.name: check for check in seccomp_checks(info)}
    assert checks["seccomp policy"].status == "ok"
    assert f"denies {len(DENIED_CALLS)} calls" in checks["seccomp policy"].detail
    assert checks["seccomp on runc"].status == "ok"
    assert "vfgym's JSON profile" in checks["seccomp on runc"].detail
    if "runsc" in (info.get("Runtimes") or {}):
        assert checks["seccomp on runsc"].status == "ok"
        assert "runner's filter" in checks["seccomp on runsc"].detail


def test_doctor_fails_where_a_sandbox_could_start_without_the_policy(
    docker_client: docker.DockerClient,
) -> None:
    info = docker_client.info()
    loose = copy.deepcopy(load_profile())
    loose["syscalls"][0]["names"].append("io_uring_setup")
    by_name = {check.name: check for check in seccomp_checks(info, loose)}
    assert by_name["seccomp policy"].status == "fail"
    assert "io_uring_setup" in by_name["seccomp policy"].detail
    no_seccomp = {**info, "SecurityOptions": ["name=apparmor"]}
    by_name = {check.name: check for check in seccomp_checks(no_seccomp)}
    assert by_name["seccomp on runc"].status == "fail" and by_name["seccomp on runc"].fix


def test_doctor_deep_probe_passes_in_a_sandbox_and_fails_without_the_policy(
    runtime: str, docker_client: docker.DockerClient, session_labels: dict[str, str]
) -> None:
    unconfined = docker_client.containers.run(
        default_image(),
        entrypoint=["python3", "-c", POLICY_PROBE],
        runtime=runtime,
        user="10001:10001",
        cap_drop=["ALL"],
        security_opt=["no-new-privileges", "seccomp=unconfined"],
        network_mode="none",
        remove=True,
        labels={**session_labels, "vfgym.sandbox": "1"},
    )
    bare = assess_policy_probe(runtime, unconfined.decode())
    assert bare.status == "fail" and "unshare" in bare.detail, bare
    checks = {c.name: c for c in run_checks(image=default_image(), deep=True)}
    assert checks[f"sandbox on {runtime}"].status == "ok", checks
    assert checks[f"seccomp in a sandbox on {runtime}"].status == "ok", checks


def test_the_security_page_lists_every_denied_call() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    missing = [call.name for call in DENIED_CALLS if f"`{call.name}`" not in page]
    assert missing == [], f"docs/security.md does not list {missing}"
