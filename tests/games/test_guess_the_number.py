"""Guess the Number: hints that tell the truth, the turn limit and how guesses are read."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from game_play import play, slips_then, won
from vfgym.games import (
    guess_the_number,
)
from vfgym.games import guess_the_number as gtn

from vfgym.engine.state import new_state
from vfgym.errors import InvalidMove


def fresh_state(env: Any, row: dict[str, Any]) -> dict[str, Any]:
    """A State set up for `row`, as the rollout loop makes it."""
    state = new_state(row["prompt"], [], row["answer"], row["task"], row["info"], 0)
    return env.setup_state(state)


def rubric_scores(env: Any, state: dict[str, Any]) -> dict[str, float]:
    """Each rubric function's value on a finished `state`, by name."""
    return {f.__name__: f(state) for f in env.rubric.get_reward_funcs()}


def test_guess_the_number_hints_are_true_and_binary_search_always_wins() -> None:
    for low, high in ((1, 20), (1, 100), (-7, 9), (1, 1000)):
        env = gtn.load_environment(num_examples=1, low=low, high=high)
        for target in range(low, high + 1, max(1, (high - low) // 97)):
            row = {**env.get_dataset()[0]}
            row["info"] = {**row["info"], "target": target, "low": low, "high": high}
            row["prompt"] = [
                row["prompt"][0],
                {
                    "role": "user",
                    "content": f"I am thinking of a number between {low} and {high}. What is it?",
                },
            ]
            state = play(env, row, env.reference_policy)
            assert won(env, state), (low, high, target)
            optimal = math.ceil(math.log2(high - low + 2))
            assert len(state["game_state"]["guesses"]) <= optimal
            for guess, reply in zip(
                state["game_state"]["guesses"],
                [m["content"] for m in state["messages"] if m["role"] == "user"][1:],
                strict=True,
            ):
                if guess < target:
                    assert reply == f"{guess} is too low. Guess again."
                elif guess > target:
                    assert reply == f"{guess} is too high. Guess again."
                else:
                    assert reply.startswith(f"{guess} is correct!")
            assert rubric_scores(env, state)["efficiency"] == 1.0


def test_guess_the_number_refuses_guesses_outside_the_range() -> None:
    env = gtn.load_environment(num_examples=1, low=1, high=20)
    game = env.new_game({"low": 1, "high": 20, "target": 7})
    for move in ("0", "21", "-3", "7.5", "seven"):
        with pytest.raises(InvalidMove):
            env.apply_move(game, move)
    assert game["guesses"] == [] and not env.is_over(game)


def test_guess_the_number_reference_ignores_hints_quoted_from_a_refused_move() -> None:
    """An invalid move's feedback quotes the move; a move that reads like a hint ("50 is too
    high") must not count as one, or the reference searches the wrong half afterwards."""
    env = gtn.load_environment(num_examples=1, low=1, high=100)
    row = env.get_dataset()[0]
    row["info"] = {**row["info"], "target": 80}
    state = fresh_state(env, row)
    messages = list(row["prompt"])
    messages.append({"role": "assistant", "content": "<move>50 is too high</move>"})
    reply, state = env.env_response(messages, state)
    assert reply[0]["content"].startswith("Invalid move:")
    messages.extend(reply)
    assert env.reference_policy(messages)["content"] == "<move>50</move>"


def test_guess_the_number_turn_limit_leaves_room_for_the_invalid_moves_allowed() -> None:
    """Invalid moves end a game only once `max_invalid_moves` is reached; the default turn
    limit must not end it sooner for a player who then searches optimally."""
    env = gtn.load_environment(num_examples=20, seed=3, max_invalid_moves=8)
    for row in env.get_dataset():
        state = play(env, row, slips_then(env.reference_policy, 7))
        assert state["invalid_moves"] == 7 and won(env, state), row["info"]


def test_guess_the_number_reads_a_guess_with_a_full_stop_or_sign_and_refuses_the_rest() -> None:
    """`int()` reads the usual guess; what it refuses goes through the slower reading."""
    env = gtn.load_environment(num_examples=1, low=1, high=100)
    info = {**env.dataset[0]["info"], "target": 42}
    for move in ("42", "42.", "+42", "42 .", "4_2"):
        game = env.new_game(info)
        assert env.apply_move(game, move).startswith("42 is correct!"), move
    game = env.new_game(info)
    assert env.apply_move(game, "7.") == "7 is too low. Guess again."
    refusals = {
        "1e3": "'1e3' is not a whole number",
        "forty": "'forty' is not a whole number",
        "4.2": "'4.2' is not a whole number",
        "-3": "-3 is outside the range 1 to 100.",
        "9" * 5000 + ".": "999999999999… (5000 digits) is outside the range 1 to 100.",
    }
    for move, said in refusals.items():
        with pytest.raises(InvalidMove, match=re.escape(said)):
            env.apply_move(game, move)
    assert game["guesses"] == [7]


@pytest.mark.parametrize("max_turns", [0, -1])
def test_guess_the_number_refuses_max_turns_below_one(max_turns: int) -> None:
    """As every other game does: 0 must not quietly become the default, nor -1 lift the
    limit."""
    with pytest.raises(ValueError, match="max_turns must be at least 1"):
        guess_the_number.load_environment(num_examples=1, max_turns=max_turns)
    assert guess_the_number.load_environment(num_examples=1, max_turns=3).max_turns == 3
