"""The in-container runner of a vfgym sandbox (standard library only).

It runs as PID 1 of the container so that code inside cannot kill it (the kernel
drops signals sent to a namespace's init unless it handles them) and so that it
reaps every orphaned zombie. It makes itself non-dumpable so that processes of
the same uid can neither ptrace it nor read its memory (nor, under runc, open its
file descriptors through /proc; gVisor allows that, see below).

The host speaks to it over the container's stdin/stdout, one request at a time.
Each message is a 4-byte big-endian length, then a 32-byte HMAC-SHA256 tag, then
UTF-8 JSON. Requests carry an "op" and an increasing "id"; responses carry "ok"
and either the op's fields or "error" and "message".

User code never inherits the protocol stream, but it cannot be kept from reaching
it: gVisor lets any process of the runner's uid open /proc/1/fd/N, so code could
read the host's requests off the stream and write replies of its own. Hence the
tags: the host's first request (sent before any user code exists) carries a
random key, every later frame in either direction is signed with it, and the
runner stops at a request it cannot verify, as the host gives up a sandbox at a
reply it cannot verify. The key lives only in the runner's memory, which no other
process can read (the runner is non-dumpable): the Python "kernel", the one
long-lived process that runs code (so variables and imports persist between
calls), is a fresh interpreter started with exec, not a fork of the runner; shell
commands run in a fresh bash per call. Output goes through pipes
that the runner reads, keeping only the head and tail of each stream. When a call
ends, every process it left behind is killed (also ones that called setsid); on a
timeout or reset everything except the runner dies, including the kernel.
"""

from __future__ import annotations

import os
import signal
import sys

# Copied beside this file into the image (precompiled there); the Python session
# imports only what it needs and then drops them (see vfgym_runner.session).
from vfgym_runner.config import KERNEL_FLAG, WORKSPACE
from vfgym_runner.processes import ignorable_signals, set_dumpable


def main() -> None:
    if os.getpid() != 1:
        # Cleanup kills every other process it can signal: only safe as a container's init.
        sys.stderr.write("runner.py must run as PID 1 of a sandbox container; refusing to start\n")
        sys.exit(2)
    # Here, not at the top: the Python session starts as this file too and needs none.
    from vfgym_runner import seccomp_filter
    from vfgym_runner.protocol import Protocol
    from vfgym_runner.server import Runner
    from vfgym_runner.wipe import has_mqueue_fs

    # Linux delivers to a namespace's init only the signals it handles, but gVisor
    # delivers the rest too: ignore every signal that could stop or kill the runner.
    for sig in ignorable_signals():
        try:
            signal.signal(sig, signal.SIG_IGN)
        except (OSError, ValueError):
            pass
    set_dumpable(False)
    # Before any other process exists, so that every process of the sandbox inherits
    # it. gVisor mounts no /dev/mqueue, where a reset would find POSIX queues again,
    # so there queues are refused too. Without the filter the runner does not start:
    # the host then reports why, and no sandbox runs without the policy.
    try:
        denied_calls = seccomp_filter.install(refuse_mq_open=not has_mqueue_fs())
    except OSError as exc:
        sys.stderr.write(f"vfgym runner: the sandbox's seccomp policy is not in force: {exc}\n")
        sys.exit(3)
    in_fd = os.dup(0)
    out_fd = os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # stderr stays: the runner's own tracebacks (user code never gets it)
        os.dup2(null, fd)
    os.close(null)
    os.makedirs(WORKSPACE, exist_ok=True)
    os.chdir(WORKSPACE)
    runner = Runner(Protocol(in_fd, out_fd), denied_calls)
    runner.serve()


if __name__ == "__main__":
    if sys.argv[1:2] == [KERNEL_FLAG]:
        from vfgym_runner.session import kernel_entry

        kernel_entry(sys.argv[2:])
    else:
        main()
