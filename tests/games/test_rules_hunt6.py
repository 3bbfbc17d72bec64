"""Defects found by playing the games' rules at their limits: a Tower of Hanoi move
written without a separator, turn limits that end a game before the invalid moves it
allows have run out, and count knobs that took True as 1 and showed it as "True".

Each test plays the real game through `load_environment`, `new_game` and `apply_move`
(or the `play` loop the rollout engine's hooks make).
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from game_play import play, slips_then, won
from vfgym.games import maze, sudoku
from vfgym.games import minesweeper as ms
from vfgym.games import tower_of_hanoi as hanoi

from vfgym.errors import InvalidMove

# ----------------------------------------------------------------- Tower of Hanoi


def classic_game(disks: int = 3) -> tuple[Any, dict[str, Any], int, int]:
    """A classic start (every disk on one peg), its home peg and its target peg."""
    env = hanoi.load_environment(num_examples=1, disks=disks, start="classic")
    info = env.dataset[0]["info"]
    home = next(i for i, stack in enumerate(info["pegs"]) if stack)
    return env, env.new_game(info), home, info["target"]


@pytest.mark.parametrize("spelling", ["{a}{b}", "{A}{B}", "{n}{m}", "{A}{B}."])
def test_hanoi_reads_two_pegs_written_together(spelling: str) -> None:
    """ "AC" and "13" were refused as "not a move": with one character a peg, two pegs
    side by side can only mean from-peg then to-peg, as "A C" does."""
    env, game, home, target = classic_game()
    names = {"A": "ABC"[home], "B": "ABC"[target]}
    move = spelling.format(
        a=names["A"].lower(), b=names["B"].lower(), n=home + 1, m=target + 1, **names
    )
    text = env.apply_move(game, move)
    assert text.startswith(f"Moved disk 1 from {names['A']} to {names['B']}."), text
    assert game["pegs"][target] == [1] and game["moves"] == 1


@pytest.mark.parametrize("move", ["AA", "11", "AD", "14", "ACB", "A C B", "A1"])
def test_hanoi_pegs_written_together_still_refuse_what_is_no_move(move: str) -> None:
    env, game, _, _ = classic_game()
    before = [list(stack) for stack in game["pegs"]]
    with pytest.raises(InvalidMove):
        env.apply_move(game, move)
    assert game["pegs"] == before and game["moves"] == 0


# ------------------------------------------------- turn limits and invalid moves


def test_hanoi_turn_limit_leaves_room_for_the_invalid_moves_allowed() -> None:
    """Three disks need 7 moves and the limit was 7 + 6: with 10 invalid moves allowed, a
    player who slipped 9 times and then played perfectly was cut off by the turn limit."""
    env = hanoi.load_environment(
        num_examples=6, seed=3, disks=3, start="classic", max_invalid_moves=10
    )
    for row in env.get_dataset():
        state = play(env, row, slips_then(env.reference_policy, 9))
        assert state["invalid_moves"] == 9 and won(env, state), row["info"]


def one_placement(env: Any) -> Any:
    """The reference's first placement only: one digit a turn, the slowest sound play."""

    def place_one(messages: list[dict[str, Any]]) -> dict[str, str]:
        move = env.reference_policy(messages)["content"]
        first = move.removeprefix("<move>").removesuffix("</move>").split()[0]
        return {"role": "assistant", "content": f"<move>{first}</move>"}

    return place_one


def test_sudoku_turn_limit_leaves_room_for_the_invalid_moves_allowed() -> None:
    """The limit was size² turns: a 4x4 puzzle with 11 empty cells, filled one a turn after
    9 of the 10 invalid moves allowed, needs 20 turns and was cut off at 16."""
    env = sudoku.load_environment(
        num_examples=6, seed=3, size=4, difficulty="hard", max_invalid_moves=10
    )
    for row in env.get_dataset():
        state = play(env, row, slips_then(one_placement(env), 9))
        assert state["invalid_moves"] == 9 and won(env, state), row["info"]


@pytest.mark.parametrize("limit", [3, 8, 12, 30])
def test_minesweeper_and_maze_turn_limits_hold_the_slowest_game_and_the_invalid_moves(
    limit: int,
) -> None:
    """Each default limit is stated as the slowest sound game (one safe cell, or one new
    maze square, a turn); it must also hold every invalid move short of the last one."""
    sweeper = ms.load_environment(num_examples=1, difficulty="easy", max_invalid_moves=limit)
    assert sweeper.max_turns >= (6 * 6 - 5) + limit - 1
    walk = maze.load_environment(num_examples=1, difficulty="easy", max_invalid_moves=limit)
    assert walk.max_turns >= (2 * 4 * 4 - 1) + limit - 1


def test_the_default_turn_limits_are_unchanged_for_the_default_invalid_moves() -> None:
    """The extra room only appears where the invalid moves allowed need it."""
    assert hanoi.load_environment(num_examples=1, disks=3).max_turns == 7 + 6
    assert sudoku.load_environment(num_examples=1).max_turns == 81
    assert ms.load_environment(num_examples=1).max_turns == (64 - 10) + 5
    assert maze.load_environment(num_examples=1, difficulty="easy").max_turns == 2 * 16 + 2


# ------------------------------------------------------------------- knob types


@pytest.mark.parametrize(
    ("name", "kwargs", "message"),
    [
        ("minesweeper", {"mines": True}, "mines must be a whole number"),
        ("sokoban", {"boxes": True}, "boxes must be a whole number"),
        ("tower_of_hanoi", {"disks": True}, "disks must be a whole number"),
        ("maze", {"view": "partial", "radius": True}, "radius must be a whole number"),
        ("maze", {"view": "partial", "radius": 1.5}, "radius must be a whole number"),
    ],
)
def test_a_count_knob_given_a_bool_or_a_fraction_is_refused_naming_it(
    name: str, kwargs: dict[str, Any], message: str
) -> None:
    """A bool is an int to `isinstance`: `mines=True` played a one-mine game whose every
    reply said "Mines: True (unflagged: 0)", and `disks=True` a game of "True disks"."""
    module = importlib.import_module(f"vfgym.games.{name}")
    with pytest.raises(TypeError, match=message):
        module.load_environment(num_examples=1, **kwargs)


def test_minesweeper_one_mine_given_as_a_number_still_plays() -> None:
    env = ms.load_environment(num_examples=1, mines=1)
    game = env.new_game(env.dataset[0]["info"])
    assert "Mines: 1 (unflagged: 0)." in env.apply_move(game, "flag A1")
