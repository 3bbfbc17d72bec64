"""Defects found by reading the games against their rules and knobs: a move naming its
heap read backwards, a puzzle handed over already solved, knobs of the wrong type that
hang a game or slip past its checks, digits one game reads and another refuses.

Each test plays the real game through `load_environment`, `new_game` and `apply_move`,
the hooks the turn loop calls.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from vfgym.games import connect_four as cf
from vfgym.games import nim, sokoban, sudoku
from vfgym.games import tictactoe as ttt
from vfgym.games import tower_of_hanoi as hanoi
from vfgym.games._base import EVAL_OFFSET, game_rows

GAMES = [
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

# ---------------------------------------------------------------------------- Nim


def nim_game(heaps: list[int]) -> tuple[Any, dict[str, Any]]:
    env = nim.load_environment(num_examples=1, opponent="random")
    info = {**env.dataset[0]["info"], "heaps": heaps}
    return env, env.new_game(info)


@pytest.mark.parametrize(
    "move",
    [
        "take 2 objects out of heap 3",
        "take 2 of heap 3",
        "2 objects, heap 3",
        "remove 2 from pile 3",
        # the spellings read right before stay right
        "3 2",
        "heap 3, take 2",
        "take 2 from heap 3",
        "from heap 3 take 2",
    ],
)
def test_nim_the_number_after_the_word_heap_is_the_heap(move: str) -> None:
    """ "take 2 objects out of heap 3" took 3 objects from heap 2: only "from" marked the
    heap, so a move that names its heap with the word "heap" was read backwards."""
    env, game = nim_game([5, 5, 5, 5])
    text = env.apply_move(game, move)
    assert text.startswith("You took 2 from heap 3."), text


# -------------------------------------------------------------------------- Sudoku


@pytest.mark.parametrize("size", [4, 9])
def test_sudoku_refuses_givens_that_leave_no_cell_to_fill(size: int) -> None:
    """`givens=size*size` made every item a full grid: a game over before its first move,
    scored as a win whatever the model said."""
    with pytest.raises(ValueError, match="givens"):
        sudoku.load_environment(num_examples=1, size=size, givens=size * size)
    env = sudoku.load_environment(num_examples=1, size=4, givens=15)
    game = env.new_game(env.dataset[0]["info"])
    assert not env.is_over(game) and game["grid"].count(0) == 1


# ------------------------------------------------------------------- knob types


def test_c4_a_fractional_depth_is_refused_at_once() -> None:
    """`depth=1.5` passed the range check, and the search (which stops at depth 0, never
    reached from 0.5) then searched the whole game tree: building the dataset hung."""
    code = """
        from vfgym.games import connect_four
        try:
            connect_four.load_environment(num_examples=2, depth=1.5)
        except (TypeError, ValueError) as exc:
            print(type(exc).__name__, exc)
    """
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("load_environment(depth=1.5) was still running after 20 s")
    assert done.stdout.startswith("TypeError depth must be a whole number"), done.stdout


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
]


@pytest.mark.parametrize(("name", "kwargs", "message"), WRONG_TYPES)
def test_a_knob_of_the_wrong_type_is_refused_naming_it(
    name: str, kwargs: dict[str, Any], message: str
) -> None:
    """A float, a bool or a str where a count or a flag goes slipped past the range checks
    (a "6.5 guesses" game, `misere="false"` played as misère or a KeyError) or failed far
    from the knob with Python's own words."""
    module = importlib.import_module(f"vfgym.games.{name}")
    with pytest.raises(TypeError, match=message):
        module.load_environment(num_examples=1, **kwargs)


@pytest.mark.parametrize("name", GAMES)
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


def test_sokoban_max_turns_none_is_the_default_as_in_every_other_game() -> None:
    """None failed with "'<' not supported between 'NoneType' and 'int'"."""
    assert sokoban.load_environment(num_examples=1, max_turns=None).max_turns == 50
    assert sokoban.load_environment(num_examples=1, max_turns=7).max_turns == 7


# ------------------------------------------------------------------ split overlap


def test_a_training_set_that_would_reach_the_eval_indices_is_refused() -> None:
    """Training rows are indices 0.., evaluation rows EVAL_OFFSET..: more training rows than
    EVAL_OFFSET would share items with the evaluation split. Refused before any is made."""

    def generate(rng: Any, index: int) -> tuple[str, dict[str, Any], str]:
        raise AssertionError("an item was generated before the size was checked")

    with pytest.raises(ValueError, match="num_examples"):
        game_rows("nim", generate, EVAL_OFFSET + 1, 0)
    rows = game_rows("nim", lambda rng, i: ("q", {}, ""), 2, 0, offset=EVAL_OFFSET)
    assert [row["info"]["index"] for row in rows] == [EVAL_OFFSET, EVAL_OFFSET + 1]


# ------------------------------------------------------------- digits in any script


@pytest.mark.parametrize("digit", ["\uff12", "\u0662"])  # fullwidth 2, Arabic-Indic 2
def test_tictactoe_reads_a_row_digit_in_any_script_as_the_other_games_do(digit: str) -> None:
    """Connect Four, Nim, Sudoku, Minesweeper and Guess the Number read a fullwidth or an
    Arabic-Indic digit as the digit; tic-tac-toe refused "B" with a fullwidth 2 as "not a
    cell", which it is."""
    env = ttt.load_environment(num_examples=1, first="player")
    game = env.new_game(env.dataset[0]["info"])
    assert env.apply_move(game, f"B{digit}").startswith("You played B2.")
    assert ttt.parse_cell(f"{digit}b") == ttt.parse_cell("2B")


def test_hanoi_reads_peg_numbers_in_any_script() -> None:
    env = hanoi.load_environment(num_examples=1, disks=3, start="classic")
    info = env.dataset[0]["info"]
    src = next(i for i, stack in enumerate(info["pegs"]) if stack)
    dst = (src + 1) % 3
    fullwidth = f"{chr(0xFF11 + src)} {chr(0xFF11 + dst)}"
    plain, wide = env.new_game(info), env.new_game(info)
    assert env.apply_move(wide, fullwidth) == env.apply_move(plain, f"{src + 1} {dst + 1}")


# ----------------------------------------------------------------- format_reward


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
