"""The runner's own seccomp filter: vfgym's denied system calls, on every runtime.

Docker hands its seccomp profile to the runtime, but gVisor (runsc) does not apply
it unless the daemon registers runsc with `--oci-seccomp`, and a daemon's default
profile may be older or newer than the one vfgym expects. So the runner (PID 1)
installs this filter on itself before it starts any other process; every process
of the sandbox inherits it and none can remove it. Under runc it stacks on vfgym's
JSON profile (`vfgym/sandbox/seccomp_profile.json`), which denies the same calls;
the host's `vfgym.sandbox.seccomp.DENIED_CALLS` says why each call is denied, and a
test keeps the two lists equal.

Standard library only: it runs inside the sandbox image.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
# Classic BPF opcodes: load a word of seccomp_data, jumps, return.
BPF_LD_W_ABS, BPF_JEQ_K, BPF_JGE_K, BPF_JSET_K, BPF_RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
#: Offsets in struct seccomp_data: nr, arch, then args[0] after the 8-byte ip. Only
#: the low half of args[0] is read, which is where the flags are on little-endian.
NR_OFFSET, ARCH_OFFSET, ARG0_OFFSET = 0, 4, 16
X32_SYSCALL_BIT = 0x40000000

#: Every namespace flag of clone(2) (CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER,
#: NEWPID, NEWNET); unshare(2) also takes CLONE_NEWTIME (0x80), which clone uses for
#: the exit signal.
CLONE_NAMESPACE_FLAGS = 0x7E020000
UNSHARE_NAMESPACE_FLAGS = CLONE_NAMESPACE_FLAGS | 0x80


class Arch:
    """One machine's AUDIT_ARCH value and the system call numbers the filter needs."""

    def __init__(self, audit_arch: int, numbers: dict[str, int], x32: bool) -> None:
        self.audit_arch = audit_arch
        self.numbers = numbers
        self.x32 = x32  # whether calls with X32_SYSCALL_BIT set reach another ABI


_SHARED = {  # numbered alike on every architecture since Linux 5.1
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "clone3": 435,
    "mount_setattr": 442,
}

ARCHES = {
    "x86_64": Arch(
        0xC000003E,
        {
            "clone": 56,
            "unshare": 272,
            "setns": 308,
            "bpf": 321,
            "userfaultfd": 323,
            "perf_event_open": 298,
            "keyctl": 250,
            "add_key": 248,
            "request_key": 249,
            "kexec_load": 246,
            "kexec_file_load": 320,
            "open_by_handle_at": 304,
            "init_module": 175,
            "finit_module": 313,
            "delete_module": 176,
            "mount": 165,
            "umount2": 166,
            "pivot_root": 155,
            "mq_open": 240,
            **_SHARED,
        },
        x32=True,
    ),
    "aarch64": Arch(
        0xC00000B7,
        {
            "clone": 220,
            "unshare": 97,
            "setns": 268,
            "bpf": 280,
            "userfaultfd": 282,
            "perf_event_open": 241,
            "keyctl": 219,
            "add_key": 217,
            "request_key": 218,
            "kexec_load": 104,
            "kexec_file_load": 294,
            "open_by_handle_at": 265,
            "init_module": 105,
            "finit_module": 273,
            "delete_module": 106,
            "mount": 40,
            "umount2": 39,
            "pivot_root": 41,
            "mq_open": 180,
            **_SHARED,
        },
        x32=False,
    ),
}

#: Refused outright with EPERM, as a missing privilege would be.
DENIED = (
    "setns",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "bpf",
    "userfaultfd",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
    "kexec_load",
    "kexec_file_load",
    "open_by_handle_at",
    "init_module",
    "finit_module",
    "delete_module",
    "mount",
    "umount2",
    "pivot_root",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
)
#: Refused only with a namespace flag (clone and unshare also serve plain forks and
#: threads); clone3 keeps its flags in memory a filter cannot read, so it answers
#: ENOSYS and the C library falls back to clone.
FLAG_FILTERED = {"clone": CLONE_NAMESPACE_FLAGS, "unshare": UNSHARE_NAMESPACE_FLAGS}
NOT_IMPLEMENTED = ("clone3",)


def policy_names(refuse_mq_open: bool) -> list[str]:
    """The calls the filter denies (some only with namespace flags), for the host to check."""
    names = [*DENIED, *FLAG_FILTERED, *NOT_IMPLEMENTED]
    return [*names, "mq_open"] if refuse_mq_open else names


def verdicts(arch: Arch, refuse_mq_open: bool) -> dict[int, str]:
    """System call number to what the filter does with it: "eperm", "enosys", or
    "flags <name>" (refused only with a namespace flag). Calls not listed are allowed."""
    table = {arch.numbers[name]: "eperm" for name in DENIED}
    for name in [*NOT_IMPLEMENTED, *(["mq_open"] if refuse_mq_open else [])]:
        table[arch.numbers[name]] = "enosys"
    for name in FLAG_FILTERED:
        table[arch.numbers[name]] = f"flags {name}"
    return table


#: Listed calls a search-tree leaf compares one by one (more take a branch first).
LEAF_SIZE = 3


def build_program(arch: Arch, refuse_mq_open: bool) -> bytes:
    """The filter as classic BPF for `arch`.

    `refuse_mq_open` adds mq_open (ENOSYS) for where no /dev/mqueue lets a reset
    find POSIX queues again (gVisor). Calls of another ABI (32-bit, x32) are refused
    whole: the numbers below would not name the same calls there.

    The listed calls are found by a binary search on the call number (a branch per
    level, then at most LEAF_SIZE comparisons), so an allowed call, which is nearly
    every call a program makes, passes in about ten instructions rather than one
    comparison per listed call. The filter runs on every system call of the sandbox.
    """
    eperm = SECCOMP_RET_ERRNO | errno.EPERM
    enosys = SECCOMP_RET_ERRNO | errno.ENOSYS
    code: list[tuple[int, object, object, int]] = []  # jumps name labels until resolved
    labels: dict[str, int] = {}

    def emit(op: int, k: int, jt: object = 0, jf: object = 0) -> None:
        code.append((op, jt, jf, k))

    def label(name: str) -> None:
        labels[name] = len(code)

    def search(entries: list[tuple[int, str]]) -> None:
        """Jump to the verdict of the call number in the accumulator, or allow it."""
        if len(entries) <= LEAF_SIZE:
            for number, verdict in entries:
                emit(BPF_JEQ_K, number, verdict, 0)
            emit(BPF_RET_K, SECCOMP_RET_ALLOW)
            return
        middle = len(entries) // 2
        upper = f"from {entries[middle][0]}"
        emit(BPF_JGE_K, entries[middle][0], upper, 0)  # classic BPF only jumps forward
        search(entries[:middle])
        label(upper)
        search(entries[middle:])

    emit(BPF_LD_W_ABS, ARCH_OFFSET)
    emit(BPF_JEQ_K, arch.audit_arch, 0, "enosys")
    emit(BPF_LD_W_ABS, NR_OFFSET)
    if arch.x32:
        emit(BPF_JGE_K, X32_SYSCALL_BIT, "enosys", 0)
    search(sorted(verdicts(arch, refuse_mq_open).items()))
    for name, flags in FLAG_FILTERED.items():
        label(f"flags {name}")
        emit(BPF_LD_W_ABS, ARG0_OFFSET)
        emit(BPF_JSET_K, flags, "eperm", 0)
        emit(BPF_RET_K, SECCOMP_RET_ALLOW)
    label("eperm")
    emit(BPF_RET_K, eperm)
    label("enosys")
    emit(BPF_RET_K, enosys)

    program = bytearray()
    for index, (op, jt, jf, k) in enumerate(code):
        offsets = []
        for target in (jt, jf):
            offset = labels[target] - index - 1 if isinstance(target, str) else target
            if not 0 <= offset <= 255:  # type: ignore[operator]
                raise ValueError(f"seccomp jump out of range at instruction {index}")
            offsets.append(offset)
        program += struct.pack("=HBBI", op, offsets[0], offsets[1], k)
    return bytes(program)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(refuse_mq_open: bool) -> list[str]:
    """Install the filter on this process (and so on all it will start).

    Returns the names of the calls it denies. Raises OSError when it cannot be
    installed, and the runner then refuses to start: a sandbox without its policy
    must not exist.
    """
    machine = os.uname().machine
    arch = ARCHES.get(machine)
    if arch is None:
        raise OSError(
            errno.ENOSYS, f"vfgym's seccomp policy knows x86_64 and aarch64, not {machine}"
        )
    program = build_program(arch, refuse_mq_open)
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(code)}")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"installing the seccomp filter failed: {os.strerror(code)}")
    return policy_names(refuse_mq_open)
