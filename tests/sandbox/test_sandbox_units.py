"""Sandbox pieces that need no Docker: config validation, paths, result summaries."""

from __future__ import annotations

import pytest

from vfgym.sandbox import ExecResult, SandboxConfig, SandboxPathError
from vfgym.sandbox.config import parse_size
from vfgym.sandbox.container import create_kwargs
from vfgym.sandbox.paths import workspace_relative


def test_exec_result_summary_marks_what_went_wrong() -> None:
    long = ExecResult(stdout="a" * 10_000, stderr="", exit_code=0)
    text = long.summary(max_chars=100)
    assert len(text) < 200 and "characters omitted" in text
    assert ExecResult(stdout="", stderr="", exit_code=0).summary() == "(no output)"
    timed = ExecResult(stdout="x", stderr="", exit_code=None, timed_out=True, duration_s=2)
    assert "timed out after 2.0s" in timed.summary()
    oom = ExecResult(stdout="", stderr="", exit_code=-9, oom_killed=True, state_reset=True)
    assert "out of memory" in oom.summary() and "restarted" in oom.summary()


def test_config_defaults_are_safe() -> None:
    config = SandboxConfig()
    assert config.network is False and config.runtime == "runc"
    assert config.memory == 512 * 1024**2 and config.workspace_size == 128 * 1024**2
    assert config.user.split(":")[0] != "0"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"memory": "lots"}, "not a size"),
        ({"memory": 0}, "positive"),
        ({"cpus": -1}, "cpus"),
        ({"pids": 2}, "too low"),
        ({"timeout": 0}, "timeout"),
        ({"workspace": "relative"}, "absolute"),
        ({"labels": {"vfgym.sandbox": "x"}}, "reserved"),
        ({"output_limit": True}, "output_limit"),
        ({"timeout": float("inf")}, "timeout"),  # would turn the per-call limit off
        ({"start_timeout": float("inf")}, "start_timeout"),
        ({"memory": 1.5}, "int"),  # read as 1.5 bytes: surely meant "1.5g"
    ],
)
def test_config_rejects_bad_values(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SandboxConfig(**changes)


def test_config_replace_rejects_unknown_fields() -> None:
    with pytest.raises(TypeError):
        SandboxConfig().replace(memroy="1g")
    assert SandboxConfig().replace(memory="1g").memory == 1024**3


def test_parse_size() -> None:
    assert parse_size("64k", "x") == 65536
    assert parse_size("1.5g", "x") == int(1.5 * 1024**3)
    assert parse_size(10, "x") == 10


def test_container_spec_turns_every_limit_on() -> None:
    class FakeApi:  # only the spec builder of the SDK is used, no daemon
        def create_host_config(self, **kwargs: object) -> dict:
            return kwargs

    class FakeClient:
        api = FakeApi()

    spec = create_kwargs(FakeClient(), SandboxConfig(), "img", {"a": "b"})  # type: ignore[arg-type]
    host = spec["host_config"]
    assert host["network_mode"] == "none" and spec["network_disabled"]
    assert host["mem_limit"] == host["memswap_limit"]
    assert host["read_only"] and host["cap_drop"] == ["ALL"]
    assert host["security_opt"][0] == "no-new-privileges"
    assert host["security_opt"][1].startswith("seccomp={")  # vfgym's profile, not the default
    assert host["pids_limit"] == 128 and host["log_config"].type == "none"
    assert {u.name for u in host["ulimits"]} >= {"nofile", "fsize"}
    assert "size=" in host["tmpfs"]["/workspace"] and "size=" in host["tmpfs"]["/tmp"]
    assert spec["user"] == "10001:10001" and spec["stdin_open"]
    gvisor = create_kwargs(FakeClient(), SandboxConfig(runtime="runsc"), "img", {})  # type: ignore[arg-type]
    assert "nproc" in {u.name for u in gvisor["host_config"]["ulimits"]}


@pytest.mark.parametrize(
    "path", ["../x", "/etc/passwd", "/workspace/../etc", "a/../../b", "", "/workspace", "a\0b"]
)
def test_paths_outside_the_workspace_are_refused(path: str) -> None:
    with pytest.raises(SandboxPathError):
        workspace_relative(path, "/workspace")


def test_paths_inside_the_workspace_are_normalised() -> None:
    assert workspace_relative("/workspace/a//b/./c", "/workspace") == "a/b/c"
    assert workspace_relative("./x.txt", "/workspace") == "x.txt"


def test_an_owner_proc_does_not_show_is_judged_by_whether_its_pid_exists(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where /proc hides other users' processes (hidepid) or does not exist (macOS),
    `gc` must not take a live owner for dead and remove its running sandboxes; a pid
    that no longer exists is still dead."""
    import subprocess

    from vfgym.sandbox import labels

    live = subprocess.Popen(["sleep", "30"])
    try:
        live_token = labels.owner_token(live.pid)
        gone = subprocess.Popen(["true"])
        gone.wait()
        gone_token = labels.owner_token(gone.pid)
        assert labels.owner_is_alive(live_token) is True
        monkeypatch.setattr(labels, "_start_time", lambda pid: None)  # /proc shows nothing
        assert labels.owner_is_alive(live_token) is True
        assert labels.owner_is_alive(gone_token) is False
        host = live_token.split(":")[0]
        assert labels.owner_is_alive(f"{host}:0:0") is False  # never signal group 0
    finally:
        live.kill()
        live.wait()
