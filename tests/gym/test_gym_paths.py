"""`reset`/`step` take a shortest way for the usual env, a game's: sync hooks, the
default initial State, text in and out. `areset`/`astep` take the general way. Both
must give the same observations, rewards, ends, infos and States."""

from __future__ import annotations

import random
from typing import Any

import pytest
from gym_test_envs import GuessEnv

from vfgym.envs.registry import list_environments, load_environment
from vfgym.gym import GymEnv
from vfgym.types import State

GAMES = sorted(info.name for info in list_environments() if info.kind == "game")


def same_step(ours: tuple[Any, ...], theirs: tuple[Any, ...]) -> None:
    *result, info = ours
    *expected, expected_info = theirs
    assert result == expected
    assert info.keys() == expected_info.keys()
    assert info["messages"] == expected_info["messages"]
    assert info["state"] == expected_info["state"]  # (the views compare without clocks)
    assert {k: v for k, v in info.items() if k not in ("state", "messages")} == {
        k: v for k, v in expected_info.items() if k not in ("state", "messages")
    }


def a_move(env: Any, messages: list[dict[str, Any]], rng: random.Random) -> str:
    """The reference player's move, a random one, or an unreadable reply."""
    roll = rng.random()
    if roll < 0.4:
        return env.reference_policy(messages)["content"]
    if roll < 0.85:
        return f"<move>{env.random_move(messages, rng)}</move>"
    return rng.choice(["<move></move>", "pass", "<move>??</move>"])


@pytest.mark.parametrize("name", GAMES)
async def test_a_games_episodes_are_the_same_either_way(name: str) -> None:
    game = load_environment(name, num_examples=3)
    shortest, general = GymEnv(game), GymEnv(game)
    rng = random.Random(name)
    try:
        for seed in range(4):
            first = shortest.reset(seed=seed)
            same_step(first, await general.areset(seed=seed))
            info = first[1]
            while True:
                move = a_move(game, info["messages"], rng)
                result = shortest.step(move)
                same_step(result, await general.astep(move))
                info = result[-1]
                if result[2] or result[3]:
                    break
    finally:
        shortest.close()
        await general.aclose()


class _HardModeGuessEnv(GuessEnv):
    """A setup that rewrites the prompt's text and answers with a new dict."""

    def setup_state(self, state: State, **kwargs: Any) -> dict[str, Any]:
        state = dict(GuessEnv.setup_state(self, state))
        state["prompt"][-1]["content"] += " (hard mode)"
        state["mode"] = "hard"
        return state


async def test_a_setup_that_rewrites_the_prompt_is_observed_either_way() -> None:
    shortest, general = GymEnv(_HardModeGuessEnv()), GymEnv(_HardModeGuessEnv())
    try:
        for _ in range(2):  # the second time, the first observation was seen before
            observation, info = shortest.reset(options={"index": 1})
            same_step((observation, info), await general.areset(options={"index": 1}))
            assert observation.endswith(" (hard mode)") and info["state"]["mode"] == "hard"
        row = shortest.environment.get_dataset()[1]
        assert not row["prompt"][-1]["content"].endswith(" (hard mode)")  # the row kept
    finally:
        shortest.close()
        await general.aclose()


class _SometimesHardGuessEnv(GuessEnv):
    """A setup that rewrites the prompt of every other episode only."""

    setups = 0

    def setup_state(self, state: State, **kwargs: Any) -> State:
        state = GuessEnv.setup_state(self, state)
        self.setups += 1
        if self.setups % 2 == 0:
            state["prompt"][-1]["content"] += " (hard mode)"
        return state


async def test_a_setup_that_rewrites_some_prompts_is_observed_each_time() -> None:
    shortest, general = GymEnv(_SometimesHardGuessEnv()), GymEnv(_SometimesHardGuessEnv())
    try:
        for episode in range(4):  # the same row each time: shown before from the second on
            observation, info = shortest.reset(options={"index": 1})
            same_step((observation, info), await general.areset(options={"index": 1}))
            assert observation.endswith(" (hard mode)") == (episode % 2 == 1)
    finally:
        shortest.close()
        await general.aclose()


async def test_a_dataset_row_changed_in_place_is_observed_at_its_next_reset() -> None:
    shortest, general = GymEnv(GuessEnv()), GymEnv(GuessEnv())
    try:
        first, _ = shortest.reset(options={"index": 2})
        assert "new question" not in first
        await general.areset(options={"index": 2})
        for env in (shortest, general):
            env.rows[2]["prompt"][-1]["content"] = "A new question: guess again."
        observation, info = shortest.reset(options={"index": 2})
        same_step((observation, info), await general.areset(options={"index": 2}))
        assert observation.endswith("A new question: guess again.")
    finally:
        shortest.close()
        await general.aclose()
