"""`RemoteEnv`: a served environment as a `gymnasium.Env`, and its failures bounded in time."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from remote_servers import TOKEN

import vfgym.gym  # noqa: F401  (registers the vfgym/... ids)
from vfgym.envs.registry import load_environment
from vfgym.errors import RemoteEnvError, RemoteEnvUnavailable
from vfgym.remote import REMOTE_ID, RemoteEnv, RemoteSession


def guess_env() -> Any:
    return load_environment("guess-the-number")


def test_remote_env_passes_gymnasiums_checker(serve: Any) -> None:
    server = serve(guess_env())
    env = RemoteEnv(server.base_url, token=TOKEN)
    try:
        check_env(env, skip_render_check=True)
    finally:
        env.close()


def test_remote_env_steps_like_the_local_gym_env(serve: Any) -> None:
    """The same seed and moves give the same observations, rewards and flags as
    `gym.make` of the same environment in this process."""
    server = serve(guess_env())
    remote = RemoteEnv(server.base_url, token=TOKEN)
    local = gym.make("vfgym/GuessTheNumber-v0")
    try:
        remote_obs, _ = remote.reset(seed=11)
        local_obs, _ = local.reset(seed=11)
        assert remote_obs == local_obs
        low, high = 1, 100
        for _ in range(10):
            guess = (low + high) // 2
            got = remote.step(f"<move>{guess}</move>")
            want = local.step(f"<move>{guess}</move>")
            assert got[:4] == want[:4]
            if got[2] or got[3]:
                break
            low, high = (guess + 1, high) if "low" in got[0] else (low, guess - 1)
        assert got[2] is True and got[1] > 0
        assert got[4]["episode_reward"] == pytest.approx(want[4]["episode_reward"])
        with pytest.raises(gym.error.ResetNeeded):
            remote.step("<move>1</move>")
    finally:
        remote.close()
        local.close()


def test_make_vec_opens_many_sessions(serve: Any) -> None:
    server = serve(guess_env(), max_sessions=16)
    envs = gym.make_vec(
        REMOTE_ID, num_envs=16, vectorization_mode="sync", url=server.base_url, token=TOKEN
    )
    try:
        observations, _ = envs.reset(seed=0)
        assert len(observations) == 16 and len(server.sessions) == 16
        _, rewards, terminated, truncated, infos = envs.step(["<move>50</move>"] * 16)
        assert rewards.shape == (16,) and not terminated.any() and not truncated.any()
        assert np.all(infos["turn"] == 1)
    finally:
        envs.close()
    deadline = time.monotonic() + 10
    while server.sessions and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not server.sessions


def test_token_comes_from_the_environment_variable(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = serve(guess_env())
    with pytest.raises(RemoteEnvUnavailable, match=r"no or wrong bearer token.*VFGYM_ENV_TOKEN"):
        RemoteEnv(server.base_url)
    monkeypatch.setenv("VFGYM_ENV_TOKEN", TOKEN)
    env = RemoteEnv(server.base_url.replace("http://", "ws://") + "/ws")
    try:
        assert env.reset(seed=0)[1]["turn"] == 0
    finally:
        env.close()


def test_capacity_is_a_remote_env_error(serve: Any) -> None:
    server = serve(guess_env(), max_sessions=1)
    first, second = RemoteEnv(server.base_url, TOKEN), RemoteEnv(server.base_url, TOKEN)
    try:
        first.reset(seed=0)
        with pytest.raises(RemoteEnvError, match="at capacity") as raised:
            second.reset(seed=0)
        assert raised.value.code == "CAPACITY_REACHED"
    finally:
        first.close()
        second.close()


def test_no_server_is_a_clear_error_at_once() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(RemoteEnvUnavailable, match=r"cannot reach the env server.*serve-env"):
        RemoteEnv(f"http://127.0.0.1:{port}", token="x")
    assert time.monotonic() - started < 5


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A loopback port that accepts connections and never answers: a hung server."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for connection in accepted:
            connection.close()
        listener.close()


def test_a_hung_server_is_an_error_within_the_timeout(silent_server: str) -> None:
    started = time.monotonic()
    with pytest.raises(RemoteEnvUnavailable):
        RemoteEnv(silent_server, token="x", connect_timeout=1.0)
    assert time.monotonic() - started < 4

    async def connect() -> None:
        session = RemoteSession(silent_server, "x", timeout=1.0, connect_timeout=1.0)
        try:
            await session.reset(seed=0)
        finally:
            await session.close()

    started = time.monotonic()
    with pytest.raises(RemoteEnvUnavailable, match=r"could not connect.*within 1 s"):
        asyncio.run(connect())
    assert time.monotonic() - started < 4


def test_a_server_going_away_mid_episode_is_a_clear_error(serve: Any) -> None:
    server = serve(guess_env(), drain_timeout=0.2)
    env = RemoteEnv(server.base_url, TOKEN, timeout=5)
    try:
        env.reset(seed=0)
        env.step("<move>50</move>")
        server.threaded.stop(drain_timeout=0.2)  # type: ignore[attr-defined]
        started = time.monotonic()
        with pytest.raises(RemoteEnvUnavailable, match=r"ended the session.*shutting down"):
            env.step("<move>25</move>")
        assert time.monotonic() - started < 5
    finally:
        env.close()
    assert server.ended == {"drained": 1}


def test_async_sessions_share_one_loop(serve: Any) -> None:
    server = serve(guess_env(), max_sessions=8)

    async def play() -> list[int]:
        envs = [RemoteEnv(server.base_url, TOKEN) for _ in range(8)]
        try:
            await asyncio.gather(*(env.areset(seed=i) for i, env in enumerate(envs)))
            steps = await asyncio.gather(*(env.astep("<move>50</move>") for env in envs))
            return [info["turn"] for *_, info in steps]
        finally:
            await asyncio.gather(*(env.aclose() for env in envs))

    assert asyncio.run(play()) == [1] * 8
