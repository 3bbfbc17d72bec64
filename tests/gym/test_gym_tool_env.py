"""Tool environments and EnvGroup at their edges, driven through the Gym adapter
(`step()` with tool calls) and through `generate` against the loopback model server.

What the existing tests already cover (bad JSON, unknown tools, wrong argument types,
raising tools, result kinds and caps, hidden arguments sent by the model, EnvGroup
routing of rollouts and metrics) is not repeated here.
"""

from __future__ import annotations

import asyncio
from typing import Any

import gymnasium as gym
import pytest
from gym_test_envs import AsyncGuessEnv, CalculatorEnv, GuessEnv
from scripted_models import scripted
from tool_calls import call

import vfgym.gym as vgym
from vfgym.envs import EnvGroup, MultiTurnEnv, SingleTurnEnv, StatefulToolEnv, ToolEnv
from vfgym.envs.environment import Environment
from vfgym.rubrics import Rubric
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


# ------------------------------------------------------------- tool call ids


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


# ------------------------------------------------ StatefulToolEnv: update_tool_args


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


# ------------------------------------------------------------ EnvGroup: Gym


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


def test_env_group_step_reward_only_when_every_member_has_one():
    with_both = EnvGroup([GuessEnv(num_examples=1), GuessEnv(num_examples=1)], ["a", "b"])
    env = vgym.GymEnv(with_both, per_step_reward=True)
    try:
        env.reset(options={"index": 1})
        _, reward, *_ = env.step("5")  # the target is 1: a miss
        assert reward == pytest.approx(-0.1)
    finally:
        env.close()
    mixed, *_ = calc_and_guess()
    with pytest.raises(ValueError, match="step_reward"):
        vgym.GymEnv(mixed, per_step_reward=True)


def test_env_group_refuses_a_max_turns_of_its_own():
    with pytest.raises(TypeError, match="each member environment keeps its own"):
        EnvGroup([GuessEnv(num_examples=1)], ["g"], max_turns=3)


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


# ------------------------------------------------------ EnvGroup: generate


def echo_system(messages: list[dict[str, Any]]) -> str:
    return messages[0]["content"] if messages[0]["role"] == "system" else "(no system prompt)"


async def test_env_group_generate_formats_raw_rows_with_their_members_prompts(model_server):
    tools = ToolEnv(tools=[add], dataset=[{"question": "q"}], system_prompt="Use tools.")
    plain = SingleTurnEnv(dataset=[{"question": "q"}], system_prompt="Be brief.")
    group = EnvGroup([tools, plain], env_names=["tools", "plain"])
    server = await model_server(echo_system)
    rows = [{"question": "hi", "task": "plain"}, {"question": "yo", "task": "tools"}]
    out = await group.generate(rows, server.client(), "m")
    assert [c[-1]["content"] for c in out.completion] == ["Be brief.", "Use tools."]
    assert out.task == ["plain", "tools"] and out.example_id == [0, 1]
    assert "tools" not in server.requests[0] and "tools" in server.requests[1]


@pytest.mark.parametrize("row", [{"question": "hi"}, {"question": "hi", "task": "chess"}])
async def test_env_group_generate_refuses_a_raw_row_without_a_member(model_server, row):
    group = EnvGroup([SingleTurnEnv(dataset=[{"question": "q"}])], env_names=["plain"])
    server = await model_server(echo_system)
    with pytest.raises(ValueError, match=r"input row 0 has no .prompt.*tasks are \[.plain.\]"):
        await group.generate([row], server.client(), "m")
    assert server.requests == []


class Ranked(Rubric):
    """Ranks the batch's answers by length in `score_group`, then rewards the rank."""

    async def score_group(self, states: list[State], **kwargs: Any) -> None:
        answers = kwargs["completions"]
        order = sorted(range(len(states)), key=lambda i: len(answers[i][-1]["content"]))
        for rank, i in enumerate(order):
            states[i]["rank"] = float(rank)


def rank(state: State) -> float:
    return state["rank"]


async def test_env_group_rubric_runs_each_members_score_group():
    ranked = SingleTurnEnv(dataset=[{"question": "q"}], rubric=Ranked(funcs=[rank]))
    group = EnvGroup([ranked, SingleTurnEnv(dataset=[{"question": "q"}])], ["ranked", "plain"])
    texts, tasks = ["xxx", "y", "zz", "w"], ["ranked", "plain", "ranked", "plain"]
    states = [
        {"prompt": [], "completion": [{"role": "assistant", "content": t}], "task": task}
        for t, task in zip(texts, tasks, strict=True)
    ]
    scores = await group.rubric.score_rollouts(
        [[]] * 4, [s["completion"] for s in states], [""] * 4, states, tasks, [{}] * 4
    )
    assert scores.reward[0] == 1.0 and scores.reward[2] == 0.0  # ranked within its task
    assert not any(s.get("reward_errors") for s in states)


class Closing(GuessEnv):
    """A member holding something to release (as a SandboxEnv holds containers)."""

    def __init__(self, closed: list[str], name: str, fail: bool = False) -> None:
        super().__init__(num_examples=1)
        self.closed, self.name, self.fail = closed, name, fail

    async def aclose(self) -> None:
        self.closed.append(self.name)
        if self.fail:
            raise RuntimeError(f"{self.name} could not release")


async def test_env_group_aclose_releases_every_member_even_when_one_fails():
    closed: list[str] = []
    group = EnvGroup(
        [Closing(closed, "a", fail=True), GuessEnv(num_examples=1), Closing(closed, "b")],
        ["a", "plain", "b"],
    )
    with pytest.raises(RuntimeError, match="a could not release"):
        await group.aclose()
    assert closed == ["a", "b"]
    # A Gym env that owns the group releases it on close.
    closed.clear()
    owner = vgym.GymEnv(EnvGroup([Closing(closed, "c")], ["c"]), owns_environment=True)
    owner.reset(seed=0)
    owner.close()
    assert closed == ["c"]


def test_member_hooks_reached_through_the_group_are_the_members():
    """The group's hook API (what `vfgym play` and the adapter call) is the member's."""
    group, _, guess = calc_and_guess()
    assert isinstance(group, MultiTurnEnv)
    state = {"task": "guess", "game_state": {"guesses": [1], "won": False}}
    assert group.render_state(state) == guess.render_state(state)
    assert group.render_state({"task": "calc"}) == ""
