"""GymVectorEnv across event loops: the sub-envs' running episodes end on the loop that
opened them before new ones start on another, so switching between the sync API (the
vector env's private loop) and the async one (the caller's loop) just works."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest
from gym_test_envs import LeasedGuessEnv, Ledger, bisect_policy

from vfgym.gym import GymEnv, GymVectorEnv, Trajectory, aplay_vector, play_vector


def _vector(ledger: Ledger, mode: str = "async", n: int = 3) -> GymVectorEnv:
    return GymVectorEnv([GymEnv(LeasedGuessEnv(ledger)) for _ in range(n)], mode=mode)


def _summary(trajectories: list[Trajectory]) -> list[tuple[Any, ...]]:
    return sorted((tuple(t.observations), tuple(t.actions), tuple(t.rewards)) for t in trajectories)


def _running(vec: GymVectorEnv) -> list[int]:
    return [i for i, env in enumerate(vec.envs) if not env.episode_over]


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


# ------------------------------------------------------------ switches that just work


def test_sync_then_async_then_sync_play_gives_the_sync_modes_episodes(ledger):
    def sequence(vec: GymVectorEnv) -> list[list[tuple[Any, ...]]]:
        runs = [play_vector(vec, bisect_policy, seed=7, episodes=4)]
        runs.append(asyncio.run(aplay_vector(vec, bisect_policy, seed=8, episodes=4)))
        runs.append(play_vector(vec, bisect_policy, seed=9, episodes=4))
        return [_summary(run) for run in runs]

    reference_ledger = Ledger()
    reference, ours = _vector(reference_ledger, "sync"), _vector(ledger, "async")
    try:
        expected = sequence(reference)
        assert sequence(ours) == expected
        assert all(len(run) == 4 for run in expected)
    finally:
        reference.close()
        ours.close()
    assert ledger.misplaced() == {} and ledger.running() == []
    assert reference_ledger.misplaced() == {}
    assert len({id(loop) for loop in ledger.opened.values()}) >= 2  # both loops were used


def test_play_vector_leaves_no_episode_running(ledger):
    vec = _vector(ledger)
    try:
        played = play_vector(vec, bisect_policy, seed=7, episodes=2)
        assert len(played) == 2
        assert _running(vec) == [] and ledger.running() == []
        assert ledger.misplaced() == {}
        with pytest.raises(gym.error.ResetNeeded, match="reset"):
            vec.step(("1",) * 3)
    finally:
        vec.close()


def test_aplay_vector_in_asyncio_run_then_play_vector(ledger):
    vec = _vector(ledger)
    try:
        first = asyncio.run(aplay_vector(vec, bisect_policy, seed=7, episodes=4))
        # asyncio.run closed its loop: nothing of it may be left running
        assert ledger.running() == []
        second = play_vector(vec, bisect_policy, seed=7, episodes=4)
        assert _summary(first) == _summary(second)
    finally:
        vec.close()
    assert ledger.misplaced() == {}


def test_reset_then_areset_on_a_new_loop_ends_the_episodes_on_the_private_loop(ledger):
    vec = _vector(ledger)
    try:
        vec.reset(seed=0)
        vec.step(("0",) * 3)  # never the number: the episodes go on
        first = [env.state for env in vec.envs]
        private = vec._loop

        async def on_a_new_loop() -> None:
            observations, _ = await vec.areset(seed=1)
            assert len(observations) == 3
            assert all(env.state is not old for env, old in zip(vec.envs, first, strict=True))
            await vec.astep(("0",) * 3)
            await vec.aclose()

        asyncio.run(on_a_new_loop())
        assert all(ledger.opened[state["episode"]] is private for state in first)
        assert all(state.get("cleanup_error") is None for state in first)
    finally:
        vec.close()
    assert ledger.misplaced() == {} and ledger.running() == []


def test_areset_on_an_idle_loop_then_reset_ends_them_on_that_loop(ledger):
    vec = _vector(ledger)
    loop = asyncio.new_event_loop()  # open and idle, still holding the episodes
    try:
        loop.run_until_complete(vec.areset(seed=0))
        held = list(ledger.opened)
        vec.reset(seed=1)
        assert all(ledger.cleaned[e] == [loop] for e in held)
        vec.step(("0",) * 3)
        loop.run_until_complete(vec.areset(seed=2))  # and back
        loop.run_until_complete(vec.aclose())
    finally:
        vec.close()
        loop.close()
    assert ledger.misplaced() == {} and ledger.running() == []


async def test_aplay_vector_then_play_vector_in_the_same_running_loop(ledger):
    vec = _vector(ledger)
    try:
        first = await aplay_vector(vec, bisect_policy, seed=7, episodes=4)
        second = play_vector(vec, bisect_policy, seed=7, episodes=4)  # the private loop
        third = await aplay_vector(vec, bisect_policy, seed=7, episodes=4)
        assert _summary(first) == _summary(second) == _summary(third)
    finally:
        await vec.aclose()
    assert ledger.misplaced() == {} and ledger.running() == []


def test_a_policy_that_raises_in_asyncio_run_leaves_no_episode_on_the_closed_loop(ledger):
    calls = 0

    def policy(observation: str) -> str:
        nonlocal calls
        calls += 1
        if calls > 4:
            raise ValueError("the policy broke")
        return bisect_policy(observation)

    vec = _vector(ledger)
    try:
        with pytest.raises(ValueError, match="the policy broke"):
            asyncio.run(aplay_vector(vec, policy, seed=0))
        assert ledger.running() == [] and _running(vec) == []
        assert len(play_vector(vec, bisect_policy, seed=0)) == 3
    finally:
        vec.close()
    assert ledger.misplaced() == {}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_end_episodes_then_areset_and_aclose(ledger, mode):
    vec = _vector(ledger, mode)
    try:
        vec.reset(seed=0)
        vec.end_episodes()
        assert _running(vec) == [] and ledger.running() == []
        with pytest.raises(gym.error.ResetNeeded, match="end_episodes"):
            vec.step(("0",) * 3)

        async def on_a_new_loop() -> None:
            await vec.areset(seed=1)
            await vec.aend_episodes()
            assert _running(vec) == []
            await vec.areset(seed=2)
            await vec.aclose()

        asyncio.run(on_a_new_loop())
    finally:
        vec.close()
    assert ledger.misplaced() == {} and ledger.running() == []


# ------------------------------------------------------------ close after a switch


def test_aclose_on_a_new_loop_ends_the_episodes_on_the_private_loop(ledger):
    vec = _vector(ledger)
    vec.reset(seed=0)
    asyncio.run(vec.aclose())
    assert vec.closed
    assert ledger.misplaced() == {} and ledger.running() == []


def test_close_ends_the_episodes_on_the_idle_loop_that_holds_them(ledger):
    vec = _vector(ledger)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(vec.areset(seed=0))
        vec.close()
        assert vec.closed
    finally:
        loop.close()
    assert ledger.misplaced() == {} and ledger.running() == []


# ------------------------------------------------------------ loops out of reach


async def test_a_sync_call_inside_the_loop_that_holds_the_episodes_says_to_await(ledger):
    vec = _vector(ledger)
    await vec.areset(seed=0)
    first = [env.state for env in vec.envs]
    for call, fix in ((vec.reset, "areset"), (vec.close, "aclose"), (vec.end_episodes, "aend")):
        with pytest.raises(RuntimeError, match=rf"running in this thread.*await vec\.{fix}"):
            call()
    with pytest.raises(RuntimeError, match=r"running in this thread.*await vec\.areset"):
        play_vector(vec, bisect_policy, seed=1)
    assert [env.state for env in vec.envs] == first and _running(vec) == [0, 1, 2]
    assert not vec.closed and ledger.running() == [0, 1, 2]
    await vec.aclose()
    assert ledger.misplaced() == {} and ledger.running() == []


def test_episodes_of_another_threads_running_loop_are_refused(ledger):
    vec = _vector(ledger)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(vec.areset(seed=0), loop).result()
        with pytest.raises(RuntimeError, match=r"another thread.*on that loop"):
            vec.reset(seed=1)
        with pytest.raises(RuntimeError, match=r"another thread.*on that loop"):
            asyncio.run(vec.areset(seed=1))
        with pytest.raises(RuntimeError, match=r"another thread.*on that loop"):
            vec.close()
        assert not vec.closed and ledger.running() == [0, 1, 2]
        asyncio.run_coroutine_threadsafe(vec.aclose(), loop).result()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
    assert vec.closed
    assert ledger.misplaced() == {} and ledger.running() == []


def test_episodes_of_a_closed_loop_are_refused_and_close_still_works(ledger):
    vec = _vector(ledger)
    asyncio.run(vec.areset(seed=0))  # asyncio.run closed the loop under the episodes
    first = [env.state for env in vec.envs]
    with pytest.raises(RuntimeError, match=r"closed.*make a new one.*aend_episodes\(\)"):
        vec.reset(seed=1)
    with pytest.raises(RuntimeError, match=r"closed"):
        play_vector(vec, bisect_policy, seed=1)
    assert [env.state for env in vec.envs] == first
    vec.close()  # nothing can run on that loop any more; close still releases the rest
    assert vec.closed
    assert sorted(ledger.cleaned) == [0, 1, 2]
    assert all(len(loops) == 1 for loops in ledger.cleaned.values())


# ------------------------------------------------------------ a real sandbox env


def _docker_or_skip() -> None:
    from vfgym.errors import SandboxError
    from vfgym.sandbox.docker_client import make_client
    from vfgym.sandbox.image import default_image, image_exists

    try:
        client = make_client(None, timeout=30)
    except SandboxError as exc:
        reason = f"no Docker Engine: {exc}"
    else:
        try:
            built = image_exists(client, default_image())
        finally:
            client.close()
        if built:
            return
        reason = f"the sandbox image {default_image()} is not built"
    if os.environ.get("VFGYM_REQUIRE_DOCKER") == "1":
        pytest.fail(f"{reason} (VFGYM_REQUIRE_DOCKER=1 makes this a failure)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def session_label() -> Iterator[dict[str, str]]:
    """A label for this test's sandboxes; none may outlive it."""
    import uuid

    from vfgym.sandbox.docker_client import make_client
    from vfgym.sandbox.gc import sandbox_containers

    _docker_or_skip()
    run = uuid.uuid4().hex[:12]
    yield {"vfgym-handover-test": run}
    client = make_client(None, timeout=30)
    try:
        left = sandbox_containers(client, f"vfgym-handover-test={run}")
        for container_id in left:
            client.api.remove_container(container_id, force=True)
        assert not left, f"sandbox containers outlived the test: {left}"
    finally:
        client.close()


def test_a_sandbox_env_switches_from_reset_to_areset(session_label):
    from vfgym.sandbox import SandboxConfig

    config = SandboxConfig(memory="256m", timeout=20, labels=session_label)
    vec = gym.make_vec(
        "vfgym/PythonMath-v0", num_envs=2, mode="async", num_examples=4, sandbox_config=config
    )
    try:
        vec.reset(seed=0)
        first = [env.state for env in vec.envs]

        async def on_a_new_loop() -> None:
            await vec.areset(seed=1)
            assert all(state.get("cleanup_error") is None for state in first)
            await vec.aclose()

        asyncio.run(on_a_new_loop())
    finally:
        vec.close()
    assert all(env.state.get("cleanup_error") is None for env in vec.envs)
