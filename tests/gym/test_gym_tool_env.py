"""Tool environments and EnvGroup driven through the Gym adapter (`step()` with tool
calls): repeated call ids, `update_tool_args` that breaks a call, EnvGroup rows that
follow the seed and name their member, members the adapter cannot step, and `gym.make`
of an EnvGroup."""

from __future__ import annotations

import asyncio
from typing import Any

import gymnasium as gym
import pytest
from gym_test_envs import AsyncGuessEnv, CalculatorEnv, GuessEnv
from scripted_models import scripted
from tool_calls import call

import vfgym.gym as vgym
from vfgym.envs import EnvGroup, StatefulToolEnv, ToolEnv
from vfgym.envs.environment import Environment
from vfgym.types import Messages, State


def turn(*calls: dict[str, Any], content: str = "") -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


async def test_repeated_call_ids_in_one_turn_get_replies_that_tell_the_calls_apart(
    model_server,
) -> None:
    """A model (or a lax server) that gives two calls of one turn the same id: each
    reply must still name the call it answers, so the conversation sent back is valid
    (one reply per id) and the model can tell 5 from 9."""
    twice = [call("add", {"a": 2, "b": 3}, "dup"), call("add", {"a": 4, "b": 5}, "dup")]
    server = await model_server(scripted(twice, "done"))
    env = ToolEnv(tools=[add], dataset=[{"question": "2+3 and 4+5?"}])
    completion, state = await env.rollout(server.client(), "m", "2+3 and 4+5?")
    calls = completion[0]["tool_calls"]
    replies = [m for m in completion if m["role"] == "tool"]
    call_ids = [c["id"] for c in calls]
    assert len(set(call_ids)) == 2 and call_ids[0] == "dup"
    assert [r["tool_call_id"] for r in replies] == call_ids
    assert [r["content"] for r in replies] == ["5", "9"]
    assert [e["id"] for e in state["tool_call_log"]] == call_ids
    # What the server got back on the next turn is the same valid pairing.
    sent = server.requests[-1]["messages"]
    sent_ids = [c["id"] for c in sent[-3]["tool_calls"]]
    assert sent_ids == [m["tool_call_id"] for m in sent[-2:]] == call_ids


def test_an_action_repeating_a_call_id_is_refused_before_the_episode_changes(calculator):
    calculator.reset(seed=0)
    before = calculator.state["completion"][:]
    action = turn(call("add", {"a": 1, "b": 2}, "c1"), call("add", {"a": 3, "b": 4}, "c1"))
    assert not calculator.action_space.contains(action)
    repeated = r"tool_calls\[1\]\['id'\] 'c1' is the id of tool_calls\[0\] too"
    with pytest.raises(ValueError, match=repeated):
        calculator.step(action)
    assert calculator.state["completion"] == before and calculator.state["turn"] == 0
    # The message says what to do; doing it works.
    ok = turn(call("add", {"a": 1, "b": 2}, "c1"), call("add", {"a": 3, "b": 4}))
    observation, *_ = calculator.step(ok)
    assert observation == "3\n\n7"


def read_file(path: str, workspace: dict) -> str:
    """Read a file of the rollout's workspace.

    Args:
        path: The file to read.
    """
    return workspace[path]


class Workspace(StatefulToolEnv):
    """Injects `workspace` from the State; `mode` picks how update_tool_args goes wrong."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        super().__init__(dataset=[{"question": "Read a."}])
        self.add_tool(read_file, args_to_skip=["workspace"])

    def setup_state(self, state: State, **kwargs: Any) -> State:
        state["workspace"] = {"a": "secret"}
        return state

    def update_tool_args(
        self, tool_name: str, tool_args: dict[str, Any], messages: Messages, state: State, **kw: Any
    ) -> Any:
        if self.mode == "forgot return":
            tool_args["workspace"] = state["workspace"]
            return None
        if self.mode == "hidden left out":
            return dict(tool_args)
        if self.mode == "unknown added":
            return {**tool_args, "workspace": state["workspace"], "sandbox": 1}
        return {**tool_args, "workspace": state["workspace"]}


@pytest.mark.parametrize(
    ("mode", "error", "says"),
    [
        ("forgot return", TypeError, r"Workspace\.update_tool_args must return .* not NoneType"),
        ("hidden left out", TypeError, r"missing a required argument: 'workspace'"),
        ("unknown added", TypeError, r"unexpected keyword argument 'sandbox'"),
    ],
)
def test_update_tool_args_that_breaks_the_call_is_the_environments_error(mode, error, says):
    """The model cannot fix what update_tool_args got wrong, so it must not be told it
    did: the step raises (the episode ends as an error) and names the hook to fix."""
    env = vgym.GymEnv(Workspace(mode))
    try:
        env.reset(seed=0)
        with pytest.raises(error, match=says) as raised:
            env.step(turn(call("read_file", {"path": "a"}, "c1")))
        assert "update_tool_args" in str(raised.value)
        assert env.state["stop_reason"] == "error"
        assert env.state["error"]["type"] == "TypeError"
        assert [m["role"] for m in env.state["completion"]] == ["assistant"]  # no tool reply
    finally:
        env.close()
    # The working hook, for contrast: the model reads the file.
    good = vgym.GymEnv(Workspace("ok"))
    try:
        good.reset(seed=0)
        observation, *_ = good.step(turn(call("read_file", {"path": "a"}, "c1")))
        assert observation == "secret"
    finally:
        good.close()


class Bare(Environment):
    """An environment with a rollout loop of its own: nothing to step through."""

    async def rollout(self, client, model, prompt, completion=None, answer="", state=None, **kw):
        return [], {}


def calc_and_guess() -> tuple[EnvGroup, CalculatorEnv, GuessEnv]:
    calc, guess = CalculatorEnv(num_examples=2), GuessEnv(num_examples=2, max_turns=2)
    return EnvGroup([calc, guess], env_names=["calc", "guess"]), calc, guess


def test_gym_steps_an_env_group_through_the_member_its_row_names():
    group, _, guess = calc_and_guess()
    env = vgym.GymEnv(group)
    try:
        # Row 0 is the calculator's: tool calls go to its tools, its rubric scores.
        observation, info = env.reset(options={"index": 0})
        assert "Use the add tool" in observation and info["state"]["task"] == "calc"
        observation, reward, terminated, truncated, info = env.step(
            turn(call("add", {"a": 10, "b": 30}, "c1"), content="adding")
        )
        assert observation == "40" and not (terminated or truncated)
        assert info["state"]["tools_called"] == ["add"]
        assert info["messages"][-1] == {"role": "tool", "content": "40", "tool_call_id": "c1"}
        observation, reward, terminated, truncated, info = env.step("40")
        assert terminated and reward == 1.0
        assert set(info["metrics"]) == {"final_answer_correct", "reward_errors"}
        assert guess.events == []  # the other member was never touched
        # Row 2 is the game's: its setup and cleanup run, its max_turns truncates.
        observation, info = env.reset(options={"index": 2})
        assert info["state"]["task"] == "guess" and "game_state" in info["state"]
        env.step("3")
        *_, terminated, truncated, info = env.step("4")
        assert truncated and info["stop_reason"] == "max_turns"
        assert set(info["metrics"]) == {"won", "guesses", "reward_errors"}
        assert guess.events == [("setup", 2), ("cleanup", 2)]
    finally:
        env.close()


def test_gym_env_group_rows_follow_the_seed():
    def tasks(seed: int) -> list[str]:
        env = vgym.GymEnv(calc_and_guess()[0])
        try:
            return [env.reset(seed=seed if i == 0 else None)[1]["state"]["task"] for i in range(8)]
        finally:
            env.close()

    first = tasks(3)
    assert first == tasks(3) and {"calc", "guess"} == set(first)


async def test_gym_env_group_with_an_async_member_steps_on_the_callers_loop():
    group = EnvGroup([AsyncGuessEnv(num_examples=1), CalculatorEnv(num_examples=1)], ["g", "c"])
    env = vgym.GymEnv(group)
    try:
        await env.areset(options={"index": 0})
        observation, *_ = await env.astep("20")
        assert "go lower" in observation or "right" in observation
        assert env.state["loop_seen"] == id(asyncio.get_running_loop())
        await env.areset(options={"index": 1})  # a sync member in the same env
        observation, *_ = await env.astep(turn(call("add", {"a": 1, "b": 2})))
        assert observation == "3"
    finally:
        await env.aclose()


def test_gym_refuses_an_env_group_with_a_member_it_cannot_step():
    group = EnvGroup([GuessEnv(num_examples=1), Bare(dataset=[{"question": "q"}])], ["g", "b"])
    with pytest.raises(TypeError, match=r"'b' is a Bare.*own rollout loop"):
        vgym.GymEnv(group)


def test_gym_make_builds_an_env_group():
    vgym.register("vfgym-test/Group-v0", lambda **kw: calc_and_guess()[0])
    try:
        env = gym.make("vfgym-test/Group-v0")
        try:
            _, info = env.reset(seed=0)
            assert info["state"]["task"] in {"calc", "guess"}
        finally:
            env.close()
    finally:
        gym.registry.pop("vfgym-test/Group-v0", None)
