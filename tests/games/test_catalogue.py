"""The catalogue as a whole, checked against the real games: rules every game shares (a
move ending with a full stop, invalid-move and turn limits, knobs of the wrong type,
seeds, example counts and the train/eval split) and the wording of counts of one."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from vfgym.games import connect_four as cf
from vfgym.games import (
    guess_the_number,
    mastermind,
    maze,
    nim,
    sudoku,
)
from vfgym.games import mastermind as mm
from vfgym.games import minesweeper as ms
from vfgym.games import tower_of_hanoi as hanoi
from vfgym.games import wordle as wd
from vfgym.games._base import EVAL_OFFSET, game_rows

from vfgym.errors import InvalidMove


def test_a_first_guess_win_is_counted_in_the_singular() -> None:

    env = guess_the_number.load_environment(num_examples=1)
    game = env.new_game({"low": 1, "high": 100, "target": 5})
    assert env.apply_move(game, "5").endswith("You found the number in 1 guess.")
    env = mastermind.load_environment(num_examples=1)
    game = env.new_game(dict(env.get_eval_dataset()[0]["info"]))
    assert "Cracked in 1 guess!" in env.apply_move(game, game["secret"])


GAMES = [
    "connect_four",
    "hangman",
    "mastermind",
    "maze",
    "minesweeper",
    "nim",
    "sokoban",
    "sudoku",
    "tictactoe",
    "tower_of_hanoi",
    "wordle",
]


@pytest.mark.parametrize("name", GAMES)
def test_every_game_reads_a_move_ending_with_a_full_stop_as_the_move(name: str) -> None:
    """A sentence's full stop after a move ("B2.") was read in six games and refused as
    an invalid move in five; it must play exactly the move without it."""
    env = importlib.import_module(f"vfgym.games.{name}").load_environment(num_examples=3)
    for row in env.dataset:
        move = env.reference_policy(list(row["prompt"]))["content"][6:-7]
        plain, stopped = env.new_game(row["info"]), env.new_game(row["info"])
        text = env.apply_move(plain, move)
        assert env.apply_move(stopped, f"{move}.") == text, move
        assert stopped == plain


def test_a_full_stop_does_not_make_a_bad_move_good() -> None:
    env = importlib.import_module("vfgym.games.tictactoe").load_environment(num_examples=1)
    game = env.new_game(env.dataset[0]["info"])
    for bad in ("D1.", ".", "B2..x", "B.2"):
        with pytest.raises(InvalidMove):
            env.apply_move(game, bad)


def test_wordle_and_mastermind_one_guess_in_all_is_singular() -> None:
    env = wd.load_environment(num_examples=1, max_guesses=1)
    prompt = list(env.dataset[0]["prompt"])
    assert "You have 1 guess. Make your first guess." in prompt[-1]["content"]
    assert wd.read_history(prompt)[2] == 1  # the policy still reads the guesses allowed
    env = mm.load_environment(num_examples=1, max_guesses=1)
    assert "You have 1 guess. Make your first guess." in env.dataset[0]["prompt"][-1]["content"]


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


TEXT_GAMES = [
    "connect_four",
    "guess_the_number",
    "hangman",
    "mastermind",
    "maze",
    "minesweeper",
    "nim",
    "sokoban",
    "sudoku",
    "tictactoe",
    "tower_of_hanoi",
    "wordle",
]


WRONG_TYPES = [
    ("nim", {"misere": "false"}, "misere must be True or False"),
    ("nim", {"misere": 1}, "misere must be True or False"),
    ("mastermind", {"repeats": "no"}, "repeats must be True or False"),
    ("mastermind", {"repeats": 0}, "repeats must be True or False"),
    ("mastermind", {"pegs": 4.0}, "pegs must be a whole number"),
    ("mastermind", {"colours": 6.5}, "colours must be a whole number"),
    ("mastermind", {"max_guesses": 8.5}, "max_guesses must be a whole number"),
    ("wordle", {"max_guesses": 5.5}, "max_guesses must be a whole number"),
    ("hangman", {"max_misses": 2.5}, "max_misses must be a whole number"),
    ("hangman", {"min_length": 5.0}, "min_length must be a whole number"),
    ("guess_the_number", {"low": True}, "low must be a whole number"),
    ("guess_the_number", {"high": 99.5}, "high must be a whole number"),
    ("nim", {"heaps": 2.5}, "heaps must be a whole number"),
    ("nim", {"max_heap": "7"}, "max_heap must be a whole number"),
    ("connect_four", {"opening_plies": 2.0}, "opening_plies must be a whole number"),
    ("connect_four", {"depth": True}, "depth must be a whole number"),
    ("sudoku", {"size": 9.0}, "size must be a whole number"),
    ("minesweeper", {"mines": True}, "mines must be a whole number"),
    ("sokoban", {"boxes": True}, "boxes must be a whole number"),
    ("tower_of_hanoi", {"disks": True}, "disks must be a whole number"),
    ("maze", {"view": "partial", "radius": True}, "radius must be a whole number"),
    ("maze", {"view": "partial", "radius": 1.5}, "radius must be a whole number"),
]


@pytest.mark.parametrize(("name", "kwargs", "message"), WRONG_TYPES)
def test_a_knob_of_the_wrong_type_is_refused_naming_it(
    name: str, kwargs: dict[str, Any], message: str
) -> None:
    """A float, a bool or a str where a count or a flag goes slipped past the range checks
    (a "6.5 guesses" game, `misere="false"` played as misère or a KeyError) or failed far
    from the knob with Python's own words. A bool is an int to `isinstance`: `mines=True`
    played a one-mine game whose every reply said "Mines: True (unflagged: 0)", and
    `disks=True` a game of "True disks"."""
    module = importlib.import_module(f"vfgym.games.{name}")
    with pytest.raises(TypeError, match=message):
        module.load_environment(num_examples=1, **kwargs)


@pytest.mark.parametrize("name", TEXT_GAMES)
@pytest.mark.parametrize("limit", [2.5, True, "3"])
def test_every_game_refuses_an_invalid_move_limit_that_is_not_a_whole_number(
    name: str, limit: Any
) -> None:
    """As the tool tasks do: a limit of 2.5 told the model "0.5 more invalid moves end the
    game", and "3" failed on an addition with Python's words."""
    module = importlib.import_module(f"vfgym.games.{name}")
    with pytest.raises(TypeError, match="max_invalid_moves must be a whole number"):
        module.load_environment(num_examples=1, max_invalid_moves=limit)


@pytest.mark.parametrize("count", [2.5, True, "3"])
def test_num_examples_must_be_a_whole_number(count: Any) -> None:
    with pytest.raises(TypeError, match="num_examples must be a whole number"):
        nim.load_environment(num_examples=count)


def test_the_flags_and_counts_still_take_their_proper_values() -> None:
    assert nim.load_environment(num_examples=1, misere=True).dataset[0]["info"]["misere"]
    mastermind = importlib.import_module("vfgym.games.mastermind")
    env = mastermind.load_environment(num_examples=1, repeats=False, pegs=4, colours=6)
    assert env.dataset[0]["info"]["repeats"] is False
    assert cf.load_environment(num_examples=1, depth=0, opening_plies=4).max_turns == 24


def test_a_training_set_that_would_reach_the_eval_indices_is_refused() -> None:
    """Training rows are indices 0.., evaluation rows EVAL_OFFSET..: more training rows than
    EVAL_OFFSET would share items with the evaluation split. Refused before any is made."""

    def generate(rng: Any, index: int) -> tuple[str, dict[str, Any], str]:
        raise AssertionError("an item was generated before the size was checked")

    with pytest.raises(ValueError, match="num_examples"):
        game_rows("nim", generate, EVAL_OFFSET + 1, 0)
    rows = game_rows("nim", lambda rng, i: ("q", {}, ""), 2, 0, offset=EVAL_OFFSET)
    assert [row["info"]["index"] for row in rows] == [EVAL_OFFSET, EVAL_OFFSET + 1]


@pytest.mark.parametrize("empty", ["<move></move>", "<move>  </move>", "x <move></move> y"])
def test_an_empty_move_tag_pair_is_not_a_tagged_move(empty: str) -> None:
    """format_reward is the share of turns whose tags hold a move: an empty pair is
    refused as no move and counts no more than an untagged reply, through a Gym step
    (the fused turn) and through `env_response` alike."""
    import gymnasium as gym

    import vfgym.gym  # noqa: F401  (registers the ids)

    env = gym.make("vfgym/GuessTheNumber-v0", low=1, high=50, max_turns=2)
    try:
        rows = env.unwrapped.rows
        index = next(i for i, row in enumerate(rows) if row["info"]["target"] > 1)
        env.reset(seed=0, options={"index": index})
        env.step(empty)
        *_, truncated, info = env.step("<move>1</move>")
        assert truncated and info["metrics"]["format_reward"] == 0.5
    finally:
        env.close()
    game = importlib.import_module("vfgym.games.guess_the_number").load_environment(num_examples=1)
    state = game.setup_state({"info": dict(game.dataset[0]["info"]), "prompt": [], "turn": 1})
    game.env_response([{"role": "assistant", "content": empty}], state)
    game.env_response([{"role": "assistant", "content": "<move>1</move>"}], state)
    assert state["tagged_moves"] == 1 and state["invalid_moves"] == 1


@pytest.mark.parametrize("seed", ["0", 0.0, True, None])
def test_a_game_seed_that_is_not_a_whole_number_is_refused(seed: Any) -> None:
    """Items are seeded by the text of (game, seed, index): seed "0" or 0.0 quietly gave
    another dataset than seed 0's."""
    module = importlib.import_module("vfgym.games.guess_the_number")
    with pytest.raises(TypeError, match="seed must be a whole number"):
        module.load_environment(num_examples=2, seed=seed)
