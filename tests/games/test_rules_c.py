"""Rule defects found by playing the games as a careful player would: a start already
decided, a win undone by the rest of its own move, move spellings one game reads and
another refuses, feedback that counts wrongly.

Each test plays the real game through `new_game` and `apply_move`, the hooks the turn
loop calls.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

import pytest
from vfgym.games import connect_four as cf
from vfgym.games import guess_the_number as gtn
from vfgym.games import hangman as hm
from vfgym.games import mastermind as mm
from vfgym.games import minesweeper as ms
from vfgym.games import nim
from vfgym.games import sokoban as sb
from vfgym.games import sudoku as sd
from vfgym.games import tower_of_hanoi as hanoi
from vfgym.games import wordle as wd

from vfgym.errors import InvalidMove

# ------------------------------------------------------------------ Connect Four


@pytest.mark.parametrize("opening_plies", [6, 8])
@pytest.mark.parametrize("depth", [0, 1, 3])
def test_c4_no_item_starts_with_a_line_of_four_already_made(opening_plies: int, depth: int) -> None:
    """When O opens after the random plies, its opening move must not complete four: the
    player would be handed a game already lost that is shown, and played, as going on."""
    env = cf.load_environment(
        num_examples=200, depth=depth, first="opponent", opening_plies=opening_plies
    )
    for row in env.dataset:
        board = row["info"]["board"]
        assert cf.winner(board) is None, (row["info"]["index"], cf.render_board(board))
        assert board.count(cf.OPPONENT) == opening_plies // 2 + 1
        assert board.count(cf.PLAYER) == opening_plies // 2
        assert not env.is_over(env.new_game(row["info"]))


def test_c4_the_shown_start_is_the_one_played() -> None:
    """The question's board is the game's starting board, whatever was redrawn."""
    env = cf.load_environment(num_examples=60, depth=1, first="alternate", opening_plies=8)
    for row in env.dataset:
        shown = cf.read_board(row["prompt"])
        assert shown == row["info"]["board"]


# ------------------------------------------------------------------- Minesweeper

# The 4x4 board of test_minesweeper.py, mines at D1 and A4: revealing A1 opens every
# safe cell at once.
HAND_INFO = {"width": 4, "height": 4, "mines": 2, "mine_seed": 0}
HAND_MINES = [[0, 3], [3, 0]]


def hand_game() -> tuple[Any, dict[str, Any]]:
    env = ms.load_environment(num_examples=1)
    game = env.new_game(HAND_INFO)
    game["mine_cells"] = [list(m) for m in HAND_MINES]
    return env, game


def test_ms_a_move_that_wins_plays_no_action_after_the_win() -> None:
    """A game ends when its last safe cell opens; the rest of that move must not reopen
    it (a reveal of a mine after the win turned it into a loss)."""
    env, game = hand_game()
    text = env.apply_move(game, "reveal A1, reveal D1")
    assert "You win!" in text and "You lose" not in text
    assert game["blast"] is None
    assert env.is_over(game) and env.score(game) == 1.0
    env, game = hand_game()
    env.apply_move(game, "reveal A1, flag D1")
    assert game["flags"] == [] and env.score(game) == 1.0


def test_ms_actions_before_the_winning_reveal_still_count() -> None:
    env, game = hand_game()
    text = env.apply_move(game, "flag D1, reveal A1")
    assert game["flags"] == [[0, 3]] and "Flagged D1." in text
    assert env.score(game) == 1.0


# ----------------------------------------------------------------- Tower of Hanoi


@pytest.mark.parametrize("move", ["A to C", "a to c", "A TO C", "A To C", "a tO c"])
def test_hanoi_reads_the_word_to_in_any_case(move: str) -> None:
    """Peg letters are read in either case; the word between them must be too."""
    env = hanoi.load_environment(num_examples=1)
    game = env.new_game({"pegs": [[2, 1], [], []], "disks": 2, "target": 2, "optimal": 3})
    assert env.apply_move(game, move).startswith("Moved disk 1 from A to C.")
    assert game["pegs"] == [[2], [], [1]]


# ------------------------------------------------ a full stop after a move, everywhere

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


def test_sudoku_a_clear_written_with_a_dot_still_clears() -> None:
    """`r1c1=.` clears a cell: the dot there is the digit, not a full stop."""
    env = sd.load_environment(num_examples=1, size=4)
    info = env.dataset[0]["info"]
    game = env.new_game(info)
    cell = info["puzzle"].index(0)
    name = f"r{cell // 4 + 1}c{cell % 4 + 1}"
    env.apply_move(game, f"{name}={info['solution'][cell]}")
    assert game["grid"][cell] == info["solution"][cell]
    env.apply_move(game, f"{name}=.")
    assert game["grid"][cell] == 0
    env.apply_move(game, f"{name}={info['solution'][cell]}.")
    assert game["grid"][cell] == info["solution"][cell]


def test_a_full_stop_does_not_make_a_bad_move_good() -> None:
    env = importlib.import_module("vfgym.games.tictactoe").load_environment(num_examples=1)
    game = env.new_game(env.dataset[0]["info"])
    for bad in ("D1.", ".", "B2..x", "B.2"):
        with pytest.raises(InvalidMove):
            env.apply_move(game, bad)


# -------------------------------------------------------------------- Mastermind


def test_mastermind_one_guess_left_is_said_in_the_singular() -> None:
    env = mm.load_environment(num_examples=1)
    game = env.new_game(
        {"secret": "AABC", "pegs": 4, "colours": 6, "repeats": True, "max_guesses": 3}
    )
    assert env.apply_move(game, "FFFF").startswith("FFFF: black 0 white 0. 2 guesses left.")
    assert env.apply_move(game, "EEEE").startswith("EEEE: black 0 white 0. 1 guess left.")


# ------------------------------------------------- counts of one are said in the singular


def test_hangman_one_miss_and_one_allowed_miss_are_singular() -> None:
    env = hm.load_environment(num_examples=1, max_misses=1)
    assert "You may miss 1 time.\n" in env.dataset[0]["prompt"][-1]["content"]
    game = env.new_game({"word": "banana", "max_misses": 2})
    env.apply_move(game, "q")
    text = env.apply_move(game, "banana")
    assert "You found BANANA with 1 miss." in text


def test_sokoban_a_one_step_solve_and_a_one_box_level_are_singular() -> None:
    env = sb.load_environment(num_examples=1, difficulty="easy")
    assert env.dataset[0]["prompt"][-1]["content"].startswith("Push the box onto the goal.\n")
    game = env.new_game({"board": "#####\n#@$.#\n#####", "par": 1})
    assert env.apply_move(game, "R").startswith("Solved in 1 step (par 1). You win!")


def test_hanoi_one_disk_and_one_move_are_singular() -> None:
    env = hanoi.load_environment(num_examples=1, disks=1)
    row = env.dataset[0]
    assert row["prompt"][-1]["content"].startswith("There is 1 disk. Move it onto peg ")
    assert env.reference_policy(list(row["prompt"]))["content"]  # the target is still read
    game = env.new_game({"pegs": [[1], [], []], "disks": 1, "target": 2, "optimal": 1})
    assert env.apply_move(game, "A C").endswith("Solved in 1 move (optimal: 1).")


def test_sudoku_one_empty_cell_is_singular() -> None:
    solution = [1, 2, 3, 4, 3, 4, 1, 2, 2, 1, 4, 3, 4, 3, 2, 1]
    env = sd.load_environment(num_examples=1, size=4)
    game = env.new_game({"n": 4, "puzzle": [0, 0, *solution[2:]], "solution": solution})
    assert env.apply_move(game, "r1c1=1").startswith("Placed r1c1=1. 1 empty cell left.\n")


def nim_game(heaps: list[int]) -> tuple[Any, dict[str, Any]]:
    env = nim.load_environment(num_examples=1)
    info = {"heaps": heaps, "misere": False, "opponent": "optimal", "opponent_seed": 0}
    return env, env.new_game(info)


def test_nim_a_heap_of_one_and_a_game_of_one_heap_are_singular() -> None:
    env, game = nim_game([3, 1, 2])
    with pytest.raises(InvalidMove, match=r"^heap 2 has 1 object: take 1\.$"):
        env.apply_move(game, "2 2")
    env = nim.load_environment(num_examples=1, heaps=1)
    assert env.dataset[0]["prompt"][-1]["content"].startswith("New game of Nim with 1 heap. ")


def test_wordle_and_mastermind_one_guess_in_all_is_singular() -> None:
    env = wd.load_environment(num_examples=1, max_guesses=1)
    prompt = list(env.dataset[0]["prompt"])
    assert "You have 1 guess. Make your first guess." in prompt[-1]["content"]
    assert wd.read_history(prompt)[2] == 1  # the policy still reads the guesses allowed
    env = mm.load_environment(num_examples=1, max_guesses=1)
    assert "You have 1 guess. Make your first guess." in env.dataset[0]["prompt"][-1]["content"]


def test_minesweeper_one_mine_is_singular_and_still_read() -> None:
    env = ms.load_environment(num_examples=1, mines=1)
    prompt = list(env.dataset[0]["prompt"])
    assert "There is 1 mine. Reveal a first cell." in prompt[-1]["content"]
    assert env.read_board(prompt)[1] == 1
    assert env.read_board([{"role": "user", "content": "There are 1 mines.\n  1 #"}])[1] == 1


# ------------------------------------------------------------------ Nim: negative counts


@pytest.mark.parametrize("move", ["1 -2", "-1 2", "1, -2", "take -2 from heap 1", "1 \u22122"])
def test_nim_refuses_a_negative_number_and_leaves_the_game_unchanged(move: str) -> None:
    """`1 -2` was read as taking 2 from heap 1: a minus sign is not a separator."""
    env, game = nim_game([3, 4, 5])
    before = {k: (list(v) if isinstance(v, list) else v) for k, v in game.items()}
    with pytest.raises(InvalidMove, match=r"whole numbers.*<move>1 2</move>"):
        env.apply_move(game, move)
    assert game == before


@pytest.mark.parametrize("move", ["1-2", "1 - 2", "heap 1 - 2"])
def test_nim_a_dash_between_the_numbers_still_separates_them(move: str) -> None:
    env, game = nim_game([3, 4, 5])
    assert env.apply_move(game, move).startswith("You took 2 from heap 1.")


# ----------------------------------------------------- Minesweeper: more flags than mines


def test_ms_more_flags_than_mines_never_shows_a_negative_count() -> None:
    """With more flags than mines, at least the surplus is on safe cells: say so rather
    than show a negative number of mines left unflagged."""
    env, game = hand_game()  # 2 mines
    text = env.apply_move(game, "flag B1, flag C1")
    assert "Mines: 2 (unflagged: 0)." in text
    text = env.apply_move(game, "flag D1, flag B2")
    assert "unflagged: -" not in text
    assert "Mines: 2 (unflagged: 0; 4 flags, so at least 2 are on safe cells)." in text
    text = env.apply_move(game, "unflag B2")
    assert "Mines: 2 (unflagged: 0; 3 flags, so at least 1 is on a safe cell)." in text


# ------------------------------------------------------------- Mastermind: ";" separates


@pytest.mark.parametrize("move", ["A;A;B;C", "A; A; B; C", "a;a;b;c."])
def test_mastermind_reads_semicolons_between_pegs(move: str) -> None:
    """Commas, spaces and dashes may separate pegs; a semicolon, read by other games,
    must be too."""
    env = mm.load_environment(num_examples=1)
    info = {"secret": "AABC", "pegs": 4, "colours": 6, "repeats": True, "max_guesses": 3}
    plain, split = env.new_game(info), env.new_game(info)
    assert env.apply_move(split, move) == env.apply_move(plain, "AABC")
    assert split == plain and split["won"]


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
