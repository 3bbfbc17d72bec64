"""Rollout-engine defects, second round, each pinned by a test.

Every test runs real environments against the project's own model server through
the real `openai` client.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from endless_env import GO, Again
from scripted_models import say_ok

from vfgym.envs import EnvGroup, SingleTurnEnv
from vfgym.types import Messages, State

# -- sync hooks: "hooks may be sync or async" --------------------------------------------


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


# -- sync hooks must not stall the other rollouts ------------------------------------------


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


# -- sampling arguments ---------------------------------------------------------------------


async def test_sampling_args_n_above_one_is_refused_before_any_request(model_server) -> None:
    """A rollout plays one conversation: with n=3 the server wrote three answers, the
    rollout kept the first, and the token budget counted all three."""
    server = await model_server(say_ok)
    env = SingleTurnEnv(dataset=[{"question": "q"}])
    with pytest.raises(ValueError, match=r"sampling_args 'n' is 3.*rollouts_per_example=3"):
        await env.evaluate(server.client(), "m", sampling_args={"n": 3})
    assert server.requests == []


async def test_sampling_args_stream_is_refused_before_the_batch_starts(
    model_server, tmp_path
) -> None:
    """Refused only at each request, every rollout errored and a results file was
    written that only a resume with the same settings could read."""
    server = await model_server(say_ok)
    env = SingleTurnEnv(dataset=[{"question": "q"}])
    with pytest.raises(ValueError, match="does not stream"):
        await env.evaluate(
            server.client(), "m", sampling_args={"stream": True}, results_path=tmp_path / "r"
        )
    assert server.requests == [] and not (tmp_path / "r").exists()


def test_an_environment_default_n_above_one_is_refused() -> None:
    with pytest.raises(ValueError, match=r"sampling_args 'n' is 2.*rollouts_per_example"):
        SingleTurnEnv(dataset=[{"question": "q"}], sampling_args={"n": 2})


async def test_sampling_args_n_of_one_is_still_accepted(model_server) -> None:
    server = await model_server(say_ok)
    env = SingleTurnEnv(dataset=[{"question": "q"}], sampling_args={"n": 1})
    out = await env.evaluate(server.client(), "m", sampling_args={"n": 1})
    assert out.state[0]["stop_reason"] == "completed"
    assert "n" not in server.requests[0]


# -- EnvGroup ---------------------------------------------------------------------------------


def test_env_group_refuses_a_token_budget_of_its_own() -> None:
    """The members' rollouts (and turn-by-turn API) enforce their own budgets: one
    given to the group was silently never enforced."""
    member = Again(dataset=[{"question": "q"}], max_turns=10)
    with pytest.raises(TypeError, match=r"EnvGroup takes no rollout_token_budget.*member"):
        EnvGroup([member], env_names=["a"], rollout_token_budget=4)


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
