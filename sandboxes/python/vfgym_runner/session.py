"""The Python session: the one long-lived interpreter that runs user code.

It is a fresh interpreter that the runner starts with exec (`runner.py --kernel`),
not a fork of the runner, so it holds nothing of the runner's memory, above all
not the key that signs the protocol. It runs one cell per request in shared
globals, so variables and imports persist between calls, and it drops the
runner's own modules before any cell runs so that they never shadow a user's
module of the same name. The runner's side of its small reply format
(`parse_kernel_reply`, `reply_limit`) is here too, beside the code that writes it.

This module keeps `from __future__ import annotations`: cells are compiled here
and inherit this module's future flags, as they always have.
"""

from __future__ import annotations

import ast
import builtins
import json
import linecache
import os
import signal
import sys
import traceback
import types

from vfgym_runner.processes import set_dumpable
from vfgym_runner.protocol import HEADER

#: The directory of runner.py, which Python put on sys.path; the session takes it off.
RUNNER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
    ctl_in, ctl_out, workspace = int(argv[0]), int(argv[1]), argv[2]
    for fd in (ctl_in, ctl_out):
        os.set_inheritable(fd, False)  # the session's own subprocesses never get them
    kernel_main(ctl_in, ctl_out, workspace)


def kernel_main(ctl_in: int, ctl_out: int, workspace: str) -> None:
    """The persistent Python process: one cell per request, shared globals."""
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = module
    sys.argv = [""]
    sys.path[:] = [workspace, *(entry for entry in sys.path if entry != RUNNER_DIR)]
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
