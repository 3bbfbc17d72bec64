"""Sync per-turn hooks (`env_response`, `is_completed`) and an EnvGroup member's sync
hooks must not stall the other rollouts sharing the event loop.

Each test runs real environments against the project's own model server through the
real `openai` client. A hook "blocks" by waiting at a barrier for the other rollout's
hook: run on the event loop, the other rollout never gets there and the barrier breaks.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from endless_env import GO, Again
from scripted_models import say_ok

from vfgym.envs import EnvGroup, MultiTurnEnv, SingleTurnEnv
from vfgym.gym import GymEnv
from vfgym.types import Messages, State

#: A blocking call's duration: long enough that the offloader keeps the hook in its
#: worker thread (a quick hook would earn a place on the loop).
BLOCKS_FOR = 0.005


class MeetingTurns(MultiTurnEnv):
    """Two rollouts whose hook `where` meets the other rollout's on every turn."""

    def __init__(self, where: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.where = where
        self.barrier = threading.Barrier(2, timeout=5)
        self.calls = 0

    def _meet(self) -> None:
        self.calls += 1
        time.sleep(BLOCKS_FOR)
        self.barrier.wait()

    def is_completed(self, messages: Messages, state: State, **kwargs) -> bool:
        if self.where == "is_completed":
            self._meet()
        return False

    def env_response(self, messages: Messages, state: State, **kwargs):
        if self.where == "env_response":
            self._meet()
        return [{"role": "user", "content": "again"}], state


@pytest.mark.parametrize("where", ["env_response", "is_completed"])
async def test_a_blocking_sync_turn_hook_does_not_stall_the_other_rollouts(
    model_server, where: str
) -> None:
    server = await model_server(say_ok)
    env = MeetingTurns(where, dataset=[{"question": "a"}, {"question": "b"}], max_turns=3)
    out = await env.evaluate(server.client(), "m")
    for state in out.state:
        assert "error" not in state, state.get("error")
        assert state["stop_reason"] == "max_turns"
        assert state["turn"] == 3
    assert env.calls >= 6  # every turn of both rollouts met the other's
    assert not env.barrier.broken


class MeetingSetup(MultiTurnEnv):
    """A sync setup that meets the other episode's, and an async reply (so that the
    Gym adapter drives it on an event loop)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.barrier = threading.Barrier(2, timeout=5)

    def setup_state(self, state: State, **kwargs) -> State:
        time.sleep(BLOCKS_FOR)
        self.barrier.wait()
        state["set_up"] = True
        return state

    async def env_response(self, messages: Messages, state: State, **kwargs):
        return [{"role": "user", "content": "again"}], state


@pytest.mark.parametrize("grouped", [False, True], ids=["env", "env-group"])
async def test_gym_episodes_on_one_loop_offload_a_blocking_sync_setup(grouped: bool) -> None:
    """`areset` ran a sync `setup_state` on the caller's loop (and an EnvGroup ran its
    member's inline): two episodes reset together never both got to the barrier."""
    member = MeetingSetup(dataset=[{"question": "a"}, {"question": "b"}], max_turns=2)
    env: MultiTurnEnv = EnvGroup([member], env_names=["meet"]) if grouped else member
    episodes = [GymEnv(env), GymEnv(env)]
    try:
        results = await asyncio.gather(
            *(gym_env.areset(options={"index": i}) for i, gym_env in enumerate(episodes))
        )
    finally:
        for gym_env in episodes:
            await gym_env.aclose()
    for _, info in results:
        assert info["state"]["set_up"] is True
    assert not member.barrier.broken


@pytest.mark.parametrize("hook", ["env_response", "is_completed"])
async def test_an_env_group_runs_its_members_blocking_sync_turn_hooks_off_the_loop(
    hook: str,
) -> None:
    """The group's hooks are what the Gym adapter calls for a group, on an event loop
    when a member's hooks are async (with all of them sync it drives them inline)."""
    member = MeetingTurns(hook, dataset=[{"question": "a"}], max_turns=3)
    other = MeetingSetup(dataset=[{"question": "b"}])  # async env_response
    group = EnvGroup([member, other], env_names=["meet", "other"])
    states = [{"task": "meet", "prompt": [], "completion": []} for _ in range(2)]
    if hook == "env_response":
        calls = [group.env_response([], state) for state in states]
    else:
        calls = [group.is_completed([], state) for state in states]
    await asyncio.gather(*calls)
    assert member.calls == 2
    assert not member.barrier.broken


async def test_a_rollout_cancelled_during_a_blocking_sync_env_response_waits_for_it(
    model_server,
) -> None:
    """The reply runs on in its worker thread after the cancellation: cleanup must not
    run until it is done, or it releases what the reply is still using."""
    started, release = threading.Event(), threading.Event()
    order: list[str] = []

    class Slow(MultiTurnEnv):
        def env_response(self, messages: Messages, state: State, **kwargs):
            started.set()
            release.wait(timeout=5)
            order.append("reply done")
            return [{"role": "user", "content": "again"}], state

        def cleanup_state(self, state: State, **kwargs) -> None:
            order.append("cleanup")

    server = await model_server(say_ok)
    env = Slow(dataset=[{"question": "q"}], max_turns=3)
    await cancel_while_a_hook_runs(env, server.client(), started, release)
    assert order == ["reply done", "cleanup"]


async def test_a_quick_sync_env_response_settles_inline(model_server) -> None:
    """The hop to a thread is paid while the hook is new, not on every turn."""

    threads: list[threading.Thread] = []

    class Quick(MultiTurnEnv):
        def env_response(self, messages: Messages, state: State, **kwargs):
            threads.append(threading.current_thread())
            return [{"role": "user", "content": "again"}], state

    server = await model_server(say_ok)
    env = Quick(dataset=[{"question": "q"}], max_turns=4)
    _, state = await env.rollout(server.client(), "m", GO)
    assert state["stop_reason"] == "max_turns"
    main = threading.main_thread()
    assert threads[0] is not main  # timed in a worker while the hook is new
    assert threads[1:] == [main] * 3


async def test_gym_reset_on_a_loop_takes_a_sync_init_state_and_init_completion() -> None:
    """Hooks "may be sync or async": the adapter's async reset awaited both."""

    class OwnState(MultiTurnEnv):
        def init_completion(self) -> Messages:
            return []

        def init_state(self, prompt, completion, answer, task, info, example_id, **kwargs):
            return {"prompt": prompt, "completion": completion, "answer": answer, "marks": 1}

        async def env_response(self, messages: Messages, state: State, **kwargs):
            return [{"role": "user", "content": "again"}], state

    gym_env = GymEnv(OwnState(dataset=[{"question": "q"}], max_turns=2))
    try:
        observation, info = await gym_env.areset(seed=0)
        assert "q" in observation
        assert info["state"]["marks"] == 1
        *_, truncated, _ = await gym_env.astep("hi")
        assert not truncated
    finally:
        await gym_env.aclose()


class Meeting(SingleTurnEnv):
    """Its sync setup (or cleanup) waits, as a blocking call would, until the other
    rollout's has started too: run on the event loop, the second never starts."""

    def __init__(self, where: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.where = where
        self.barrier = threading.Barrier(2, timeout=5)

    def setup_state(self, state: State, **kwargs) -> State:
        if self.where == "setup":
            self.barrier.wait()
        return state

    def cleanup_state(self, state: State, **kwargs) -> None:
        if self.where == "cleanup":
            self.barrier.wait()
        state["cleaned"] = True


async def cancel_while_a_hook_runs(
    env: Any, client: Any, started: threading.Event, release: threading.Event
) -> None:
    """Cancel a rollout of `env` once its sync hook has `started` (in a worker thread),
    let the hook go on 50 ms later (`release`), and see the rollout end cancelled."""
    task = asyncio.ensure_future(env.rollout(client, "m", GO))
    while not started.is_set():
        await asyncio.sleep(0.001)
    task.cancel()
    asyncio.get_running_loop().call_later(0.05, release.set)
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_sync_get_context_messages_drives_the_rollout(model_server) -> None:
    class LastTwo(Again):
        def get_context_messages(self, state: State) -> Messages:
            return state["prompt"] + state["completion"][-2:]

    server = await model_server(say_ok)
    _, state = await LastTwo(dataset=[{"question": "q"}], max_turns=3).rollout(
        server.client(), "m", GO
    )
    assert "error" not in state
    assert state["stop_reason"] == "max_turns"
    assert [len(r["messages"]) for r in server.requests] == [1, 3, 3]


async def test_a_sync_init_state_and_init_completion_drive_the_rollout(model_server) -> None:
    class OwnState(Again):
        def init_completion(self) -> Messages:
            return []

        def init_state(self, prompt, completion, answer, task, info, example_id, **kwargs):
            return {"prompt": prompt, "completion": completion, "answer": answer, "marks": 1}

    server = await model_server(say_ok)
    env = OwnState(dataset=[{"question": "q"}], max_turns=2)
    out = await env.evaluate(server.client(), "m")
    state = out.state[0]
    assert "error" not in state
    assert state["stop_reason"] == "max_turns"
    assert state["marks"] == 1
    assert len(server.requests) == 2


@pytest.mark.parametrize("where", ["setup", "cleanup"])
async def test_a_blocking_sync_setup_or_cleanup_does_not_stall_the_other_rollouts(
    model_server, where: str
) -> None:
    server = await model_server(say_ok)
    env = Meeting(where, dataset=[{"question": "a"}, {"question": "b"}])
    out = await env.evaluate(server.client(), "m")
    for state in out.state:
        assert "error" not in state, state.get("error")
        assert "cleanup_error" not in state, state.get("cleanup_error")
        assert state["stop_reason"] == "completed"
        assert state["cleaned"] is True


async def test_a_rollout_cancelled_during_a_blocking_sync_setup_cleans_up_what_it_acquired(
    model_server,
) -> None:
    """The setup runs on in its worker thread after the cancellation: cleanup must
    wait for it, or it releases nothing and what setup then acquires leaks."""
    started, release = threading.Event(), threading.Event()
    seen: list[object] = []

    class Acquires(SingleTurnEnv):
        def setup_state(self, state: State, **kwargs) -> State:
            started.set()
            release.wait(timeout=5)
            state["sandbox"] = "held"
            return state

        def cleanup_state(self, state: State, **kwargs) -> None:
            seen.append(state.get("sandbox"))

    server = await model_server(say_ok)
    env = Acquires(dataset=[{"question": "q"}])
    await cancel_while_a_hook_runs(env, server.client(), started, release)
    assert seen == ["held"]
    assert server.requests == []
