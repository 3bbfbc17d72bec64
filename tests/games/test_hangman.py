"""Hangman: reveals and misses by hand, whole-word guesses, invalid moves, the reference."""

from __future__ import annotations

from typing import Any

import pytest
from game_play import evaluate_over_http, play
from vfgym.games import hangman as hm

import vfgym
from vfgym.errors import InvalidMove


def test_a_hand_played_game() -> None:
    env = hm.load_environment(num_examples=1)
    game = hm.start_game("letter", max_misses=6)
    text = env.apply_move(game, "t")
    assert text.startswith("T is in the word (2 times).")
    assert "Word: _ _ T T _ _  (6 letters)\nMisses: 0 of 6\nGuessed letters: T" in text
    text = env.apply_move(game, "Z")
    assert text.startswith("No Z in the word.") and "Misses: 1 of 6 (Z)" in text
    text = env.apply_move(game, "e")
    assert "Word: _ E T T E _" in text and game["step_revealed"] == 2
    text = env.apply_move(game, "better")
    assert "BETTER is not the word." in text and "Wrong words: BETTER" in text
    assert game["misses"] == 2 and not env.is_over(game)
    text = env.apply_move(game, "letter")
    assert "LETTER is the word! You found LETTER with 2 misses." in text
    assert game["step_revealed"] == 2 and env.score(game) == 1.0
    assert env.efficiency(game, {}) == pytest.approx(1 - 2 / 7)


def test_revealing_the_last_letter_wins_and_misses_run_out() -> None:
    env = hm.load_environment(num_examples=1)
    game = hm.start_game("noon", max_misses=2)
    env.apply_move(game, "n")
    assert "You found NOON" in env.apply_move(game, "o") and env.is_over(game)
    game = hm.start_game("noon", max_misses=2)
    env.apply_move(game, "a")
    text = env.apply_move(game, "moon")
    assert "Out of misses: the word was NOON." in text and env.score(game) == 0.0


def test_invalid_moves_leave_the_game_unchanged() -> None:
    env = hm.load_environment(num_examples=1)
    game = hm.start_game("letter", max_misses=6)
    env.apply_move(game, "e")
    env.apply_move(game, "better")
    snapshot = {k: list(v) if isinstance(v, list) else v for k, v in game.items()}
    for move, message in (
        ("ab", "neither one letter nor a 6-letter word"),
        ("7", "neither one letter"),
        ("lettered", "neither one letter"),
        ("é", "neither one letter"),
        ("E", "E was already guessed"),
        ("Better", "BETTER was already guessed"),
    ):
        with pytest.raises(InvalidMove, match=message):
            env.apply_move(game, move)
    assert game == snapshot


def test_invalid_moves_end_the_game_and_earn_no_step_reward() -> None:
    env = hm.load_environment(num_examples=1, max_invalid_moves=2)
    row = env.get_dataset()[0]
    state = play(env, row, lambda m: {"role": "assistant", "content": "<move>12</move>"})
    assert state["invalid_moves"] == 2 and state["reward"] == 0.0
    assert env.step_reward(state) == 0.0


def test_candidates_fit_the_board() -> None:
    words = hm.candidates("_a__", {"a", "e"}, {"back"})
    assert words and "back" not in words and "calm" in words
    assert all(w[1] == "a" and "a" not in w[0] + w[2:] and "e" not in w for w in words)
    shown, guessed, wrong = hm.read_board(
        [{"role": "user", "content": "Word: _ A _ _  (4 letters)\nGuessed letters: A E"}]
    )
    assert (shown, guessed, wrong) == ("_a__", {"a", "e"}, set())


def test_items_are_pure_functions_of_seed_and_index() -> None:
    a = hm.load_environment(num_examples=20, seed=1).get_dataset()
    b = hm.load_environment(num_examples=5, seed=1).get_dataset()
    c = hm.load_environment(num_examples=20, seed=2).get_dataset()
    assert [r["answer"] for r in a[:5]] == [r["answer"] for r in b]
    assert [r["answer"] for r in a] != [r["answer"] for r in c]
    hard = hm.load_environment(num_examples=20, difficulty="hard").get_dataset()
    assert all(4 <= len(r["answer"]) <= 5 for r in hard)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"difficulty": "x"}, "difficulty must be one of"),
        ({"min_length": 3}, "min_length <= max_length"),
        ({"min_length": 9, "max_length": 7}, "min_length <= max_length"),
        ({"max_misses": 0}, "max_misses must be between 1 and 25"),
    ],
)
def test_bad_knobs_are_refused_clearly(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        hm.load_environment(**kwargs)


# -- the reference policy --------------------------------------------------------


async def test_reference_finds_every_long_word_over_http() -> None:
    env = vfgym.load_environment("hangman", num_examples=50, difficulty="easy")
    (out,) = await evaluate_over_http(env, 50, "reference")
    assert out.reward == [1.0] * 50 and out.metrics["invalid_moves"] == [0.0] * 50


@pytest.mark.parametrize("difficulty, floor", [("medium", 0.9), ("hard", 0.55)])
def test_reference_beats_random_by_a_clear_margin(difficulty: str, floor: float) -> None:
    env = hm.load_environment(num_examples=60, seed=3, difficulty=difficulty)
    rows = env.get_dataset()
    best = [play(env, row, env.reference_policy)["reward"] for row in rows]
    rand = [play(env, row, env.make_random_policy(i))["reward"] for i, row in enumerate(rows)]
    assert sum(best) / 60 >= floor and sum(rand) / 60 <= 0.1
