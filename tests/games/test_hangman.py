"""Hangman: reveals and misses by hand, whole-word guesses, invalid moves, the reference."""

from __future__ import annotations

import itertools
import random
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


def hangman_env(**kwargs: Any) -> hm.HangmanEnv:
    return hm.load_environment(num_examples=1, **kwargs)


def test_hangman_repeated_letters_and_words_are_refused_without_cost() -> None:
    env = hangman_env()
    game = env.new_game({"word": "banana", "max_misses": 6})
    env.apply_move(game, "a")
    env.apply_move(game, "z")
    env.apply_move(game, "bandit")
    before = {k: (list(v) if isinstance(v, list) else v) for k, v in game.items()}
    for move in ("a", "A", "z", "BANDIT"):
        with pytest.raises(InvalidMove):
            env.apply_move(game, move)
    assert game == before and game["misses"] == 2


def test_hangman_whole_word_guesses() -> None:
    env = hangman_env()
    game = env.new_game({"word": "banana", "max_misses": 6})
    text = env.apply_move(game, "a")
    assert text.startswith("A is in the word (3 times).") and "Word: _ A _ A _ A" in text
    text = env.apply_move(game, "cabana")
    assert text.startswith("CABANA is not the word.") and game["misses"] == 1
    assert "Wrong words: CABANA" in text and "Misses: 1 of 6" in text
    text = env.apply_move(game, "Banana")
    assert env.is_over(game) and env.score(game) == 1.0
    assert "You found BANANA with 1 miss." in text and "Word: B A N A N A" in text


def test_hangman_losing_on_misses_reveals_the_word() -> None:
    env = hangman_env()
    game = env.new_game({"word": "banana", "max_misses": 2})
    env.apply_move(game, "q")
    text = env.apply_move(game, "bandit")
    assert "Out of misses: the word was BANANA." in text
    assert env.is_over(game) and env.score(game) == 0.0


def test_hangman_default_turns_let_a_winnable_game_finish() -> None:
    """A game is lost when the misses run out, not by the turn limit: a player who spends
    many misses on whole words and still finds the word in time must be allowed to."""
    env = hangman_env(difficulty="easy", max_misses=20)  # words of up to 12 letters
    word = "abcdefghijkl"  # twelve different letters: twelve hits to reveal it
    game = env.new_game({"word": word, "max_misses": 20})
    pairs = itertools.product("yz", "abcdefghijklmnopqrstuvwxyz")
    wrong = [f"{'z' * 10}{a}{b}" for a, b in itertools.islice(pairs, 19)]
    moves = [*wrong, *word]
    for move in moves:
        env.apply_move(game, move)
    assert env.score(game) == 1.0 and game["misses"] == 19
    assert len(moves) <= env.max_turns - env.max_invalid_moves


def test_hangman_reference_candidates_match_a_plain_filter() -> None:
    rng = random.Random(4)
    pool = hm.words_by_length()[6]
    for _ in range(60):
        word = rng.choice(pool)
        guessed = rng.sample("abcdefghijklmnopqrstuvwxyz", rng.randint(1, 8))
        shown = hm.pattern(word, guessed)
        want = [
            w
            for w in pool
            if all(
                (c in guessed and c == s) or (c not in guessed and s == "_")
                for c, s in zip(w, shown, strict=True)
            )
        ]
        assert hm.candidates(shown, set(guessed), set()) == want


def test_hangman_board_is_the_independent_bookkeeping() -> None:
    env = hangman_env(difficulty="easy")
    rng = random.Random(15)
    for row in hm.load_environment(num_examples=30, seed=15).get_dataset():
        word = row["answer"]
        game = env.new_game(row["info"])
        guessed: list[str] = []
        misses = 0
        while not env.is_over(game):
            letter = rng.choice([c for c in "abcdefghijklmnopqrstuvwxyz" if c not in guessed])
            guessed.append(letter)
            misses += letter not in word
            text = env.apply_move(game, letter)
            shown = " ".join(c.upper() if c in guessed else "_" for c in word)
            assert f"Word: {shown}  ({len(word)} letters)" in text
            assert f"Misses: {misses} of 6" in text
        assert env.score(game) == float(all(c in guessed for c in word))
        assert (misses >= 6) != (env.score(game) == 1.0)


def test_hangman_one_miss_and_one_allowed_miss_are_singular() -> None:
    env = hm.load_environment(num_examples=1, max_misses=1)
    assert "You may miss 1 time.\n" in env.dataset[0]["prompt"][-1]["content"]
    game = env.new_game({"word": "banana", "max_misses": 2})
    env.apply_move(game, "q")
    text = env.apply_move(game, "banana")
    assert "You found BANANA with 1 miss." in text
