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

import ast
import base64
import builtins
import ctypes
import errno
import json
import linecache
import os
import resource
import selectors
import signal
import socket
import stat
import sys
import time
import traceback
import types

# Copied beside this file into the image; the session drops them (see kernel_main).
from vfgym_runner import seccomp_filter
from vfgym_runner.capture import Capture
from vfgym_runner.protocol import HEADER, Protocol, ProtocolError
from vfgym_runner.sysv_ipc import SysvIpc

PROTOCOL_VERSION = 2
WORKSPACE = os.environ.get("VFGYM_WORKSPACE", "/workspace")
RUNNER_PATH = os.path.abspath(__file__)
#: The argument that makes runner.py start as the Python session (see start_kernel).
KERNEL_FLAG = "--kernel"
#: Directories every user can write to, emptied between users. /dev/mqueue holds
#: POSIX message queues, which outlive the processes that made them (where it is
#: missing, as under gVisor, the seccomp filter keeps any from being made).
SCRATCH_DIRS = ("/tmp", "/dev/shm", "/dev/mqueue")
#: How long a reset waits for state that dies a moment after its processes (Unix
#: sockets the kernel's collector frees, TCP connections closing on loopback).
SETTLE_WAIT_S = 0.25
TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
#: Present where the kernel is Linux's (runc), which lists TIME_WAIT connections in
#: TCP_TABLES; gVisor has neither this file nor such a listing.
TIME_WAIT_SYSCTL = "/proc/sys/net/ipv4/tcp_max_tw_buckets"
SHELLS = ("/bin/bash", "/bin/sh")
PR_SET_DUMPABLE = 4
KILL_PASSES = 200
#: How long `kill_others` keeps looking for strays once it has found some.
STRAY_CONFIRM_S = 2.0

#: /proc/<pid>/stat's flag of a process in its exit, and SIGKILL's bit in a signal mask.
PF_EXITING = 0x4
SIGKILL_BIT = 1 << (signal.SIGKILL - 1)
#: Where /proc/<pid>/stat has the process's thread count, counted after the ")".
STAT_NUM_THREADS = 17

#: machine: (ioprio_get, ioprio_set) system call numbers (Python wraps neither).
IOPRIO_SYSCALLS = {"x86_64": (252, 251), "aarch64": (31, 30)}
IOPRIO_WHO_PROCESS = 1

_libc = ctypes.CDLL(None, use_errno=True)


# --------------------------------------------------------------------------- processes


def set_dumpable(value: bool) -> None:
    _libc.prctl(PR_SET_DUMPABLE, 1 if value else 0, 0, 0, 0)


def ignorable_signals() -> list[signal.Signals]:
    """Every signal the runner can ignore: all but SIGKILL, SIGSTOP and SIGCHLD."""
    skip = {signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD}
    return [sig for sig in signal.valid_signals() if sig not in skip]


def reset_signals(for_exec: bool) -> None:
    """Give a child the signal dispositions its program expects.

    The runner ignores almost every signal (see main) and ignored signals stay
    ignored across exec, so children get the defaults back. The Python session
    keeps Python's own: SIGPIPE and SIGXFSZ ignored, so writes raise instead.
    """
    signal.set_wakeup_fd(-1)
    for sig in [*ignorable_signals(), signal.SIGCHLD]:
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    if not for_exec:
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def prepare_child(
    stdout_fd: int, stderr_fd: int, keep: tuple[int, ...] = (), for_exec: bool = True
) -> None:
    """Runs in a freshly forked child before it becomes user code."""
    os.setsid()
    reset_signals(for_exec)
    try:
        with open("/proc/self/oom_score_adj", "w") as handle:
            handle.write("1000")
    except OSError:
        pass
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(stdout_fd, 1)
    os.dup2(stderr_fd, 2)
    for fd in list_fds():
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    os.chdir(WORKSPACE)


def report_exec_failure(shell: str, exc: BaseException) -> None:
    """Tell the caller, on the command's stderr, why its shell could not start."""
    if isinstance(exc, OSError) and exc.errno == errno.E2BIG:
        reason = (
            "the command is too long to run (Linux allows 128 KiB per command line); "
            "write the script to a file in the workspace and run the file instead"
        )
    elif isinstance(exc, ValueError) and "null" in str(exc):
        reason = "the command contains a NUL character, which a command line cannot carry"
    else:
        reason = f"cannot start the shell: {exc}"
    try:
        os.write(2, f"{shell}: {reason}\n".encode())
    except OSError:
        pass


def list_fds() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 1024))


def other_pids(keep: set[int]) -> list[int]:
    """Every live process in the container except those in `keep`.

    A zombie is one whose every thread is gone. The state field alone does not say
    so: a process whose main thread exited while its other threads run shows "Z"
    too (its thread count is above one), and skipping it would let it outlive every
    cleanup while it stays out of sight.
    """
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        if pid in keep:
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if not fields:
            continue
        threads = int(fields[STAT_NUM_THREADS]) if len(fields) > STAT_NUM_THREADS else 0
        if fields[0] not in (b"Z", b"X") or threads > 1:
            pids.append(pid)
    return pids


def oom_kills() -> int | None:
    """The container's OOM-kill counter (cgroup v1 or v2), or None when unreadable."""
    for path in ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"):
        try:
            with open(path) as handle:
                for line in handle:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


def exit_code_of(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


# --------------------------------------------------------------------------- kernel


def shorten_repr(text: str, limit: int) -> str:
    """`text` cut to about `limit` characters, keeping its head and tail."""
    if len(text) <= limit:
        return text
    return text[: limit // 2] + "\n[... repr truncated ...]\n" + text[-limit // 2 :]


def reply_limit(output_limit: int) -> int:
    """The most bytes a session's reply may take: a value of `output_limit` characters,
    each escaped by JSON into at most 12 bytes, and the rest of the reply."""
    return 12 * output_limit + 4096


class _Displayhook:
    """Shows a trailing expression's repr on stdout, like the interactive prompt.

    The repr goes to stdout whole (where the runner keeps its head and tail); the
    value sent back is cut here, so a huge repr never travels to the runner twice.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.value: str | None = None

    def __call__(self, value: object) -> None:
        if value is None:
            return
        builtins._ = value  # type: ignore[attr-defined]
        text = repr(value)
        self.value = shorten_repr(text, self.limit)
        sys.stdout.write(text)  # not text + "\n": that would copy a huge repr once more
        sys.stdout.write("\n")


def kernel_entry(argv: list[str]) -> None:
    """Start as the Python session: `runner.py --kernel REQUEST_FD REPLY_FD WORKSPACE`.

    The runner execs this rather than forking itself, so the session holds none of
    the runner's memory (its key above all)."""
    global WORKSPACE
    ctl_in, ctl_out, WORKSPACE = int(argv[0]), int(argv[1]), argv[2]
    for fd in (ctl_in, ctl_out):
        os.set_inheritable(fd, False)  # the session's own subprocesses never get them
    kernel_main(ctl_in, ctl_out)


def kernel_main(ctl_in: int, ctl_out: int) -> None:
    """The persistent Python process: one cell per request, shared globals."""
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = module
    sys.argv = [""]
    runner_dir = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [WORKSPACE, *(entry for entry in sys.path if entry != runner_dir)]
    for name in [name for name in sys.modules if name.partition(".")[0] == "vfgym_runner"]:
        del sys.modules[name]  # the runner's own modules never shadow the user's
    set_dumpable(True)
    # When a call leaves children behind, the runner stops every process (the session
    # too) and kills the strays. gVisor then sends SIGHUP to the session's process
    # group, orphaned with a stopped member; Linux does not. A handler, rather than
    # SIG_IGN which exec would pass on to the session's subprocesses, keeps it alive.
    signal.signal(signal.SIGHUP, lambda signum, frame: None)
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(line_buffering=True)
    counter = 0
    while True:
        header = read_exact(ctl_in, HEADER.size)
        body = read_exact(ctl_in, HEADER.unpack(header)[0])
        reap_leftovers()
        counter += 1
        request = json.loads(body)
        outcome = run_cell(request["code"], module.__dict__, counter, request["value_limit"])
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        reply = json.dumps(outcome).encode()
        os.write(ctl_out, HEADER.pack(len(reply)) + reply)


def is_dying(pid: int) -> bool:
    """True when process `pid` is exiting or has a SIGKILL pending: it is gone in a
    moment, though `waitpid` cannot collect it yet."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        with open(f"/proc/{pid}/status", "rb") as handle:
            status = handle.read()
    except OSError:
        return False
    if fields[0] in (b"Z", b"X") or int(fields[6]) & PF_EXITING:
        return True
    for line in status.splitlines():
        if line.startswith((b"SigPnd:", b"ShdPnd:")) and int(line.split()[1], 16) & SIGKILL_BIT:
            return True
    return False


def reap_leftovers() -> None:
    """Collect children that earlier cells left behind (the runner killed them when those
    cells ended), so they do not linger as zombies."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def read_exact(fd: int, size: int) -> bytes:
    """Read exactly `size` bytes from a blocking fd; exit the kernel when the runner is gone."""
    data = bytearray()
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            os._exit(0)
        data += chunk
    return bytes(data)


def run_cell(code: str, namespace: dict, counter: int, value_limit: int) -> dict:
    filename = f"<cell {counter}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    hook = _Displayhook(value_limit)
    exit_code = 0
    try:
        tree = ast.parse(code, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Interactive(body=[tree.body.pop()])
        exec(compile(tree, filename, "exec"), namespace)
        if last is not None:
            sys.displayhook = hook
            exec(compile(last, filename, "single"), namespace)
    except SystemExit as exc:
        if exc.code is None:
            exit_code = 0
        elif isinstance(exc.code, int):
            exit_code = exc.code
        else:
            sys.stderr.write(f"{exc.code}\n")
            exit_code = 1
    except BaseException as exc:
        tb = exc.__traceback__
        while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell"):
            tb = tb.tb_next
        sys.stderr.write("".join(traceback.format_exception(type(exc), exc, tb)))
        exit_code = 1
    return {"exit_code": exit_code, "value": hook.value}


# --------------------------------------------------------------------------- runner


class RunnerError(Exception):
    """A request the runner refuses; `kind` tells the host which exception to raise."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Runner:
    def __init__(self, protocol: Protocol, denied_calls: list[str]) -> None:
        self.protocol = protocol
        #: What the seccomp filter every process here inherits denies (see main).
        self.denied_calls = denied_calls
        self.statuses: dict[int, int] = {}
        self.kernel_pid: int | None = None
        self.kernel_fds: dict[str, int] = {}
        self.sysv_ipc = SysvIpc()
        self.tcp = TcpLeftovers()
        # Before any user code runs: what every reset puts back (see process_settings).
        self.settings = process_settings()
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.wake_fd = wake_r
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.base_env = {
            "HOME": WORKSPACE,
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "TERM": "dumb",
        }

    # -- children and cleanup

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.statuses[pid] = status

    def _drain_wakeups(self) -> None:
        try:
            while os.read(self.wake_fd, 4096):
                pass
        except BlockingIOError:
            pass

    def kill_others(self, keep_kernel: bool) -> None:
        """Kill every process except the runner (and the kernel when asked), then reap."""
        keep = {os.getpid()}
        if keep_kernel and self.kernel_pid is not None:
            keep.add(self.kernel_pid)
        else:
            self.stop_kernel()
        # kill(-1) reaches every process but the runner in one sweep that a fork
        # cannot slip past, whereas pid-by-pid kills race a fork bomb. With the
        # kernel kept, the sweep sends SIGSTOP (stopped processes cannot fork);
        # everything but the kernel is then killed and the kernel continued.
        sweep = signal.SIGSTOP if len(keep) > 1 else signal.SIGKILL
        if sweep == signal.SIGKILL:
            # Sent whatever /proc shows, so that no process out of its sight survives.
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
        try:
            deadline = time.monotonic() + STRAY_CONFIRM_S
            while self._sweep(keep, sweep):
                # There were strays (a fork bomb, say): look again after a pause, since
                # a process can be missed by a pass; the usual call (no strays) skips this.
                time.sleep(0.01)
                self.reap()
                if not other_pids(keep) or time.monotonic() > deadline:
                    break
        finally:
            if sweep == signal.SIGSTOP:
                try:
                    os.kill(self.kernel_pid, signal.SIGCONT)
                except OSError:
                    pass
        self.reap()

    def _sweep(self, keep: set[int], sweep: int) -> bool:
        """Up to KILL_PASSES passes of `kill_others`; True when there was anything to kill."""
        found = False
        for _ in range(KILL_PASSES):
            pids = other_pids(keep)
            if not pids:
                break
            found = True
            try:
                os.kill(-1, sweep)
            except OSError:
                pass
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            self.reap()
            time.sleep(0.001)
        return found

    # -- kernel

    def start_kernel(self) -> None:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # becomes the kernel: a fresh interpreter, none of the runner's memory
            try:
                for fd in (out_r, err_r, req_w, rep_r):
                    os.close(fd)
                prepare_child(out_w, err_w, keep=(req_r, rep_w))
                for fd in (req_r, rep_w):
                    os.set_inheritable(fd, True)
                argv = [sys.executable, "-s", RUNNER_PATH, KERNEL_FLAG]
                argv += [str(req_r), str(rep_w), WORKSPACE]
                os.execve(sys.executable, argv, self.base_env)
            except BaseException as exc:
                report_exec_failure("the Python session", exc)
            finally:
                os._exit(70)
        self.statuses.pop(pid, None)  # a reaped orphan's status under a pid reused since
        for fd in (out_w, err_w, req_r, rep_w):
            os.close(fd)
        for fd in (out_r, err_r, rep_r):
            os.set_blocking(fd, False)
        self.kernel_pid = pid
        self.kernel_fds = {"stdout": out_r, "stderr": err_r, "request": req_w, "reply": rep_r}

    def _await_exit(self, pid: int, seconds: float) -> None:
        """Give a dying child a moment to exit so its real status is known."""
        deadline = time.monotonic() + seconds
        while pid not in self.statuses and time.monotonic() < deadline:
            self.reap()
            time.sleep(0.002)

    def _forget_kernel(self) -> None:
        for fd in self.kernel_fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self.kernel_fds = {}
        self.kernel_pid = None

    def restart_dead_kernel(self) -> bool:
        """Drop a session that died since the last call (a shell command killed it, the
        OOM killer chose it, it exited by itself); True when it did, so the call that
        runs in its replacement can say that the variables are gone."""
        self.reap()
        pid = self.kernel_pid
        if pid is not None and pid not in self.statuses and is_dying(pid):
            # Killed a moment ago (`kill -9` from a shell command returns before the
            # process is gone): code sent to it now would be lost with it.
            self._await_exit(pid, 1.0)
        if self.kernel_pid is None or self.kernel_pid not in self.statuses:
            return False
        self.stop_kernel()
        return True

    def stop_kernel(self) -> None:
        pid = self.kernel_pid
        if pid is not None and pid not in self.statuses:
            try:
                os.kill(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
                self.statuses[pid] = status
            except (ProcessLookupError, ChildProcessError):
                pass
        if pid is not None:
            self.statuses.pop(pid, None)
        self._forget_kernel()

    # -- running code

    def _pump(
        self,
        fds: dict[int, Capture],
        until,
        deadline: float,
        extra: int | None = None,
        on_extra=None,
    ) -> bool:
        """Read output until `until()` is true or the deadline passes (returns False then)."""
        selector = selectors.DefaultSelector()
        try:
            for fd in fds:
                selector.register(fd, selectors.EVENT_READ)
            selector.register(self.wake_fd, selectors.EVENT_READ)
            if extra is not None:
                selector.register(extra, selectors.EVENT_READ)
            while True:
                self.reap()
                if until():
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                for key, _ in selector.select(min(remaining, 0.5)):
                    fd = key.fd
                    if fd == self.wake_fd:
                        self._drain_wakeups()
                    elif fd == extra:
                        on_extra()
                    else:
                        self._read_into(fd, fds[fd], selector)
        finally:
            selector.close()

    @staticmethod
    def _read_into(fd: int, capture: Capture, selector=None) -> None:
        try:
            for _ in range(64):
                data = os.read(fd, 65536)
                if not data:
                    if selector is not None:
                        selector.unregister(fd)
                    return
                capture.feed(data)
        except BlockingIOError:
            return
        except OSError:
            if selector is not None:
                selector.unregister(fd)

    @staticmethod
    def _drain(fds: dict[int, Capture]) -> None:
        for fd, capture in fds.items():
            try:
                while True:
                    data = os.read(fd, 65536)
                    if not data:
                        break
                    capture.feed(data)
            except OSError:
                pass

    def _result(
        self,
        out: Capture,
        err: Capture,
        exit_code: int | None,
        timed_out: bool,
        oom_before: int | None,
        started: float,
        **extra,
    ) -> dict:
        oom_after = oom_kills()
        if oom_before is not None and oom_after is not None:
            oom_killed: bool | None = oom_after > oom_before
        else:
            oom_killed = None
        result = {
            "stdout": out.text(),
            "stderr": err.text(),
            "exit_code": exit_code,
            "timed_out": timed_out,
            "oom_killed": oom_killed,
            "truncated": out.truncated or err.truncated,
            "duration_s": time.monotonic() - started,
        }
        result.update(extra)
        return result

    def op_python(self, request: dict) -> dict:
        started = time.monotonic()
        deadline = started + float(request["timeout"])
        limit = int(request["output_limit"])
        lost_session = self.restart_dead_kernel()
        if self.kernel_pid is None:
            self.start_kernel()
        fds = self.kernel_fds
        kernel_pid = self.kernel_pid
        out, err = Capture(limit), Capture(limit)
        captures = {fds["stdout"]: out, fds["stderr"]: err}
        self._drain({fd: Capture(0) for fd in captures})  # stale output of an earlier call
        reply = bytearray()
        reply_eof = False
        oom_before = oom_kills()
        body = json.dumps({"code": request["code"], "value_limit": limit}).encode()
        try:
            os.write(fds["request"], HEADER.pack(len(body)) + body)
        except OSError:
            pass  # the kernel is gone; noticed below

        def read_reply() -> None:
            nonlocal reply_eof
            try:
                data = os.read(fds["reply"], 65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if data:
                reply.extend(data)
            else:
                reply_eof = True

        most = reply_limit(limit)

        def finished() -> bool:
            if reply_eof or kernel_pid in self.statuses:
                return True
            if len(reply) >= HEADER.size:
                (size,) = HEADER.unpack(bytes(reply[: HEADER.size]))
                # A reply longer than any real one is garbled (or written by the cell
                # itself): stop reading it rather than hold it all in the runner.
                return size > most or len(reply) >= HEADER.size + size
            return False

        done = self._pump(captures, finished, deadline, extra=fds["reply"], on_extra=read_reply)
        self._drain(captures)
        outcome = None
        if done and kernel_pid not in self.statuses and not reply_eof:
            outcome = parse_kernel_reply(reply, most)
            if outcome is not None:
                exit_code = outcome["exit_code"]
        value = None
        if outcome is not None:
            value = outcome.get("value")
            self.kill_others(keep_kernel=True)
            self._drain(captures)
        else:
            # Timed out, crashed, or garbled its reply: the interpreter state is lost.
            if done and kernel_pid not in self.statuses:
                self._await_exit(kernel_pid, 0.5)
            if done and kernel_pid in self.statuses:
                exit_code = exit_code_of(self.statuses[kernel_pid])
            else:
                exit_code = None if not done else -signal.SIGKILL
            self.kill_others(keep_kernel=False)  # also closes the kernel's pipes
        if isinstance(value, str):
            value = shorten_repr(value, limit)
        return self._result(
            out,
            err,
            exit_code,
            not done,
            oom_before,
            started,
            value=value,
            kernel_restarted=outcome is None or lost_session,
        )

    def op_shell(self, request: dict) -> dict:
        started = time.monotonic()
        deadline = started + float(request["timeout"])
        limit = int(request["output_limit"])
        shell = next((path for path in SHELLS if os.path.exists(path)), SHELLS[-1])
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        oom_before = oom_kills()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(out_r)
                os.close(err_r)
                prepare_child(out_w, err_w)
                os.execve(shell, [os.path.basename(shell), "-c", request["command"]], self.base_env)
            except BaseException as exc:
                report_exec_failure(shell, exc)
            finally:
                os._exit(127)
        self.statuses.pop(pid, None)  # a reaped orphan's status under a pid reused since
        os.close(out_w)
        os.close(err_w)
        os.set_blocking(out_r, False)
        os.set_blocking(err_r, False)
        out, err = Capture(limit), Capture(limit)
        captures = {out_r: out, err_r: err}
        try:
            done = self._pump(captures, lambda: pid in self.statuses, deadline)
            self._drain(captures)
            exit_code = exit_code_of(self.statuses.pop(pid)) if done else None
            self.kill_others(keep_kernel=True)
            self.statuses.pop(pid, None)
            self._drain(captures)
        finally:
            os.close(out_r)
            os.close(err_r)
        return self._result(out, err, exit_code, not done, oom_before, started)

    # -- files

    def _open_parent(self, path: str, create: bool) -> tuple[int, str]:
        """Walk to the parent of `path` inside the workspace without following symlinks."""
        if path.startswith("/"):
            if path != WORKSPACE and not path.startswith(WORKSPACE + "/"):
                raise RunnerError("path", f"{path!r} is outside the workspace {WORKSPACE}")
            path = path[len(WORKSPACE) :]
        parts = [part for part in path.split("/") if part not in ("", ".")]
        if not parts:
            raise RunnerError("path", "the path names the workspace itself, not a file in it")
        if ".." in parts:
            raise RunnerError("path", f"{path!r} contains '..'; use a path inside the workspace")
        flags = os.O_RDONLY | os.O_DIRECTORY
        fd = os.open(WORKSPACE, flags | os.O_CLOEXEC)
        try:
            for part in parts[:-1]:
                try:
                    next_fd = open_no_symlink(part, flags, fd, path)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(part, 0o755, dir_fd=fd)
                    next_fd = open_no_symlink(part, flags, fd, path)
                os.close(fd)
                fd = next_fd
        except BaseException:
            os.close(fd)
            raise
        return fd, parts[-1]

    def op_write(self, request: dict) -> dict:
        data = base64.b64decode(request["data"])
        parent, name = self._open_parent(request["path"], create=True)
        try:
            mode = int(request.get("mode", 0o644)) & 0o777
            fd = open_regular_file(name, os.O_WRONLY | os.O_CREAT, parent, request["path"], mode)
            try:
                os.ftruncate(fd, 0)  # only now: O_TRUNC would act before the file was checked
                os.fchmod(fd, mode)  # open() applies the mode only to a new file, less umask
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
        finally:
            os.close(parent)
        return {"size": len(data)}

    def op_read(self, request: dict) -> dict:
        limit = int(request["max_bytes"])
        parent, name = self._open_parent(request["path"], create=False)
        try:
            fd = open_regular_file(name, os.O_RDONLY, parent, request["path"])
            try:
                info = os.fstat(fd)
                if info.st_size > limit:
                    raise RunnerError(
                        "too_large",
                        f"{request['path']!r} is {info.st_size} bytes, over the read limit of "
                        f"{limit} bytes; raise SandboxConfig.max_read_bytes to read it",
                    )
                chunks, total = [], 0
                while True:
                    chunk = os.read(fd, 1 << 20)
                    if not chunk:
                        break
                    total += len(chunk)
                    if total > limit:
                        raise RunnerError("too_large", f"{request['path']!r} grew over the limit")
                    chunks.append(chunk)
            finally:
                os.close(fd)
        finally:
            os.close(parent)
        return {"data": base64.b64encode(b"".join(chunks)).decode("ascii")}

    # -- reset

    def op_reset(self, request: dict) -> dict:
        """Kill every other process and wipe what they left; report what stays.

        What a reset cannot undo, since only a new container starts them afresh, are
        counters that the previous user moves and the next user can read: the pid
        counter (/proc/sys/kernel/ns_last_pid, the next session's own pid), the inode
        numbers of each tmpfs, System V IPC sequence numbers, the network namespace's
        counters (/proc/net/dev, /proc/net/snmp), the container's cgroup counters
        (peak memory, CPU time, OOM kills), the runner's own CPU time and context
        switches (/proc/1/stat), and the access times of /dev and /dev/pts. Code can
        encode a few bits in them for the next user of the same container; pools that
        must rule that out use `SandboxConfig(max_uses=1)`.
        """
        # First so that limits forced down on the runner cannot stop the wipe itself;
        # again once every other process is dead, which is the check that counts.
        restore_process_settings(self.settings)
        self.kill_others(keep_kernel=False)
        removed = 0
        problems = restore_process_settings(self.settings)
        # Before the wipe: a cycle of sockets in flight can hold files it would miss.
        problems.extend(settle_unix_sockets())
        problems.extend(self.tcp.check())
        problems.extend(restore_workspace_directory())
        for directory in (WORKSPACE, *SCRATCH_DIRS):
            try:
                removed += wipe_directory(directory)
            except OSError as exc:
                problems.append(f"{directory}: {exc}")
        problems.extend(settle_directory_times((WORKSPACE, *SCRATCH_DIRS)))
        ipc_problems = self.sysv_ipc.wipe()
        leftovers = [d for d in (WORKSPACE, *SCRATCH_DIRS) if os.path.isdir(d) and os.listdir(d)]
        processes = other_pids({os.getpid()})
        self.statuses.clear()
        if request.get("warm_kernel", True):
            self.start_kernel()
        clean = not leftovers and not processes and not ipc_problems and not problems
        return {
            "clean": clean,
            "removed": removed,
            "problems": problems + ipc_problems + [f"not empty: {d}" for d in leftovers],
            "processes": len(processes),
        }

    def op_ping(self, request: dict) -> dict:
        return {
            "protocol": PROTOCOL_VERSION,
            "pid": os.getpid(),
            "uid": os.getuid(),
            "python": sys.version.split()[0],
            "oom_counter": oom_kills() is not None,
            "seccomp": self.denied_calls,
        }

    # -- main loop

    def serve(self) -> None:
        handlers = {
            "ping": self.op_ping,
            "python": self.op_python,
            "shell": self.op_shell,
            "write": self.op_write,
            "read": self.op_read,
            "reset": self.op_reset,
        }
        while True:
            self.reap()
            try:
                request = self.protocol.read()
            except ProtocolError:
                # Not the host's: someone in the sandbox is on the stream. Stop (the
                # container ends and the host replaces it); never answer them.
                return
            except (ValueError, json.JSONDecodeError) as exc:
                self.protocol.write({"ok": False, "error": "protocol", "message": str(exc)})
                return
            if request is None:
                return
            handler = handlers.get(request.get("op"))
            try:
                if handler is None:
                    raise RunnerError("protocol", f"unknown op {request.get('op')!r}")
                response = {"ok": True, **handler(request)}
            except RunnerError as exc:
                response = {"ok": False, "error": exc.kind, "message": str(exc)}
            except FileNotFoundError as exc:
                message = f"no such file or directory: {request.get('path')!r}"
                response = {"ok": False, "error": "not_found", "message": message}
                del exc
            except OSError as exc:
                message = f"{request.get('op')} failed: {os.strerror(exc.errno or 0)} ({exc})"
                response = {"ok": False, "error": "os", "message": message}
            except Exception:
                message = traceback.format_exc(limit=5)
                response = {"ok": False, "error": "internal", "message": message}
            response["id"] = request.get("id")
            self.protocol.write(response)


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def open_no_symlink(name: str, flags: int, dir_fd: int, shown: str, mode: int = 0o644) -> int:
    """Open `name` in the directory `dir_fd`, refusing symlinks.

    O_NOFOLLOW alone is not enough: some runtimes (older gVisor) follow a symlink
    when opening with O_DIRECTORY. So the entry is checked with lstat before the
    open and compared with what was opened afterwards, which also catches a
    symlink swapped in between.
    """
    refusal = f"{shown!r} goes through a symlink ({name!r}); sandbox file access never follows them"
    try:
        before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        before = None
    if before is not None and stat.S_ISLNK(before.st_mode):
        raise RunnerError("path", refusal)
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RunnerError("path", refusal) from exc
        if exc.errno == errno.ENOTDIR:
            raise RunnerError("path", f"{name!r} in {shown!r} is not a directory") from exc
        raise
    try:
        opened = os.fstat(fd)
        now = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if (
            stat.S_ISLNK(now.st_mode)
            or not _same_file(now, opened)
            or (before is not None and not _same_file(before, opened))
        ):
            raise RunnerError("path", f"{shown!r} changed while it was opened; refusing it")
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular_file(name: str, flags: int, dir_fd: int, shown: str, mode: int = 0o644) -> int:
    """`open_no_symlink` for a file whose bytes are read or written: never a FIFO, a
    socket or a directory. Opening a FIFO to write blocks until someone reads it,
    which would hang the runner, so the entry is checked first and opened
    non-blocking (a FIFO swapped in meanwhile then fails or is caught by fstat)."""
    refusal = f"{shown!r} is not a regular file"
    try:
        before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        before = None
    if before is not None and not (stat.S_ISREG(before.st_mode) or stat.S_ISLNK(before.st_mode)):
        raise RunnerError("path", refusal)
    try:
        fd = open_no_symlink(name, flags | os.O_NONBLOCK, dir_fd, shown, mode)
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.EISDIR):
            raise RunnerError("path", refusal) from exc
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RunnerError("path", refusal)
    return fd


def parse_kernel_reply(reply: bytearray, most: int) -> dict | None:
    """The session's reply ({"exit_code", "value"}), or None when it is not one."""
    if len(reply) < HEADER.size:
        return None
    (size,) = HEADER.unpack(bytes(reply[: HEADER.size]))
    if size > most or len(reply) != HEADER.size + size:
        return None
    try:
        outcome = json.loads(bytes(reply[HEADER.size :]))
        outcome["exit_code"] = int(outcome["exit_code"])
    except (ValueError, KeyError, TypeError):
        return None
    value = outcome.get("value")
    if value is not None and not isinstance(value, str):
        return None
    return outcome


def _ioprio(new: int | None = None) -> int | None:
    """The runner's I/O priority, after setting it to `new` if given; None where the
    machine's system call numbers are unknown or the runtime lacks the calls."""
    calls = IOPRIO_SYSCALLS.get(os.uname().machine)
    if calls is None:
        return None
    if new is not None and _libc.syscall(calls[1], IOPRIO_WHO_PROCESS, 0, new) < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    value = _libc.syscall(calls[0], IOPRIO_WHO_PROCESS, 0)
    return None if value < 0 else value


def process_settings() -> dict[str, object]:
    """The runner's settings that its children inherit, the next user's Python session
    and shells among them, and that any process of the sandbox's uid can change from
    outside (Linux checks only the uids for these, not whether the runner is
    dumpable): resource limits, priority, scheduling policy, CPU affinity and I/O
    priority."""
    limits: dict[int, str] = {}  # one name per limit (RLIMIT_OFILE is RLIMIT_NOFILE)
    for name in sorted(dir(resource)):
        if name.startswith("RLIMIT_"):
            limits.setdefault(getattr(resource, name), name)
    settings: dict[str, object] = {
        name: resource.getrlimit(number) for number, name in limits.items()
    }
    settings["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
    settings["scheduling policy"] = os.sched_getscheduler(0)
    settings["CPU affinity"] = os.sched_getaffinity(0)
    settings["I/O priority"] = _ioprio()
    return settings


def _set_process_setting(name: str, value: object) -> None:
    if name.startswith("RLIMIT_"):
        resource.setrlimit(getattr(resource, name), value)  # type: ignore[arg-type]
    elif name == "nice":
        os.setpriority(os.PRIO_PROCESS, 0, value)  # type: ignore[arg-type]
    elif name == "scheduling policy":
        os.sched_setscheduler(0, value, os.sched_param(0))  # type: ignore[arg-type]
    elif name == "CPU affinity":
        os.sched_setaffinity(0, value)  # type: ignore[arg-type]
    elif name == "I/O priority":
        _ioprio(value)  # type: ignore[arg-type]


def restore_process_settings(baseline: dict[str, object]) -> list[str]:
    """Put back every setting of `process_settings` that differs from `baseline`.

    Returns what stays changed: a lowered hard limit, a raised nice value or the
    idle scheduling policy cannot be undone without privileges no process here has,
    so the reset reports the sandbox dirty and its pool replaces it."""
    try:
        for name, value in process_settings().items():
            if value != baseline[name]:
                try:
                    _set_process_setting(name, baseline[name])
                except (OSError, ValueError):
                    pass  # reported below
        current = process_settings()
    except OSError as exc:
        return [f"cannot read the runner's process settings: {exc}"]
    return [
        f"the runner's {name} was changed to {current[name]!r} (from {value!r}) by code "
        "in the sandbox and cannot be put back"
        for name, value in baseline.items()
        if current[name] != value
    ]


def restore_workspace_directory() -> list[str]:
    """Undo what user code can change on the workspace directory itself, which no wipe
    removes: its mode (it may have locked itself out) and its extended attributes
    (they would carry notes over to the next user); its times are set after the wipe
    (`settle_directory_times`). Returns problems."""
    problems = []
    try:
        os.chmod(WORKSPACE, 0o755)
    except OSError as exc:
        problems.append(f"{WORKSPACE}: {exc}")
    try:
        names = os.listxattr(WORKSPACE)
    except OSError as exc:
        if exc.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP):  # no xattrs here at all
            problems.append(f"{WORKSPACE} (extended attributes): {exc}")
        names = []
    for name in names:
        try:
            os.removexattr(WORKSPACE, name)
        except OSError as exc:
            problems.append(f"{WORKSPACE} (extended attribute {name}): {exc}")
    return problems


def settle_directory_times(directories: tuple[str, ...]) -> list[str]:
    """Set the times of every wiped directory to now, whether it was used or not.

    Otherwise one the previous user wrote to carries the time of the wipe that
    emptied it and one left alone an older time, so the next user could tell which
    were used, and when. Write access is enough to set them to now. Returns problems.
    """
    problems = []
    for directory in directories:
        try:
            os.utime(directory)
        except FileNotFoundError:
            continue  # /dev/mqueue is missing under gVisor
        except OSError as exc:
            problems.append(f"{directory} (times): {exc}")
    return problems


def proc_rows(path: str) -> list[str] | None:
    """The rows of a /proc table below its header; None when it cannot be read."""
    try:
        with open(path) as handle:
            return handle.read().splitlines()[1:]
    except OSError:
        return None


def settle_unix_sockets() -> list[str]:
    """Let the kernel free the Unix sockets that outlived every process; returns problems.

    With every other process dead the runner holds no socket, so any socket listed is
    held only by descriptors in flight: sent with SCM_RIGHTS into a queue that is
    itself in flight (a socket sent into its own queue). Such a cycle keeps alive all
    it carries: a bound abstract name the next user cannot bind, an unlinked file that
    keeps /tmp full, a memfd's memory. Linux frees it when its collector runs, which
    closing any Unix socket starts while descriptors are in flight, so the runner
    closes one and waits a moment; gVisor never frees such cycles, and the sandbox is
    then reported dirty so that its pool replaces it.
    """
    listed = proc_rows("/proc/net/unix")
    if listed is None:
        return ["cannot list the sandbox's Unix sockets (/proc/net/unix)"]
    deadline = time.monotonic() + SETTLE_WAIT_S
    while listed and time.monotonic() < deadline:
        for end in socket.socketpair():
            end.close()
        time.sleep(0.002)
        listed = proc_rows("/proc/net/unix") or []
    if listed:
        return [
            f"{len(listed)} Unix sockets outlived their processes (held by descriptors in flight)"
        ]
    return []


def tcp_opens() -> int | None:
    """TCP connections opened in the sandbox so far (ActiveOpens + PassiveOpens of
    /proc/net/snmp); None when they cannot be read."""
    rows = [row.split() for row in proc_rows("/proc/net/snmp") or [] if row.startswith("Tcp:")]
    if len(rows) < 2:
        return None
    counters = dict(zip(rows[0][1:], rows[1][1:], strict=False))
    try:
        return int(counters["ActiveOpens"]) + int(counters["PassiveOpens"])
    except (KeyError, ValueError):
        return None


class TcpLeftovers:
    """Finds TCP connections that outlive their processes.

    A closed connection waits in TIME_WAIT for a minute, keeping its port: the next
    user's bind() of it fails (EADDRINUSE) and, under Linux, /proc/net/tcp shows the
    previous user's ports. Where Linux is the kernel the container is made with no
    TIME_WAIT buckets (see `vfgym.sandbox.container`), so none is left, and any
    connection still listed once its processes are dead makes the reset dirty. The
    listing costs milliseconds (the kernel walks its whole connection table), so it
    is read only after a use that opened connections, as the namespace's counters
    tell. gVisor ignores that setting and lists no TIME_WAIT connection, so there a
    use that opened any TCP connection cannot be proven clean.
    """

    def __init__(self) -> None:
        self.listed = os.path.exists(TIME_WAIT_SYSCTL)
        self.opens = tcp_opens()

    def check(self) -> list[str]:
        """Problems with the TCP state the next user would inherit."""
        opens, self.opens = self.opens, tcp_opens()
        if opens is None or self.opens is None:
            return ["cannot count the sandbox's TCP connections (/proc/net/snmp)"]
        if self.opens == opens:
            return []  # no connection made since the last wipe: none can be left
        if not self.listed:
            return [
                "TCP connections were made since the last wipe, and this runtime can neither "
                "list nor refuse the TIME_WAIT that keeps their ports for a minute"
            ]
        deadline = time.monotonic() + SETTLE_WAIT_S
        while True:
            rows = [row for path in TCP_TABLES for row in proc_rows(path) or []]
            if not rows or time.monotonic() > deadline:
                break
            time.sleep(0.002)  # on loopback a dying connection closes within moments
        if rows:
            return [f"{len(rows)} TCP connections outlived their processes (e.g. in TIME_WAIT)"]
        return []


DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def wipe_directory(directory: str) -> int:
    """Remove everything inside `directory` (not the directory itself); never follows links.

    It walks by descriptor, one directory open at a time and without recursion, so
    no depth of tree and no length of path that user code can make stops it. It runs
    with every other process dead, so climbing back up through ".." is safe.
    """
    try:
        fd = os.open(directory, DIRECTORY_FLAGS)
    except FileNotFoundError:
        return 0
    removed = 0
    names: list[str] = []  # the path from `directory` down to `fd`
    try:
        while True:
            subdirectory = None
            with os.scandir(fd) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        subdirectory = entry.name
                        break
                    os.unlink(entry.name, dir_fd=fd)
                    removed += 1
            if subdirectory is not None:  # go down into it
                os.chmod(subdirectory, 0o700, dir_fd=fd)
                child = os.open(subdirectory, DIRECTORY_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
                names.append(subdirectory)
            elif names:  # empty now: go back up and remove it
                parent = os.open("..", DIRECTORY_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = parent
                os.rmdir(names.pop(), dir_fd=fd)
                removed += 1
            else:
                return removed
    finally:
        os.close(fd)


def has_mqueue_fs() -> bool:
    """True when /dev/mqueue is an mqueue filesystem, where the wipe finds POSIX queues."""
    try:
        with open("/proc/self/mounts") as handle:
            for line in handle:
                fields = line.split()
                if len(fields) > 2 and fields[1] == "/dev/mqueue" and fields[2] == "mqueue":
                    return True
    except OSError:
        pass
    return False


def main() -> None:
    if os.getpid() != 1:
        # Cleanup kills every other process it can signal: only safe as a container's init.
        sys.stderr.write("runner.py must run as PID 1 of a sandbox container; refusing to start\n")
        sys.exit(2)
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
        kernel_entry(sys.argv[2:])
    else:
        main()
