"""The runner proper: the host's requests, dispatched one at a time to their ops.

It owns the sandbox's children: it starts the Python session (a fresh
interpreter, see session.py) and shell commands, reads their output, and after
each call kills whatever the call left behind; a reset also wipes what they left
(see wipe.py and limits.py). The reasons for each step are in runner.py's
docstring and beside the code.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback

from vfgym_runner.capture import Capture
from vfgym_runner.config import KERNEL_FLAG, PROTOCOL_VERSION, RUNNER_PATH, WORKSPACE
from vfgym_runner.errors import RunnerError
from vfgym_runner.files import read_file, write_file
from vfgym_runner.limits import process_settings, restore_process_settings
from vfgym_runner.output import call_result, drain, pump
from vfgym_runner.processes import (
    OomCounter,
    exit_code_of,
    is_dying,
    other_pids,
    prepare_child,
    report_exec_failure,
)
from vfgym_runner.protocol import HEADER, Protocol, ProtocolError
from vfgym_runner.session import parse_kernel_reply, reply_limit, shorten_repr
from vfgym_runner.sysv_ipc import SysvIpc
from vfgym_runner.wipe import (
    SCRATCH_DIRS,
    TcpLeftovers,
    restore_workspace_directory,
    settle_directory_times,
    settle_unix_sockets,
    wipe_directory,
)

SHELLS = ("/bin/bash", "/bin/sh")
KILL_PASSES = 200
#: How long `kill_others` keeps looking for strays once it has found some.
STRAY_CONFIRM_S = 2.0


class Runner:
    """Serves the host's requests, one at a time, and owns every child process."""

    def __init__(self, protocol: Protocol, denied_calls: list[str]) -> None:
        self.protocol = protocol
        #: What the seccomp filter every process here inherits denies (see main).
        self.denied_calls = denied_calls
        self.statuses: dict[int, int] = {}
        self.kernel_pid: int | None = None
        self.kernel_fds: dict[str, int] = {}
        self.sysv_ipc = SysvIpc()
        self.oom = OomCounter()
        self.pid = os.getpid()
        #: Whether something other than the session itself may have killed it since it
        #: last answered (a shell command, processes a call left behind), so that the
        #: next call checks it is not dying before sending it code.
        self.kernel_at_risk = False
        #: Set while a SIGSTOP sweep may have stopped the session (see kill_others).
        self.session_stopped = False
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

    def kill_others(self, keep_kernel: bool) -> bool:
        """Kill every process except the runner (and the kernel when asked), then reap.

        Returns whether there were any to kill: the usual call leaves none, and then
        the steps that only strays need (continuing the stopped session, reading what
        they wrote) are skipped, each system call being dear under gVisor."""
        keep = {self.pid}
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
        found = False
        try:
            deadline = time.monotonic() + STRAY_CONFIRM_S
            while self._sweep(keep, sweep):
                # There were strays (a fork bomb, say): look again after a pause, since
                # a process can be missed by a pass; the usual call (no strays) skips this.
                found = True
                time.sleep(0.01)
                self.reap()
                if not other_pids(keep) or time.monotonic() > deadline:
                    break
        finally:
            # Only a sweep that found strays sent SIGSTOP (and stopped the session too).
            if self.session_stopped:
                self.session_stopped = False
                try:
                    os.kill(self.kernel_pid, signal.SIGCONT)
                except OSError:
                    pass
        self.reap()
        return found

    def _sweep(self, keep: set[int], sweep: int) -> bool:
        """Up to KILL_PASSES passes of `kill_others`; True when there was anything to kill."""
        found = False
        for _ in range(KILL_PASSES):
            pids = other_pids(keep)
            if not pids:
                break
            found = True
            self.session_stopped = sweep == signal.SIGSTOP
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
        at_risk, self.kernel_at_risk = self.kernel_at_risk, False
        if at_risk and pid is not None and pid not in self.statuses and is_dying(pid):
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
        drain({fd: Capture(0) for fd in captures})  # stale output of an earlier call
        reply = bytearray()
        reply_eof = False
        oom_before = self.oom.read()
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

        done = pump(
            captures,
            finished,
            deadline,
            self.wake_fd,
            self.reap,
            extra=fds["reply"],
            on_extra=read_reply,
        )
        drain(captures)
        outcome = None
        if done and kernel_pid not in self.statuses and not reply_eof:
            outcome = parse_kernel_reply(reply, most)
            if outcome is not None:
                exit_code = outcome["exit_code"]
        value = None
        if outcome is not None:
            value = outcome.get("value")
            if self.kill_others(keep_kernel=True):
                self.kernel_at_risk = True  # a stray may have signalled it before dying
                drain(captures)  # what the strays wrote before they died
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
        return call_result(
            out,
            err,
            exit_code,
            not done,
            oom_before,
            self.oom.read(),
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
        oom_before = self.oom.read()
        self.kernel_at_risk = True  # the command may signal the session (kill -9, say)
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
            done = pump(captures, lambda: pid in self.statuses, deadline, self.wake_fd, self.reap)
            drain(captures)
            exit_code = exit_code_of(self.statuses.pop(pid)) if done else None
            self.kill_others(keep_kernel=True)
            self.statuses.pop(pid, None)
            drain(captures)
        finally:
            os.close(out_r)
            os.close(err_r)
        return call_result(out, err, exit_code, not done, oom_before, self.oom.read(), started)

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
        processes = other_pids({self.pid})
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
            "oom_counter": self.oom.read() is not None,
            "seccomp": self.denied_calls,
        }

    # -- main loop

    def serve(self) -> None:
        handlers = {
            "ping": self.op_ping,
            "python": self.op_python,
            "shell": self.op_shell,
            "write": write_file,
            "read": read_file,
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
