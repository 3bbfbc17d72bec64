"""Mastermind: peg scores by hand, invalid codes, knobs, Knuth's five-guess bound."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from game_play import evaluate_over_http, play
from vfgym.games import mastermind as mm

import vfgym
from vfgym.errors import InvalidMove

CLASSIC = (4, 6, True)


def game(secret: str, colours: int = 6, repeats: bool = True) -> dict[str, Any]:
    info = {
        "secret": secret,
        "pegs": len(secret),
        "colours": colours,
        "repeats": repeats,
        "max_guesses": 10,
    }
    return mm.load_environment(num_examples=1).new_game(info)


@pytest.mark.parametrize(
    "guess, secret, pegs",
    [
        ("ABCD", "ABCD", (4, 0)),
        ("ABCD", "DCBA", (0, 4)),
        ("AABB", "ABAB", (2, 2)),
        ("AAAA", "AABB", (2, 0)),  # the two other As find no A left: no white
        ("AAAB", "ABBB", (2, 0)),  # one A and one B in common, both already black
        ("ABCA", "AACB", (2, 2)),  # A and C black; the second A and the B white
        ("FFEE", "EFFE", (2, 2)),
        ("ABCD", "EEFF", (0, 0)),
    ],
)
def test_scores_on_hand_worked_guesses(guess: str, secret: str, pegs: tuple[int, int]) -> None:
    assert mm.score_guess(guess, secret) == pegs


def test_vectorised_scores_agree_with_the_rule() -> None:
    codes = mm.code_space(*CLASSIC)
    rng = random.Random(3)
    guesses = np.array(rng.sample(range(len(codes)), 40))
    secrets = np.array(rng.sample(range(len(codes)), 40))
    table = mm.score_codes(CLASSIC, guesses, secrets)
    for i, g in enumerate(guesses):
        for j, s in enumerate(secrets):
            black, white = mm.score_guess(codes[g], codes[s])
            assert table[i, j] == black * 10 + white


def test_a_hand_played_game() -> None:
    env = mm.load_environment(num_examples=1)
    state = game("ABCA")
    text = env.apply_move(state, "AACB")
    assert text.startswith("AACB: black 2 white 2. 9 guesses left.")
    assert "1. AACB  black 2 white 2" in text
    text = env.apply_move(state, "a b c a")
    assert "Cracked in 2 guesses" in text and env.is_over(state) and env.score(state) == 1.0
    assert env.render(state) == "1. AACB  black 2 white 2\n2. ABCA  black 4 white 0\n(cracked)"


def test_running_out_of_guesses_loses_and_reveals_the_code() -> None:
    env = mm.load_environment(num_examples=1)
    state = game("ABCD")
    for _ in range(10):
        text = env.apply_move(state, "EEEE")
    assert env.is_over(state) and env.score(state) == 0.0
    assert "Out of guesses: it was ABCD." in text


def test_invalid_codes_leave_the_game_unchanged() -> None:
    env = mm.load_environment(num_examples=1)
    state = game("ABCD")
    for move, message in (("ABC", "is not a code"), ("ABCG", "is not a code"), ("", "not a code")):
        with pytest.raises(InvalidMove, match=message):
            env.apply_move(state, move)
    assert state == game("ABCD")
    strict = game("ABCD", repeats=False)
    with pytest.raises(InvalidMove, match="repeats a colour"):
        env.apply_move(strict, "AABC")


def test_invalid_moves_end_the_game() -> None:
    env = mm.load_environment(num_examples=1)
    row = env.get_dataset()[0]
    state = play(env, row, lambda m: {"role": "assistant", "content": "<move>red red</move>"})
    assert state["invalid_moves"] == 3 and state["reward"] == 0.0
    assert "like <move>ABCD</move>" in state["messages"][-1]["content"]


def test_items_are_pure_functions_of_seed_and_index() -> None:
    a = mm.load_environment(num_examples=20, seed=1).get_dataset()
    b = mm.load_environment(num_examples=5, seed=1).get_dataset()
    c = mm.load_environment(num_examples=20, seed=2).get_dataset()
    assert [r["answer"] for r in a[:5]] == [r["answer"] for r in b]
    assert [r["answer"] for r in a] != [r["answer"] for r in c]
    rows = mm.load_environment(num_examples=20, difficulty="hard", repeats=False).get_dataset()
    assert all(len(set(r["answer"])) == 5 and set(r["answer"]) <= set("ABCDEFGH") for r in rows)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"difficulty": "x"}, "difficulty must be one of"),
        ({"pegs": 1}, "pegs must be between 2 and 6"),
        ({"colours": 11}, "colours must be between 2 and 10"),
        ({"pegs": 5, "colours": 4, "repeats": False}, "needs at least 5 colours"),
        ({"pegs": 6, "colours": 9}, "more than the 100,000"),
        ({"max_guesses": 0}, "max_guesses must be between 1 and 30"),
    ],
)
def test_bad_knobs_are_refused_clearly(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        mm.load_environment(**kwargs)


# -- the reference policy --------------------------------------------------------


def test_knuth_cracks_every_classic_code_within_five() -> None:
    """The whole decision tree of the classic game: all 1,296 codes."""
    codes = mm.code_space(*CLASSIC)
    depths: list[int] = []

    def walk(history: list[tuple[str, int, int]]) -> None:
        cands = mm.consistent(CLASSIC, history)
        guess = mm.opening(CLASSIC) if not history else codes[mm.best_guess(CLASSIC, cands)]
        groups: dict[tuple[int, int], int] = {}
        for c in cands:
            black, white = mm.score_guess(guess, codes[c])
            groups[(black, white)] = groups.get((black, white), 0) + 1
        for black, white in groups:
            if black == 4:
                depths.append(len(history) + 1)
            else:
                walk([*history, (guess, black, white)])

    walk([])
    assert mm.opening(CLASSIC) == "AABB" and len(depths) == 1296
    assert max(depths) == 5 and sum(depths) / 1296 == pytest.approx(4.476, abs=1e-3)


async def test_reference_cracks_every_seed_over_http() -> None:
    env = vfgym.load_environment("mastermind", num_examples=50)
    (out,) = await evaluate_over_http(env, 50, "reference")
    assert out.reward == [1.0] * 50
    assert max(out.metrics["turns"]) <= 5 and out.metrics["invalid_moves"] == [0.0] * 50


@pytest.mark.parametrize("kwargs", [{"difficulty": "easy"}, {"difficulty": "hard"}])
def test_reference_wins_every_seed_and_random_does_not(kwargs: dict[str, Any]) -> None:
    env = mm.load_environment(num_examples=50, seed=4, **kwargs)
    rows = env.get_dataset()
    assert [play(env, row, env.reference_policy)["reward"] for row in rows] == [1.0] * 50
    rand = [play(env, row, env.make_random_policy(i))["reward"] for i, row in enumerate(rows)]
    assert sum(rand) / 50 < 0.3
