"""Nim: nim-sum and misère positions by hand, the opponent, invalid moves, the reference."""

from __future__ import annotations

from typing import Any

import pytest
from game_play import evaluate_over_http, play
from vfgym.games import nim

import vfgym
from vfgym.errors import InvalidMove


def game(heaps: list[int], misere: bool = False, opponent: str = "optimal") -> dict[str, Any]:
    info = {"heaps": heaps, "misere": misere, "opponent": opponent, "opponent_seed": 7}
    return nim.load_environment(num_examples=1).new_game(info)


# -- positions worked by hand ------------------------------------------------------


def test_normal_play_positions() -> None:
    assert nim.nim_sum([3, 4, 5]) == 2 and nim.nim_sum([1, 2, 3]) == 0
    assert nim.is_winning([3, 4, 5], misere=False)
    assert not nim.is_winning([1, 2, 3], misere=False)
    # 3 ^ 2 = 1: take two from the first heap, leaving 1 ^ 4 ^ 5 = 0.
    assert nim.winning_move([3, 4, 5], misere=False) == (0, 2)
    assert nim.winning_move([1, 2, 3], misere=False) is None
    assert nim.winning_move([0, 0, 7], misere=False) == (2, 7)  # take the lot


def test_misere_endgame_positions() -> None:
    assert nim.is_winning([1, 1], misere=True)  # take one, the opponent must take the last
    assert not nim.is_winning([1, 1, 1], misere=True)
    assert nim.winning_move([1, 1], misere=True) == (0, 1)
    # One big heap: shrink it so an odd number of single objects is left.
    assert nim.winning_move([1, 1, 4], misere=True) == (2, 3)  # leaves 1 1 1
    assert nim.winning_move([1, 4], misere=True) == (1, 4)  # leaves 1
    assert nim.winning_move([0, 5], misere=True) == (1, 4)  # leaves 1
    # Two big heaps: play as in normal Nim.
    assert nim.winning_move([2, 2], misere=True) is None
    assert nim.winning_move([2, 3], misere=True) == (1, 1)
    assert nim.is_winning([0, 0], misere=True) and not nim.is_winning([0, 0], misere=False)


def test_optimal_opponent_from_a_losing_position_takes_one_from_the_largest() -> None:
    assert nim.opponent_move([1, 2, 3], "optimal", misere=False, seed=1) == (2, 1)
    assert nim.opponent_move([3, 4, 5], "optimal", misere=False, seed=1) == (0, 2)


def test_a_hand_played_game() -> None:
    env = nim.load_environment(num_examples=1)
    state = game([3, 4, 5])
    text = env.apply_move(state, "1 2")  # to 1 4 5; the opponent has no good move
    assert text.startswith("You took 2 from heap 1. I took 1 from heap 3.")
    assert "heap 1: o (1)\nheap 2: o o o o (4)\nheap 3: o o o o (4)" in text
    assert nim.read_heaps([{"role": "user", "content": text}]) == ([1, 4, 4], False)
    env.apply_move(state, "heap 1, take 1")
    assert state["heaps"][0] == 0 and state["kept"] == 2 and state["chances"] == 2


def test_taking_the_last_object_wins_or_loses() -> None:
    env = nim.load_environment(num_examples=1)
    state = game([0, 2, 0])
    assert "you win!" in env.apply_move(state, "2 2") and env.score(state) == 1.0
    state = game([0, 2, 0], misere=True)
    assert "you lose." in env.apply_move(state, "2 2") and env.score(state) == 0.0
    state = game([1, 1, 0], misere=True)  # the opponent is left the last object
    assert "you win!" in env.apply_move(state, "1 1") and env.score(state) == 1.0
    assert env.efficiency(state, {}) == 1.0


def test_invalid_moves_leave_the_game_unchanged() -> None:
    env = nim.load_environment(num_examples=1)
    state = game([3, 0, 5])
    for move, message in (
        ("three", "is not a move"),
        ("4 1", "there is no heap 4"),
        ("2 1", "heap 2 is empty"),
        ("1 0", "take between 1 and 3"),
        ("3 9", "take between 1 and 5"),
    ):
        with pytest.raises(InvalidMove, match=message):
            env.apply_move(state, move)
    assert state == game([3, 0, 5])


def test_invalid_moves_end_the_game() -> None:
    env = nim.load_environment(num_examples=1, max_invalid_moves=2)
    state = play(env, env.get_dataset()[0], lambda m: {"role": "assistant", "content": "9 9"})
    assert state["invalid_moves"] == 2 and state["reward"] == 0.0
    assert "the game is over" in state["messages"][-1]["content"]


# -- datasets ---------------------------------------------------------------------


def test_items_are_pure_and_start_from_winning_positions() -> None:
    a = nim.load_environment(num_examples=40, seed=5, misere=True).get_dataset()
    b = nim.load_environment(num_examples=10, seed=5, misere=True).get_dataset()
    c = nim.load_environment(num_examples=40, seed=6, misere=True).get_dataset()
    assert [r["info"] for r in a[:10]] == [r["info"] for r in b]
    assert [r["info"]["heaps"] for r in a] != [r["info"]["heaps"] for r in c]
    assert all(r["info"]["winning"] and nim.is_winning(r["info"]["heaps"], True) for r in a)
    assert "Misère rules" in a[0]["prompt"][-1]["content"]
    mixed = nim.load_environment(num_examples=60, start="random").get_dataset()
    assert {r["info"]["winning"] for r in mixed} == {True, False}


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"difficulty": "x"}, "difficulty must be one of"),
        ({"heaps": 0}, "heaps must be between 1 and 9"),
        ({"max_heap": 31}, "max_heap must be between 1 and 30"),
        ({"opponent": "clever"}, "opponent must be one of"),
        ({"start": "losing"}, "start must be one of"),
        ({"heaps": 2, "max_heap": 1}, "always lost by the first player"),
    ],
)
def test_bad_knobs_are_refused_clearly(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        nim.load_environment(**kwargs)


# -- the reference policy --------------------------------------------------------


async def test_reference_wins_every_winning_start_over_http() -> None:
    env = vfgym.load_environment("nim", num_examples=50, difficulty="easy")
    (out,) = await evaluate_over_http(env, 50, "reference")
    assert out.reward == [1.0] * 50
    assert out.metrics["efficiency"] == [1.0] * 50  # every move kept the win
    rows = env.get_eval_dataset(n=50)
    rand = [play(env, row, env.make_random_policy(i))["reward"] for i, row in enumerate(rows)]
    assert sum(rand) / 50 < 0.75


@pytest.mark.parametrize("misere", [False, True])
@pytest.mark.parametrize("difficulty", ["medium", "hard"])
def test_reference_wins_every_seed_and_random_does_not(difficulty: str, misere: bool) -> None:
    env = nim.load_environment(num_examples=50, seed=2, difficulty=difficulty, misere=misere)
    rows = env.get_dataset()
    assert [play(env, row, env.reference_policy)["reward"] for row in rows] == [1.0] * 50
    rand = [play(env, row, env.make_random_policy(i))["reward"] for i, row in enumerate(rows)]
    assert sum(rand) / 50 < 0.1


@pytest.mark.parametrize("move", ["3 2", "heap 3 take 2", "3,2", "take 2 from heap 3", "2 FROM 3"])
def test_a_move_is_read_as_heap_then_count_unless_it_says_from(move: str) -> None:
    env = nim.load_environment(num_examples=1)
    state = game([1, 1, 5], opponent="random")
    feedback = env.apply_move(state, move)
    assert feedback.startswith("You took 2 from heap 3"), feedback
