"""The runner's seccomp program, run instruction by instruction as the kernel would.

Every system call number (and the other ABIs, and clone/unshare with each namespace
flag) goes through the classic-BPF program the runner installs, for each
architecture it knows; the answer must be the policy's (from the host's
DENIED_CALLS, not from the program's own tables), and an allowed call must pass in
a few instructions, since the program runs on every system call of a sandbox. The
same program is proven in force in real sandboxes on both runtimes by
test_seccomp.py.
"""

from __future__ import annotations

import errno
import struct
from types import ModuleType

import pytest
from runner_filter import runner_filter_module

from vfgym.sandbox.seccomp import DENIED_CALLS

ALLOW = 0x7FFF0000
EPERM = 0x00050000 | errno.EPERM
ENOSYS = 0x00050000 | errno.ENOSYS
X32_SYSCALL_BIT = 0x40000000
#: The most instructions an allowed call may take (the header, a branch per level
#: of the search, a leaf's comparisons, the return).
MOST_STEPS_ALLOWED = 12
#: clone(2)'s namespace flags, one by one, and flags that are not namespaces.
NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000)
NAMESPACE_FLAGS += (0x40000000,)
PLAIN_FLAGS = (0, 17, 0x00000100 | 0x00000200 | 0x00000400 | 0x00000800 | 0x00010000)
CLONE_NEWTIME = 0x80


def run_program(program: bytes, nr: int, arch: int, arg0: int) -> tuple[int, int]:
    """The program's return value for one call, and the instructions it took."""
    data = struct.pack("=IIQ6Q", nr & 0xFFFFFFFF, arch, 0, arg0, 0, 0, 0, 0, 0)
    code = [struct.unpack_from("=HBBI", program, at) for at in range(0, len(program), 8)]
    pc = accumulator = steps = 0
    while True:
        op, jt, jf, k = code[pc]
        steps += 1
        if op == 0x20:  # load a word of seccomp_data
            accumulator = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif op == 0x15:  # jump if equal
            pc += 1 + (jt if accumulator == k else jf)
        elif op == 0x35:  # jump if greater or equal
            pc += 1 + (jt if accumulator >= k else jf)
        elif op == 0x45:  # jump if any bit set
            pc += 1 + (jt if accumulator & k else jf)
        elif op == 0x06:
            return k, steps
        else:
            raise AssertionError(f"instruction {pc} has an opcode the test does not know: {op:#x}")


def policy_answer(name: str | None, arg0: int, refuse_mq_open: bool) -> int:
    """What the policy says a call of `name` with first argument `arg0` gets."""
    if name == "mq_open":
        return ENOSYS if refuse_mq_open else ALLOW
    call = next((call for call in DENIED_CALLS if call.name == name), None)
    if call is None:
        return ALLOW
    if call.when == "ENOSYS":
        return ENOSYS
    if call.when == "namespace flags":
        flags = sum(NAMESPACE_FLAGS) | (CLONE_NEWTIME if name == "unshare" else 0)
        return EPERM if arg0 & flags else ALLOW
    return EPERM


@pytest.fixture(scope="module")
def module() -> ModuleType:
    return runner_filter_module()


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
@pytest.mark.parametrize("refuse_mq_open", [False, True], ids=["mqueue", "no mqueue"])
def test_every_call_number_gets_the_policys_answer(
    module: ModuleType, machine: str, refuse_mq_open: bool
) -> None:
    arch = module.ARCHES[machine]
    program = module.build_program(arch, refuse_mq_open)
    names = {number: name for name, number in arch.numbers.items()}
    wrong = []
    slowest_allowed = 0
    for nr in range(1024):
        name = names.get(nr)
        tries = (*NAMESPACE_FLAGS, *PLAIN_FLAGS, CLONE_NEWTIME)
        for arg0 in tries if name in ("clone", "unshare") else (0,):
            answer, steps = run_program(program, nr, arch.audit_arch, arg0)
            if answer != policy_answer(name, arg0, refuse_mq_open):
                wrong.append((nr, name, hex(arg0), hex(answer)))
            if answer == ALLOW:
                slowest_allowed = max(slowest_allowed, steps)
    assert wrong == [], wrong
    assert slowest_allowed <= MOST_STEPS_ALLOWED, slowest_allowed


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_calls_of_another_abi_are_refused_whole(module: ModuleType, machine: str) -> None:
    arch = module.ARCHES[machine]
    program = module.build_program(arch, refuse_mq_open=False)
    other_arch = 0x40000003  # i386
    for nr in (0, 1, 59, 272, 425):
        assert run_program(program, nr, other_arch, 0)[0] == ENOSYS
        if arch.x32:
            assert run_program(program, nr | X32_SYSCALL_BIT, arch.audit_arch, 0)[0] == ENOSYS
