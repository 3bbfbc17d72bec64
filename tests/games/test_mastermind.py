"""Mastermind: peg scores by hand, invalid codes, knobs, Knuth's five-guess bound."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from game_play import evaluate_over_http, play, reference_after_a_slip, won
from vfgym.games import (
    mastermind,
)
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


def brute_pegs(guess: str, secret: str) -> tuple[int, int]:
    """Black pegs in place; whites by pairing each remaining guess peg with an unused
    remaining hidden peg of its colour, one at a time."""
    black = [g == s for g, s in zip(guess, secret, strict=True)]
    unused = [s for s, b in zip(secret, black, strict=True) if not b]
    white = 0
    for g, b in zip(guess, black, strict=True):
        if not b and g in unused:
            unused.remove(g)
            white += 1
    return sum(black), white


def test_mastermind_scores_agree_with_a_brute_force_scorer() -> None:
    rng = random.Random(3)
    for pegs, colours in ((2, 2), (3, 3), (4, 6), (5, 3), (6, 4)):
        letters = mm.ALPHABET[:colours]
        for _ in range(800):
            guess = "".join(rng.choice(letters) for _ in range(pegs))
            secret = "".join(rng.choice(letters) for _ in range(pegs))
            assert mm.score_guess(guess, secret) == brute_pegs(guess, secret), (guess, secret)
    space = (4, 6, True)
    codes = mm.code_space(*space)
    picks = np.array(rng.sample(range(len(codes)), 200))
    scores = mm.score_codes(space, picks, picks)
    for i, g in enumerate(picks):
        for j, s in enumerate(picks):
            black, white = brute_pegs(codes[g], codes[s])
            assert scores[i, j] == black * 10 + white


def test_mastermind_feedback_and_board_tell_the_truth() -> None:
    env = mm.load_environment(num_examples=1)
    game = env.new_game(
        {"secret": "AABC", "pegs": 4, "colours": 6, "repeats": True, "max_guesses": 3}
    )
    text = env.apply_move(game, "CAAA")
    assert text.startswith("CAAA: black 1 white 2. 2 guesses left.")
    assert "1. CAAA  black 1 white 2" in text
    env.apply_move(game, "FFFF")
    text = env.apply_move(game, "BBBB")
    assert "Out of guesses: it was AABC." in text and env.is_over(game)
    assert env.score(game) == 0.0


@pytest.mark.parametrize(
    "kwargs", [{"difficulty": "easy"}, {"difficulty": "hard"}, {"repeats": False}]
)
def test_mastermind_reference_cracks_every_seed(kwargs: dict[str, Any]) -> None:
    env = mm.load_environment(num_examples=40, seed=5, **kwargs)
    for row in env.get_dataset():
        state = play(env, row, env.reference_policy)
        assert won(env, state), row["info"]


def test_mastermind_reference_reads_the_board_after_an_invalid_move() -> None:
    """The policy reads the scored guesses from the conversation: a refused move in between
    (a model's slip, then the reference taking over) must not make it forget the board."""
    env = mm.load_environment(num_examples=1, seed=2)
    clean, after_slip = reference_after_a_slip(env, ["AABB", "CCDD"], "not a code")
    assert after_slip == clean


def test_mastermind_board_rows_are_the_brute_force_scores() -> None:
    env = mm.load_environment(num_examples=30, seed=14, difficulty="hard")
    rng = random.Random(14)
    for row in env.get_dataset():
        game = env.new_game(row["info"])
        secret = row["info"]["secret"]
        played: list[str] = []
        while not env.is_over(game):
            guess = "".join(rng.choice("ABCDEFGH") for _ in range(5))
            played.append(guess)
            text = env.apply_move(game, guess.lower())
            want = []
            for k, g in enumerate(played, 1):
                black, white = brute_pegs(g, secret)
                want.append(f"{k}. {g}  black {black} white {white}")
            assert text.split("\n\n", 1)[1] == "\n".join(want)
        assert len(played) == 10 or played[-1] == secret


def test_mastermind_one_guess_left_is_said_in_the_singular() -> None:
    env = mm.load_environment(num_examples=1)
    game = env.new_game(
        {"secret": "AABC", "pegs": 4, "colours": 6, "repeats": True, "max_guesses": 3}
    )
    assert env.apply_move(game, "FFFF").startswith("FFFF: black 0 white 0. 2 guesses left.")
    assert env.apply_move(game, "EEEE").startswith("EEEE: black 0 white 0. 1 guess left.")


@pytest.mark.parametrize("move", ["A;A;B;C", "A; A; B; C", "a;a;b;c."])
def test_mastermind_reads_semicolons_between_pegs(move: str) -> None:
    """Commas, spaces and dashes may separate pegs; a semicolon, read by other games,
    must be too."""
    env = mm.load_environment(num_examples=1)
    info = {"secret": "AABC", "pegs": 4, "colours": 6, "repeats": True, "max_guesses": 3}
    plain, split = env.new_game(info), env.new_game(info)
    assert env.apply_move(split, move) == env.apply_move(plain, "AABC")
    assert split == plain and split["won"]


def test_mastermind_refuses_a_code_space_past_the_limit_without_repeats() -> None:
    """Without repeats 6 pegs of 10 colours make 151,200 codes, past the 100,000 the game
    supports, and must be refused as 5 pegs of 10 colours with repeats are."""
    with pytest.raises(ValueError, match="151,200 codes"):
        mastermind.load_environment(num_examples=1, pegs=6, colours=10, repeats=False)
    env = mastermind.load_environment(num_examples=1, pegs=6, colours=9, repeats=False)
    assert env.dataset[0]["info"]["pegs"] == 6
