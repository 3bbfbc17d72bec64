"""The sandbox API against a real Docker Engine (runc): calls, files, reset, the pool."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import docker
import pytest

from vfgym.sandbox import (
    DockerSandbox,
    SandboxClosedError,
    SandboxFileError,
    SandboxFileNotFoundError,
    SandboxImageError,
    SandboxLostError,
    SandboxPathError,
    SandboxPool,
)
from vfgym.sandbox.gc import find_orphans, sandbox_containers
from vfgym.sandbox.image import default_image
from vfgym.sandbox.labels import LABEL, OWNER_LABEL

pytestmark = pytest.mark.asyncio(loop_scope="session")


# ---------------------------------------------------------------- run_python


async def test_python_is_stateful_like_a_notebook(sandbox: DockerSandbox) -> None:
    first = await sandbox.run_python("import math\nx = 20\nprint('set')")
    assert first.stdout == "set\n" and first.value is None and first.exit_code == 0
    second = await sandbox.run_python("x + math.floor(22.9)")
    assert second.value == "42"
    assert second.stdout == "42\n"  # shown like the interactive prompt shows it
    assert second.ok


async def test_trailing_expression_repr_and_none(sandbox: DockerSandbox) -> None:
    assert (await sandbox.run_python("'a' * 3")).value == "'aaa'"
    assert (await sandbox.run_python("None")).value is None
    assert (await sandbox.run_python("[1, 2]\n")).value == "[1, 2]"
    numpy = await sandbox.run_python("import numpy as np, sympy\nint(np.arange(5).sum())")
    assert numpy.value == "10"


async def test_exceptions_show_a_traceback_of_user_code(sandbox: DockerSandbox) -> None:
    result = await sandbox.run_python("def f():\n    return 1 / 0\nf()")
    assert result.exit_code == 1 and not result.ok
    assert "ZeroDivisionError" in result.stderr
    assert 'File "<cell' in result.stderr and "return 1 / 0" in result.stderr
    assert "runner.py" not in result.stderr
    assert "exit code 1" in result.summary()
    syntax = await sandbox.run_python("def (")
    assert syntax.exit_code == 1 and "SyntaxError" in syntax.stderr


async def test_sys_exit_sets_the_exit_code_and_keeps_state(sandbox: DockerSandbox) -> None:
    await sandbox.run_python("kept = 'yes'")
    result = await sandbox.run_python("import sys\nsys.exit(3)")
    assert result.exit_code == 3 and not result.state_reset
    assert (await sandbox.run_python("kept")).value == "'yes'"
    assert (await sandbox.run_python("raise SystemExit('bye')")).stderr == "bye\n"


async def test_timeout_restarts_the_session(sandbox: DockerSandbox) -> None:
    await sandbox.run_python("lost = 1")
    result = await sandbox.run_python("import time\nprint('before', flush=True)\ntime.sleep(60)", 1)
    assert result.timed_out and result.exit_code is None and result.state_reset
    assert result.stdout == "before\n"  # output up to the kill is kept
    assert "lost" in (await sandbox.run_python("'lost' in globals() and 'kept' or 'lost'")).stdout


async def test_bad_arguments_are_refused(sandbox: DockerSandbox) -> None:
    with pytest.raises(ValueError, match="timeout"):
        await sandbox.run_python("1", timeout=0)
    with pytest.raises(TypeError, match="code must be a str"):
        await sandbox.run_python(b"1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="command must be a str"):
        await sandbox.run_shell(["ls"])  # type: ignore[arg-type]


# ---------------------------------------------------------------- run_shell


async def test_shell_exit_code_stdout_and_stderr(sandbox: DockerSandbox) -> None:
    result = await sandbox.run_shell("echo out; echo err >&2; pwd; id -u; exit 7")
    assert result.stdout == "out\n/workspace\n10001\n"
    assert result.stderr == "err\n"
    assert result.exit_code == 7 and not result.timed_out
    summary = result.summary()
    assert "out" in summary and "[stderr]" in summary and "exit code 7" in summary


async def test_shell_sees_python_files_and_environment_is_clean(sandbox: DockerSandbox) -> None:
    await sandbox.run_python("open('data.txt', 'w').write('from python')")
    result = await sandbox.run_shell("cat data.txt; echo; env | sort | cut -d= -f1 | tr '\\n' ' '")
    assert result.stdout.startswith("from python\n")
    assert "HOME" in result.stdout and "DOCKER" not in result.stdout


# ---------------------------------------------------------------- files


async def test_write_and_read_files(sandbox: DockerSandbox) -> None:
    payload = bytes(range(256)) * 100
    await sandbox.write_file("dir/sub/blob.bin", payload)
    assert await sandbox.read_file("/workspace/dir/sub/blob.bin") == payload
    await sandbox.write_file("note.txt", "héllo")
    assert await sandbox.read_file("./note.txt") == "héllo".encode()
    seen = await sandbox.run_python(
        "open('dir/sub/blob.bin', 'rb').read() == bytes(range(256)) * 100"
    )
    assert seen.value == "True"


async def test_file_errors_are_clear(sandbox: DockerSandbox) -> None:
    with pytest.raises(SandboxFileNotFoundError, match=r"missing\.txt"):
        await sandbox.read_file("missing.txt")
    with pytest.raises(SandboxPathError, match="workspace itself"):
        await sandbox.read_file("/workspace/")
    await sandbox.run_shell("mkdir adir; mkfifo pipe")
    with pytest.raises(SandboxPathError, match="not a regular file"):
        await sandbox.read_file("adir")
    with pytest.raises(SandboxPathError, match="not a regular file"):
        await sandbox.read_file("pipe")  # a FIFO must not hang the runner
    limit = sandbox.config.max_read_bytes
    await sandbox.run_shell(f"head -c {limit + 1} /dev/zero > big")  # type: ignore[operator]
    with pytest.raises(SandboxFileError, match="over the read limit"):
        await sandbox.read_file("big")
    with pytest.raises(SandboxFileError, match="file size limit"):
        await sandbox.write_file("huge", b"x" * (sandbox.config.max_file_size + 1))  # type: ignore[operator]
    with pytest.raises(TypeError):
        await sandbox.write_file("x", 123)  # type: ignore[arg-type]


# ---------------------------------------------------------------- reset and lifecycle


async def test_reset_wipes_everything(sandbox: DockerSandbox) -> None:
    await sandbox.run_python("import os\nsecret = 1\nos.environ['LEAK'] = '1'\nos.chdir('/tmp')")
    await sandbox.write_file("keep/me.txt", b"x")
    await sandbox.run_shell("chmod 000 keep; touch /tmp/t /dev/shm/s")
    await sandbox.reset()
    result = await sandbox.run_python(
        "import os\n('secret' in globals(), os.environ.get('LEAK'), os.getcwd(),"
        " os.listdir('.'), os.listdir('/tmp'), os.listdir('/dev/shm'))"
    )
    assert result.value == "(False, None, '/workspace', [], [], [])"


async def test_standalone_sandbox_leaves_no_container(
    docker_client: docker.DockerClient, make_config: Any
) -> None:
    async with DockerSandbox(make_config()) as sandbox:
        container_id = sandbox.container_id
        assert (await sandbox.run_shell("echo hi")).stdout == "hi\n"
    assert container_id not in sandbox_containers(docker_client)
    with pytest.raises(SandboxClosedError):
        await sandbox.run_python("1")


async def test_missing_image_is_a_clear_error(
    docker_client: docker.DockerClient, make_config: Any
) -> None:
    config = make_config(image="vfgym-sandbox-python:does-not-exist")
    with pytest.raises(SandboxImageError, match=r"vfgym\.sandbox build"):
        async with DockerSandbox(config):
            pass
    with pytest.raises(SandboxImageError, match=r"vfgym\.sandbox build"):
        async with SandboxPool(config, size=1):
            pass


async def test_concurrent_calls_on_one_sandbox_are_serialised(sandbox: DockerSandbox) -> None:
    await sandbox.run_python("counter = 0")
    results = await asyncio.gather(
        *(sandbox.run_python("counter += 1\ncounter") for _ in range(10))
    )
    assert sorted(int(r.value or 0) for r in results) == list(range(1, 11))


# ---------------------------------------------------------------- pool


async def test_pool_hands_out_clean_sandboxes_concurrently(pool: SandboxPool) -> None:
    async def use(tag: str) -> str:
        async with pool.acquire() as sandbox:
            await sandbox.run_python(f"tag = {tag!r}")
            await sandbox.write_file("tag.txt", tag)
            return sandbox.container_id or ""

    ids = await asyncio.gather(*(use(f"user{i}") for i in range(6)))
    assert len(set(ids)) <= pool.size
    async with pool.acquire() as sandbox:
        result = await sandbox.run_python("import os\n('tag' in globals(), os.listdir('.'))")
        assert result.value == "(False, [])"


async def test_pool_replaces_a_lost_sandbox(
    pool: SandboxPool, docker_client: docker.DockerClient
) -> None:
    async with pool.acquire() as sandbox:
        doomed = sandbox.container_id
        assert doomed is not None
        await asyncio.to_thread(docker_client.api.kill, doomed)
        result = await sandbox.run_python("1")
        assert result.sandbox_lost and "crashed" in result.summary()
        with pytest.raises(SandboxLostError):
            await sandbox.run_python("1")
    for _ in range(200):  # the replacement starts in the background
        if pool.idle == pool.size:
            break
        await asyncio.sleep(0.05)
    async with pool.acquire() as first, pool.acquire() as second:
        assert doomed not in (first.container_id, second.container_id)
        assert (await first.run_python("1")).value == "1"
        assert (await second.run_python("2")).value == "2"


async def test_cancelled_call_recycles_the_sandbox(pool: SandboxPool) -> None:
    async with pool.acquire() as sandbox:
        task = asyncio.ensure_future(sandbox.run_python("import time\ntime.sleep(30)"))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not sandbox.alive  # the reply can no longer be matched: never reuse it
    async with pool.acquire() as fresh:
        assert (await fresh.run_python("'ok'")).value == "'ok'"


async def test_pool_starts_by_removing_orphans(
    docker_client: docker.DockerClient, make_config: Any, session_labels: dict[str, str]
) -> None:
    dead_owner = f"{socket.gethostname()}:999999999:1"
    orphan = await asyncio.to_thread(
        docker_client.api.create_container,
        default_image(),
        labels={LABEL: "1", OWNER_LABEL: dead_owner, **session_labels},
    )
    assert orphan["Id"] in [o.container_id for o in find_orphans(docker_client)]
    async with SandboxPool(make_config(), size=1) as fresh_pool:
        assert orphan["Id"] not in sandbox_containers(docker_client)
        async with fresh_pool.acquire() as sandbox:
            assert (await sandbox.run_python("3")).value == "3"


async def test_pool_rejects_bad_use(make_config: Any) -> None:
    with pytest.raises(ValueError, match="size"):
        SandboxPool(make_config(), size=0)
    unstarted = SandboxPool(make_config(), size=1)
    with pytest.raises(SandboxClosedError, match="not started"):
        async with unstarted.acquire():
            pass
