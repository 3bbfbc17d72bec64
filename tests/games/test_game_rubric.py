"""The catalogue's rubric scores a Gym episode's end in one pass; the result must be
the one its five reward functions give, called one by one as any rubric calls them."""

from __future__ import annotations

import copy
import math
import random
from typing import Any

import pytest
from vfgym.games import guess_the_number as gtn
from vfgym.games._base import GameRubric

from vfgym.envs.registry import list_environments, load_environment
from vfgym.gym import GymEnv
from vfgym.rubrics import REWARD_ERRORS, Rubric

GAMES = sorted(info.name for info in list_environments() if info.kind == "game")


def scored_by_functions(rubric: Rubric, state: dict[str, Any]) -> tuple[float, dict[str, float]]:
    """What the general path gives for a copy of `state`: each function called and checked."""
    return Rubric.score_state_sync(rubric, copy.deepcopy(state))


def same(a: dict[str, float], b: dict[str, float]) -> bool:
    return a.keys() == b.keys() and all(
        a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])) for k in a
    )


@pytest.fixture
def general_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the calls of the general path (which still runs as it is)."""
    calls: list[int] = []
    general = Rubric.score_state_sync

    def counted(self: Rubric, state: dict[str, Any]) -> tuple[float, dict[str, float]]:
        calls.append(1)
        return general(self, state)

    monkeypatch.setattr(Rubric, "score_state_sync", counted)
    return calls


@pytest.mark.parametrize("name", GAMES)
def test_every_games_episode_end_scores_as_its_functions_do(name: str) -> None:
    env = load_environment(name, num_examples=4)
    assert isinstance(env.rubric, GameRubric)
    gym_env = GymEnv(env)
    rng = random.Random(name)
    ends: set[tuple[str, bool]] = set()
    try:
        for episode in range(12):
            gym_env.reset(seed=episode)
            style = episode % 3  # the reference player, random moves, or unreadable replies
            while True:
                messages = gym_env.state["prompt"] + gym_env.state["completion"]
                if style == 0:
                    move = env.reference_policy(messages)["content"]
                elif style == 1:
                    move = f"<move>{env.random_move(messages, rng)}</move>"
                else:
                    move = rng.choice(["<move></move>", "no idea", "<MOVE>?</MOVE>"])
                _, reward, terminated, truncated, info = gym_env.step(move)
                if terminated or truncated:
                    break
            state = dict(gym_env.state)
            expected = scored_by_functions(env.rubric, state)
            assert reward == expected[0]
            assert same(info["metrics"], expected[1])
            assert state["timing"]["scoring_ms"] >= 0.0
            ends.add((state["stop_reason"], info["metrics"]["win"] > 0))
    finally:
        gym_env.close()
    assert len(ends) >= 2, ends  # more than one way of ending was compared


def test_a_usual_end_does_not_call_the_functions_one_by_one(general_calls: list[int]) -> None:
    env = gtn.load_environment(num_examples=2)
    gym_env = GymEnv(env)
    try:
        gym_env.reset(seed=0)
        while True:
            messages = gym_env.state["prompt"] + gym_env.state["completion"]
            move = env.reference_policy(messages)["content"]
            *_, terminated, truncated, info = gym_env.step(move)
            if terminated or truncated:
                break
        assert terminated and info["metrics"]["win"] == 1.0
        assert general_calls == []
    finally:
        gym_env.close()


class _OddScores(gtn.GuessTheNumberEnv):
    """Guess the number whose score or efficiency the test chooses."""

    score_value: Any = 1.0
    efficiency_error: Exception | None = None

    def score(self, game: dict[str, Any]) -> float:
        return self.score_value

    def efficiency(self, game: dict[str, Any], state: dict[str, Any]) -> float:
        if self.efficiency_error is not None:
            raise self.efficiency_error
        return super().efficiency(game, state)


def won_state(env: gtn.GuessTheNumberEnv) -> dict[str, Any]:
    """A finished State of a game won on its first guess."""
    row = env.get_dataset()[0]
    gym_env = GymEnv(env)
    gym_env.reset(options={"index": 0})
    state = dict(gym_env.state)
    gym_env.close()
    state["game_state"]["guesses"] = [row["info"]["target"]]
    state["game_state"]["won"] = True
    state["turn"] = state["tagged_moves"] = 1
    return state


def odd_game(**attributes: Any) -> _OddScores:
    base = gtn.load_environment(num_examples=1)
    env = _OddScores(
        dataset=base.get_dataset(), system_prompt=gtn.SYSTEM_PROMPT, max_turns=base.max_turns
    )
    for name, value in attributes.items():
        setattr(env, name, value)
    return env


@pytest.mark.parametrize(
    "attributes",
    [
        {"score_value": math.nan},
        {"score_value": math.inf},
        {"score_value": "1"},  # float("1") works in the function: the same here
        {"efficiency_error": RuntimeError("efficiency broke")},
    ],
    ids=["nan", "inf", "text", "raises"],
)
def test_an_odd_value_or_a_raising_method_is_scored_and_recorded_as_the_functions_do(
    attributes: dict[str, Any], general_calls: list[int]
) -> None:
    env = odd_game(**attributes)
    state = won_state(env)
    expected_reward, expected = scored_by_functions(env.rubric, state)
    del general_calls[:]
    reward, metrics = env.rubric.score_state_sync(state)
    # (text that float() reads is read the same way in one pass)
    assert general_calls == ([] if attributes.get("score_value") == "1" else [1])
    assert same(metrics, expected)
    assert reward == expected_reward or (math.isnan(reward) and math.isnan(expected_reward))
    errors = [entry["func"] for entry in state.get(REWARD_ERRORS, [])]
    assert errors == [name for name, value in expected.items() if math.isnan(value)]


def test_changed_weights_or_functions_are_scored_as_given(general_calls: list[int]) -> None:
    env = gtn.load_environment(num_examples=1)
    state = won_state(env)
    env.rubric.reward_weights[3] = 0.5  # efficiency now counts
    reward, metrics = env.rubric.score_state_sync(copy.deepcopy(state))
    assert general_calls == [1]
    assert reward == 1.0 + 0.5 * metrics["efficiency"] and metrics["efficiency"] > 0
    env.rubric.reward_weights[3] = 0.0
    env.rubric.add_reward_func(lambda state: 2.0, weight=1.0)
    reward, metrics = env.rubric.score_state_sync(copy.deepcopy(state))
    assert general_calls == [1, 1] and reward == 3.0 and metrics["<lambda>"] == 2.0
