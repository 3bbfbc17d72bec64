"""Hostile inputs, each in a pooled sandbox, under runc and under runsc.

Every test gets a sandbox that a "previous user" has marked (a variable, an
environment variable, files in the workspace, /tmp and /dev/shm). The `hostile`
fixture then checks, after the test, that the next user of the same pool sees a
clean sandbox and that the Docker host is unaffected.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from vfgym.sandbox import (
    DockerSandbox,
    SandboxFileError,
    SandboxFileNotFoundError,
    SandboxLostError,
    SandboxPathError,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")

SHORT = 1.5


def _host_file_digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _gvisor(sandbox: DockerSandbox) -> bool:
    return sandbox.config.runtime == "runsc"


async def _processes(sandbox: DockerSandbox) -> list[str]:
    """Live processes other than the runner and the Python session itself."""
    result = await sandbox.run_python(
        "import os\n"
        "me = os.getpid()\n"
        "out = []\n"
        "for n in os.listdir('/proc'):\n"
        "    if n.isdigit() and int(n) not in (1, me):\n"
        "        try:\n"
        "            s = open(f'/proc/{n}/stat').read().rsplit(')', 1)[1].split()[0]\n"
        "        except OSError:\n"
        "            continue\n"
        "        out.append(s)\n"
        "out"
    )
    assert result.exit_code == 0, result.summary()
    return eval(result.value or "[]")  # a list of one-letter states, from our own code


# ---------------------------------------------------------------- runaway code


async def test_infinite_loop(hostile: DockerSandbox) -> None:
    result = await hostile.run_python("while True:\n    pass", timeout=SHORT)
    assert result.timed_out and result.exit_code is None
    assert result.state_reset
    assert "timed out" in result.summary()
    assert await _processes(hostile) == []


async def test_long_sleep(hostile: DockerSandbox) -> None:
    result = await hostile.run_shell("sleep 600", timeout=SHORT)
    assert result.timed_out and result.exit_code is None
    assert await _processes(hostile) == []


async def test_cpu_burning_processes(hostile: DockerSandbox) -> None:
    command = "for i in 1 2 3 4 5 6; do (while :; do :; done) & done; wait"
    result = await hostile.run_shell(command, timeout=SHORT)
    assert result.timed_out
    assert await _processes(hostile) == []


async def test_fork_bomb(hostile: DockerSandbox) -> None:
    result = await hostile.run_shell(":(){ :|:& };:", timeout=2)
    assert result.exit_code is not None or result.timed_out
    assert not result.sandbox_lost
    assert await _processes(hostile) == []


async def test_thread_bomb(hostile: DockerSandbox) -> None:
    code = (
        "import threading, time\n"
        "threads = []\n"
        "while True:\n"
        "    t = threading.Thread(target=time.sleep, args=(600,), daemon=True)\n"
        "    t.start()\n"
        "    threads.append(t)\n"
    )
    result = await hostile.run_python(code, timeout=5)
    assert result.exit_code == 1, result.summary()
    assert "can't start new thread" in result.stderr or "RuntimeError" in result.stderr
    follow = await hostile.run_python("len(threads) > 10")
    assert follow.value == "True"


async def test_growing_memory(hostile: DockerSandbox) -> None:
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(8 * 1024 * 1024))"
    result = await hostile.run_python(code, timeout=20)
    assert not result.timed_out
    assert result.oom_killed, result.summary()
    assert "out of memory" in result.summary()
    if _gvisor(hostile):
        # gVisor's memory limit covers the whole sandbox: it goes down and the pool
        # replaces it (the `hostile` fixture checks the replacement is clean).
        assert result.sandbox_lost
    else:
        assert result.exit_code == -9 and result.state_reset and not result.sandbox_lost
        assert (await hostile.run_python("1 + 1")).value == "2"


async def test_one_huge_allocation(hostile: DockerSandbox) -> None:
    result = await hostile.run_python("x = bytearray(10**12)", timeout=10)
    assert result.exit_code != 0
    assert "MemoryError" in result.stderr or result.oom_killed, result.summary()


async def test_unbounded_recursion(hostile: DockerSandbox) -> None:
    result = await hostile.run_python("def f(n):\n    return f(n + 1)\nf(0)", timeout=10)
    assert result.exit_code == 1
    assert "RecursionError" in result.stderr
    assert not result.state_reset


async def test_unbounded_recursion_without_limit(hostile: DockerSandbox) -> None:
    code = "import sys\nsys.setrecursionlimit(10**8)\ndef f(n):\n    return f(n + 1)\nf(0)"
    result = await hostile.run_python(code, timeout=20)
    # Python 3.11 keeps Python frames on the heap, so this ends as memory exhaustion
    # (or as a C stack overflow in other builds): the session dies, never the host.
    assert result.exit_code != 0 and not result.timed_out, result.summary()
    assert result.state_reset
    if not result.sandbox_lost:
        assert (await hostile.run_python("'alive'")).value == "'alive'"


# ---------------------------------------------------------------- output floods


async def test_twenty_megabytes_to_stdout(hostile: DockerSandbox) -> None:
    code = "import sys\n_ = sys.stdout.write('a' + 'x' * 20_000_000 + 'z')"
    result = await hostile.run_python(code)
    limit = hostile.config.output_limit
    assert result.exit_code == 0
    assert result.truncated
    assert len(result.stdout.encode()) < limit + 200
    assert result.stdout.startswith("ax") and result.stdout.endswith("xz")
    assert "bytes omitted" in result.stdout


async def test_endless_stderr(hostile: DockerSandbox) -> None:
    code = "import sys\nwhile True:\n    sys.stderr.write('e' * 4096)"
    result = await hostile.run_python(code, timeout=SHORT)
    assert result.timed_out and result.truncated
    assert len(result.stderr.encode()) < hostile.config.output_limit + 200


async def test_binary_and_invalid_utf8(hostile: DockerSandbox) -> None:
    code = "import sys\nsys.stdout.buffer.write(bytes(range(256)) * 8 + b'\\xff\\xfe\\xc3')"
    result = await hostile.run_python(code)
    assert result.exit_code == 0
    assert "\ufffd" in result.stdout
    shell = await hostile.run_shell("head -c 5000 /dev/urandom; printf '\\xc3\\x28' >&2")
    assert shell.exit_code == 0 and isinstance(shell.stdout, str)


# ---------------------------------------------------------------- filesystem


async def test_filling_the_workspace(hostile: DockerSandbox) -> None:
    command = (
        "for i in $(seq 1 20); do head -c 8M /dev/zero > /workspace/fill$i || break; done; "
        "echo done"
    )
    result = await hostile.run_shell(command, timeout=30)
    assert "No space left on device" in result.stderr, result.summary()
    writable = await hostile.run_shell("rm -f /workspace/fill*; echo ok > /workspace/after")
    assert writable.exit_code == 0


async def test_one_file_over_the_size_limit(hostile: DockerSandbox) -> None:
    size = hostile.config.max_file_size + 1024 * 1024  # type: ignore[operator]
    result = await hostile.run_python(f"open('big.bin', 'wb').write(b'x' * {size})")
    assert result.exit_code == 1
    assert "File too large" in result.stderr, result.summary()


async def test_writing_to_the_root_filesystem(hostile: DockerSandbox) -> None:
    result = await hostile.run_shell("echo evil > /usr/evil; echo evil > /evil")
    assert result.exit_code != 0
    assert "Read-only file system" in result.stderr or "Permission denied" in result.stderr
    assert not Path("/usr/evil").exists() and not Path("/evil").exists()


async def test_appending_to_etc_passwd(hostile: DockerSandbox) -> None:
    before = _host_file_digest("/etc/passwd")
    result = await hostile.run_shell("echo 'evil:x:0:0::/:/bin/sh' >> /etc/passwd")
    assert result.exit_code != 0
    check = await hostile.run_shell("grep -c evil /etc/passwd")
    assert check.stdout.strip() == "0"
    assert _host_file_digest("/etc/passwd") == before


async def test_reading_etc_shadow(hostile: DockerSandbox) -> None:
    result = await hostile.run_shell("cat /etc/shadow")
    assert result.exit_code != 0
    assert "Permission denied" in result.stderr
    assert "root:" not in result.stdout


async def test_writing_proc_sys(hostile: DockerSandbox) -> None:
    before = Path("/proc/sys/kernel/hostname").read_text()
    result = await hostile.run_shell(
        "echo evil > /proc/sys/kernel/hostname; echo 1 > /proc/sys/vm/drop_caches"
    )
    assert result.exit_code != 0
    assert Path("/proc/sys/kernel/hostname").read_text() == before


# ---------------------------------------------------------------- network


async def test_outbound_connection(hostile: DockerSandbox) -> None:
    code = "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)"
    result = await hostile.run_python(code)
    assert result.exit_code == 1
    assert "OSError" in result.stderr or "unreachable" in result.stderr.lower()


async def test_dns_lookup(hostile: DockerSandbox) -> None:
    result = await hostile.run_python("import socket\nsocket.getaddrinfo('example.com', 443)")
    assert result.exit_code == 1
    assert "gaierror" in result.stderr or "OSError" in result.stderr


async def test_cloud_metadata_address(hostile: DockerSandbox) -> None:
    code = "import socket\nsocket.create_connection(('169.254.169.254', 80), timeout=2)"
    result = await hostile.run_python(code)
    assert result.exit_code == 1
    assert "Error" in result.stderr


async def test_looking_for_the_docker_socket(hostile: DockerSandbox) -> None:
    code = (
        "import os\n"
        "found = []\n"
        "for root in ('/var/run', '/run', '/var/lib', '/tmp', '/workspace'):\n"
        "    for d, _, files in os.walk(root):\n"
        "        found += [os.path.join(d, f) for f in files if 'docker' in f]\n"
        "found"
    )
    result = await hostile.run_python(code)
    assert result.value == "[]"
    connect = await hostile.run_python(
        "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('/var/run/docker.sock')"
    )
    assert connect.exit_code == 1


# ---------------------------------------------------------------- privileges


async def test_setuid_root(hostile: DockerSandbox) -> None:
    result = await hostile.run_python("import os\nos.setuid(0)")
    assert result.exit_code == 1
    assert "PermissionError" in result.stderr
    whoami = await hostile.run_python("import os\nos.getuid(), os.geteuid()")
    assert whoami.value == "(10001, 10001)"


async def test_mount(hostile: DockerSandbox) -> None:
    code = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "rc = libc.mount(b'none', b'/workspace', b'tmpfs', 0, None)\n"
        "(rc, os.strerror(ctypes.get_errno()))"
    )
    result = await hostile.run_python(code)
    assert result.value is not None and result.value.startswith("(-1,")
    shell = await hostile.run_shell("mount -t tmpfs none /workspace")
    assert shell.exit_code != 0


async def test_ptrace_of_the_runner(hostile: DockerSandbox) -> None:
    code = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "rc = libc.ptrace(16, 1, None, None)\n"  # PTRACE_ATTACH to PID 1, the runner
        "errors = []\n"
        "for path in ('/proc/1/environ', '/proc/1/mem', '/proc/1/fd/0'):\n"
        "    try:\n"
        "        open(path, 'rb').read(1)\n"
        "        errors.append('readable')\n"
        "    except OSError as exc:\n"
        "        errors.append(type(exc).__name__)\n"
        "(rc, errors)"
    )
    result = await hostile.run_python(code)
    assert result.exit_code == 0, result.summary()
    rc, errors = eval(result.value or "None")  # a tuple literal built by our own code
    assert rc == -1  # ptrace refused
    environ, mem, fd = errors
    assert mem != "readable"
    if not _gvisor(hostile):
        # The runner is non-dumpable: its environment and descriptors are off limits.
        # (gVisor 2022 does not apply that to /proc/1/environ and /proc/1/fd; see the
        # sandbox notes. The host treats the stream as untrusted either way.)
        assert environ != "readable" and fd != "readable"


# ---------------------------------------------------------------- processes


async def test_detached_setsid_child_outlives_the_call(hostile: DockerSandbox) -> None:
    result = await hostile.run_shell("setsid sleep 600 > /dev/null 2>&1 & echo started")
    assert result.exit_code == 0 and "started" in result.stdout
    code = (
        "import subprocess\n"
        "p = subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
        "p.pid > 0"
    )
    assert (await hostile.run_python(code)).value == "True"
    assert await _processes(hostile) == []


async def test_zombie_children(hostile: DockerSandbox) -> None:
    # Orphans whose parent exits are re-parented to the runner (PID 1) and reaped.
    shell = await hostile.run_shell("for i in $(seq 1 30); do (sleep 0.01 &); done; sleep 0.3")
    assert shell.exit_code == 0
    assert "Z" not in await _processes(hostile)
    # Children the session forks and never waits for are collected before its next cell.
    code = "import os\nfor _ in range(20):\n    if os.fork() == 0:\n        os._exit(0)\n'forked'"
    result = await hostile.run_python(code)
    assert result.value == "'forked'"
    assert await _processes(hostile) == []


async def test_exhausting_file_descriptors(hostile: DockerSandbox) -> None:
    code = "files = []\nwhile True:\n    files.append(open('/dev/null'))"
    result = await hostile.run_python(code, timeout=10)
    assert result.exit_code == 1
    assert "Too many open files" in result.stderr


async def test_killing_pid_1_and_the_runner(hostile: DockerSandbox) -> None:
    shell = await hostile.run_shell(
        "for s in TERM INT HUP QUIT USR1 USR2 ALRM PIPE SEGV ABRT TSTP XCPU; do kill -$s 1; done; "
        "echo sent"
    )
    assert "sent" in shell.stdout
    assert (await hostile.run_python("'still here'")).value == "'still here'"
    # `kill -9 -1` takes down every user process, the session too, never PID 1.
    result = await hostile.run_python("import subprocess\nsubprocess.run(['kill', '-9', '-1'])")
    assert result.exit_code == -9 and result.state_reset
    assert not result.sandbox_lost
    assert (await hostile.run_python("2 + 2")).value == "4"
    killed = await hostile.run_shell("kill -9 1; kill -STOP 1; echo sent")
    if _gvisor(hostile):
        # gVisor lets a process SIGKILL its sandbox's init: the sandbox is lost, the
        # call says so, and the pool replaces it.
        assert killed.sandbox_lost or "sent" in killed.stdout, killed.summary()
    else:
        # Linux drops SIGKILL/SIGSTOP sent to a namespace's init from inside it.
        assert "sent" in killed.stdout and not killed.sandbox_lost
        assert (await hostile.run_python("'still here'")).value == "'still here'"


async def test_input_with_no_stdin(hostile: DockerSandbox) -> None:
    result = await hostile.run_python("input('name? ')", timeout=5)
    assert not result.timed_out
    assert "EOFError" in result.stderr
    shell = await hostile.run_shell("read line; echo rc=$?", timeout=5)
    assert "rc=1" in shell.stdout


async def test_code_that_ignores_sigterm(hostile: DockerSandbox) -> None:
    code = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "time.sleep(600)"
    )
    result = await hostile.run_python(code, timeout=SHORT)
    assert result.timed_out
    shell = await hostile.run_shell("trap '' TERM INT HUP; sleep 600", timeout=SHORT)
    assert shell.timed_out
    assert await _processes(hostile) == []


async def test_filling_dev_shm_and_tmp(hostile: DockerSandbox) -> None:
    result = await hostile.run_shell(
        "head -c 64M /dev/zero > /dev/shm/fill; echo shm=$?; "
        "head -c 64M /dev/zero > /tmp/fill; echo tmp=$?"
    )
    assert "shm=1" in result.stdout and "tmp=1" in result.stdout, result.summary()
    assert "No space left on device" in result.stderr


# ---------------------------------------------------------------- file API


async def test_symlink_to_etc_passwd_is_not_followed(hostile: DockerSandbox) -> None:
    setup = await hostile.run_shell(
        "ln -s /etc/passwd /workspace/link && ln -s /etc /workspace/etcdir && echo ok"
    )
    assert setup.stdout.strip() == "ok"
    with pytest.raises(SandboxPathError, match="symlink"):
        await hostile.read_file("link")
    with pytest.raises(SandboxPathError, match="symlink"):
        await hostile.read_file("etcdir/passwd")
    with pytest.raises(SandboxPathError, match="symlink"):
        await hostile.write_file("link", b"evil")
    with pytest.raises(SandboxPathError, match="symlink"):
        await hostile.write_file("etcdir/evil", b"evil")
    check = await hostile.run_shell("grep -c evil /etc/passwd; ls /etc/evil")
    assert check.stdout.strip() == "0"


@pytest.mark.parametrize(
    "path", ["../etc/passwd", "/etc/passwd", "/workspace/../etc/x", "a/../../x", "/workspacex/y"]
)
async def test_escaping_paths_in_write_file(hostile: DockerSandbox, path: str) -> None:
    with pytest.raises(SandboxPathError):
        await hostile.write_file(path, b"evil")
    with pytest.raises(SandboxPathError):
        await hostile.read_file(path)


# ---------------------------------------------------------------- the runner's stream

# Runs as the first call of a fresh sandbox, so its request has id 2 (the ping that
# starts a sandbox is 1). Under gVisor, /proc/1/fd lets code of the sandbox's user
# open the runner's end of the host stream: the cell writes a reply for its own call,
# stops the runner and answers every later request (a reset, the next user's code)
# itself. Under runc the runner's descriptors are out of reach.
IMPERSONATE_THE_RUNNER = r"""
import json, os, signal, struct, threading, time
FORGED = "forged by the code under test"
def frame(message):
    body = json.dumps(message).encode()
    return struct.pack(">I", len(body)) + body
def reply(request_id):
    return frame({
        "ok": True, "clean": True, "removed": 0, "problems": [], "processes": 0,
        "stdout": FORGED, "stderr": "", "exit_code": 0, "timed_out": False,
        "oom_killed": False, "truncated": False, "duration_s": 0.0, "value": repr(FORGED),
        "id": request_id,
    })
def host_stream():
    readers, writers = [], []
    for name in os.listdir("/proc/1/fd"):
        if not os.readlink(f"/proc/1/fd/{name}").startswith("host:"):
            continue
        with open(f"/proc/1/fdinfo/{name}") as info:
            flags = int(info.read().split("flags:")[1].split()[0], 8)
        mode = os.O_RDONLY if flags & os.O_ACCMODE == os.O_RDONLY else os.O_WRONLY
        (readers if mode == os.O_RDONLY else writers).append(os.open(f"/proc/1/fd/{name}", mode))
    return readers, writers
def answer_everything(reader, writers):
    while True:
        data = os.read(reader, 1 << 20)
        if not data:
            return
        for fd in writers:
            try:
                os.write(fd, reply(json.loads(data[4:])["id"]))
            except OSError:
                pass
try:
    readers, writers = host_stream()
except OSError as exc:
    outcome = f"refused: {type(exc).__name__}"
else:
    for fd in writers:
        try:
            os.write(fd, reply(2))
        except OSError:
            pass
    for fd in readers:
        threading.Thread(target=answer_everything, args=(fd, writers), daemon=True).start()
    os.kill(1, signal.SIGSTOP)
    for _ in range(200):
        if open("/proc/1/stat").read().rsplit(")", 1)[1].split()[0] == "T":
            break
        time.sleep(0.01)
    outcome = "impersonating the runner"
outcome
"""


async def test_code_cannot_answer_for_the_runner(runtime: str, make_config: Any) -> None:
    async with DockerSandbox(make_config(runtime=runtime)) as sandbox:
        result = await sandbox.run_python(IMPERSONATE_THE_RUNNER, timeout=5)
        assert "forged" not in result.stdout + (result.value or ""), result.summary()
        if runtime == "runsc":
            # The stream was reachable, but a reply the runner did not sign is refused:
            # the sandbox is given up (a pool replaces it), never handed on.
            assert result.sandbox_lost and "did not sign" in result.stderr, result.summary()
            with pytest.raises(SandboxLostError):
                await sandbox.reset()
        else:
            assert result.value == "'refused: PermissionError'", result.summary()
            await sandbox.reset()
            assert (await sandbox.run_python("'fresh'")).value == "'fresh'"


async def test_the_session_holds_nothing_of_the_runner(hostile: DockerSandbox) -> None:
    # The runner's objects (its stream, the key that signs its replies) must not be in
    # the memory of the process that runs the model's code.
    code = (
        "import gc\nsorted({type(o).__name__ for o in gc.get_objects()} & {'Runner', 'Protocol'})"
    )
    result = await hostile.run_python(code)
    assert result.value == "[]", result.summary()


async def test_a_flood_on_the_sessions_reply_pipe(hostile: DockerSandbox) -> None:
    # The session answers the runner through a pipe; a cell can write to it directly,
    # here a reply that claims to be 2 GB long and keeps coming.
    code = (
        "import fcntl, os, stat, struct\n"
        "pipes = []\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        if stat.S_ISFIFO(os.fstat(fd).st_mode) and "
        "fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:\n"
        "            pipes.append(fd)\n"
        "    except OSError:\n"
        "        pass\n"
        "chunk = b'x' * (1 << 20)\n"
        "for fd in pipes:\n"
        "    os.write(fd, struct.pack('>I', 0x7FFFFFFF))\n"
        "    for _ in range(400):\n"
        "        os.write(fd, chunk)\n"
    )
    result = await hostile.run_python(code, timeout=20)
    assert not result.sandbox_lost, result.summary()
    assert result.state_reset and result.exit_code != 0, result.summary()
    assert (await hostile.run_python("'alive'")).value == "'alive'"


async def test_a_huge_value_as_the_last_expression(hostile: DockerSandbox) -> None:
    result = await hostile.run_python("'x' * 30_000_000", timeout=20)
    assert result.exit_code == 0 and not result.sandbox_lost, result.summary()
    assert result.value is not None and result.value.startswith("'xxx")
    assert len(result.value) < hostile.config.output_limit + 100
    assert result.truncated and "bytes omitted" in result.stdout


async def test_stopping_the_runner(hostile: DockerSandbox) -> None:
    result = await hostile.run_shell("kill -STOP 1; kill -TSTP 1; echo sent", timeout=SHORT)
    if _gvisor(hostile):
        # gVisor stops a sandbox's init: the call ends when its time (and the grace the
        # host allows) is up, as a lost sandbox the pool replaces.
        assert result.sandbox_lost or "sent" in result.stdout, result.summary()
    else:
        assert "sent" in result.stdout and not result.sandbox_lost, result.summary()
        assert (await hostile.run_python("'running'")).value == "'running'"


# ---------------------------------------------------------------- special files


async def test_writing_to_a_fifo_through_the_file_api(hostile: DockerSandbox) -> None:
    setup = await hostile.run_shell(
        'mkfifo /workspace/pipe && python3 -c "import socket; '
        "socket.socket(socket.AF_UNIX).bind('/workspace/sock')\" && echo ok"
    )
    assert setup.stdout.strip() == "ok", setup.summary()
    for name in ("pipe", "sock"):
        with pytest.raises(SandboxPathError, match="not a regular file"):
            await hostile.write_file(name, b"data")
    # A reader waiting in the session must not receive the bytes either.
    waiting = (
        "import threading\n"
        "got = []\n"
        "threading.Thread(target=lambda: got.append(open('pipe', 'rb').read()), daemon=True)"
        ".start()"
    )
    assert (await hostile.run_python(waiting)).exit_code == 0
    with pytest.raises(SandboxPathError, match="not a regular file"):
        await hostile.write_file("pipe", b"data")
    assert (await hostile.run_python("got")).value == "[]"


async def test_a_directory_tree_too_deep_to_name(hostile: DockerSandbox) -> None:
    # Deeper than Python's recursion limit, and longer than PATH_MAX as a path.
    code = (
        "import os\n"
        "for _ in range(2500):\n"
        "    os.mkdir('d' * 8)\n"
        "    os.chdir('d' * 8)\n"
        "open('bottom.txt', 'w').write('x')\n"
        "os.chdir('/tmp')\n"
        "for _ in range(50):\n"
        "    os.mkdir('t' * 200)\n"
        "    os.chdir('t' * 200)\n"
        "os.chdir('/workspace')\n"
        "len(os.getcwd())"
    )
    assert (await hostile.run_python(code, timeout=30)).value == "10"
    await hostile.reset()  # wiped, not given up
    listing = await hostile.run_python("import os\n(os.listdir('/workspace'), os.listdir('/tmp'))")
    assert listing.value == "([], [])", listing.summary()


async def test_very_long_paths_through_the_file_api(hostile: DockerSandbox) -> None:
    with pytest.raises(SandboxFileError, match="File name too long"):
        await hostile.read_file("a" * 5000)
    with pytest.raises(SandboxFileError, match="File name too long"):
        await hostile.write_file("b" * 300, b"x")
    deep = "d/" * 1500 + "x.txt"  # far past PATH_MAX, one directory at a time
    await hostile.write_file(deep, b"deep")
    assert await hostile.read_file(deep) == b"deep"
    await hostile.reset()
    assert (await hostile.run_python("import os\nos.listdir()")).value == "[]"


async def test_process_settings_do_not_outlive_a_reset(hostile: DockerSandbox) -> None:
    change = (
        "import os, resource\n"
        "os.umask(0o777)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (16, 16))\n"
        "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
        "os.nice(10)\n"
        "os.chdir('/tmp')\n"
    )
    assert (await hostile.run_python(change)).exit_code == 0
    await hostile.reset()
    look = (
        "import os, resource\n"
        "(oct(os.umask(0o022)), resource.getrlimit(resource.RLIMIT_NOFILE)[0], os.nice(0), "
        "os.getcwd())"
    )
    expected = f"('0o22', {hostile.config.max_open_files}, 0, '/workspace')"
    assert (await hostile.run_python(look)).value == expected
    shell = await hostile.run_shell("umask; ulimit -n; nice")
    assert shell.stdout.split() == ["0022", str(hostile.config.max_open_files), "0"]


async def test_links_out_of_the_workspace(hostile: DockerSandbox) -> None:
    result = await hostile.run_shell(
        "ln /etc/passwd /workspace/hard; ln /opt/vfgym/runner.py /workspace/runner; "
        "touch /tmp/x && ln /tmp/x /workspace/tmp; "
        "ln -s /proc/self/root /workspace/root; ln -s /proc/1/cwd /workspace/cwd; echo done"
    )
    assert result.stderr.count("Invalid cross-device link") == 3, result.summary()
    for path in ("hard", "runner", "tmp"):
        with pytest.raises(SandboxFileNotFoundError):
            await hostile.read_file(path)
    for path in ("root/etc/passwd", "cwd/marker.txt", "root/workspace/marker.txt"):
        with pytest.raises(SandboxPathError, match="symlink"):
            await hostile.read_file(path)
        with pytest.raises(SandboxPathError, match="symlink"):
            await hostile.write_file(path, b"evil")


# ---------------------------------------------------------------- privileges and network


async def test_no_privileges_to_gain(hostile: DockerSandbox) -> None:
    result = await hostile.run_shell(
        "grep -E '^Cap(Prm|Eff|Bnd)' /proc/self/status; "
        "su -c id root < /dev/null; echo su=$?; "
        'python3 -c "import ctypes; libc = ctypes.CDLL(None, use_errno=True); '
        "print('add_key', libc.syscall(248, b'user', b'k', b'v', 1, -4), ctypes.get_errno() > 0)\""
    )
    caps = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("Cap")]
    assert caps == ["0000000000000000"] * 3, result.summary()
    assert "su=1" in result.stdout and "uid=0" not in result.stdout
    assert "add_key -1 True" in result.stdout  # no keyring shared between containers


async def test_only_loopback_is_there(hostile: DockerSandbox) -> None:
    code = (
        "import socket\n"
        "names = [name for _, name in socket.if_nameindex()]\n"
        "try:\n"
        "    socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n"
        "    raw = 'allowed'\n"
        "except OSError as exc:\n"
        "    raw = type(exc).__name__\n"
        "(names, raw)"
    )
    result = await hostile.run_python(code)
    assert result.value == "(['lo'], 'PermissionError')", result.summary()
