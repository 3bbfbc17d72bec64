"""Tic-tac-toe: rules on hand-worked boards, the opponents, invalid moves, the reference policy."""

from __future__ import annotations

import itertools
import random
import re
from typing import Any

import pytest
from game_play import evaluate_over_http, play, slips_then
from vfgym.games import (
    tictactoe,
)
from vfgym.games import tictactoe as ttt

import vfgym
from vfgym.engine.state import new_state
from vfgym.errors import InvalidMove


def game(board: str, opponent: str = "perfect") -> dict[str, Any]:
    return {"board": board, "opponent": opponent, "opponent_seed": 1, "moves": [], "result": None}


def test_cells_are_read_in_every_stated_form() -> None:
    assert [ttt.parse_cell(m) for m in ("A1", "b2", " C3 ", "2b", "1", "9")] == [0, 4, 8, 4, 0, 8]
    assert [ttt.cell_name(i) for i in (0, 4, 5, 8)] == ["A1", "B2", "C2", "C3"]
    for bad in ("D1", "A4", "0", "10", "middle", ""):
        with pytest.raises(InvalidMove, match="not a cell"):
            ttt.parse_cell(bad)


def test_lines_are_detected() -> None:
    assert ttt.winner("XXXOO....") == "X"
    assert ttt.winner("O.XOX.O..") == "O"
    assert ttt.winner("X.O.XO..X") == "X"
    assert ttt.winner("..O.O.O.X") == "O"
    assert ttt.winner("XOXXOOOXX") is None


def test_minimax_values_of_known_positions() -> None:
    assert ttt.minimax_value("." * 9, "X") == 0  # perfect play draws
    # X to move can complete the top row: a win, and C1 is the only winning move.
    assert ttt.minimax_value("XX.OO....", "X") == 1
    assert ttt.best_moves("XX.OO....", "X") == [2]  # take the win, not the block
    # O has a fork (B2 with B1 and A3 threats): X to move loses whatever it does.
    assert ttt.minimax_value("XO..O.O.X", "X") == -1
    # Only the block at C1 avoids a loss.
    assert ttt.best_moves("OO.X....X", "X") == [2]


def test_player_completing_a_line_wins_without_a_reply() -> None:
    env = ttt.load_environment(num_examples=1)
    state = game("XX.OO....")
    feedback = env.apply_move(state, "C1")
    assert state["board"] == "XXXOO...." and state["result"] == "win"
    assert "you win" in feedback and "Your move" not in feedback
    assert env.score(state) == 1.0 and env.efficiency(state, {}) == 1.0


def test_perfect_opponent_blocks_and_wins() -> None:
    env = ttt.load_environment(num_examples=1)
    state = game("X...O....")
    env.apply_move(state, "B1")  # X threatens A1-B1-C1
    assert state["board"][2] == "O" and state["result"] is None  # blocked at C1
    state = game("X..OO.X..")
    feedback = env.apply_move(state, "C3")  # X ignores O's row 2 threat
    assert state["board"] == "X..OOOX.X" and state["result"] == "loss"
    assert "you lose" in feedback and env.score(state) == 0.0


def test_filling_the_board_is_a_draw() -> None:
    env = ttt.load_environment(num_examples=1)
    state = game("XOXXOOOX.")
    feedback = env.apply_move(state, "C3")
    assert state["result"] == "draw" and "draw" in feedback and env.score(state) == 0.5


def test_feedback_shows_the_board_the_policy_reads() -> None:
    env = ttt.load_environment(num_examples=1)
    state = game("X...O....")
    feedback = env.apply_move(state, "B1")
    assert "   A B C\n1  X X O\n2  . O .\n3  . . ." in feedback
    assert ttt.read_board([{"role": "user", "content": feedback}]) == state["board"]


def test_illegal_and_malformed_moves_leave_the_game_unchanged() -> None:
    env = ttt.load_environment(num_examples=1)
    state = game("X...O....")
    for move, message in (("A1", "already taken by X"), ("B2", "taken by O"), ("E5", "not a cell")):
        with pytest.raises(InvalidMove, match=message):
            env.apply_move(state, move)
    assert state == game("X...O....")


def test_too_many_invalid_moves_end_the_game_as_a_loss() -> None:
    env = ttt.load_environment(num_examples=1, difficulty="easy", first="player")
    row = env.get_dataset()[0]
    state = play(env, row, lambda messages: {"role": "assistant", "content": "the middle one"})
    assert state["invalid_moves"] == 3 and state["turn"] == 3 and state["reward"] == 0.0
    strict = ttt.load_environment(num_examples=1, max_invalid_moves=1)
    state = play(strict, strict.get_dataset()[0], lambda m: {"role": "assistant", "content": "Z"})
    assert state["turn"] == 1 and state["reward"] == 0.0


def test_invalid_move_feedback_says_what_to_do() -> None:
    env = ttt.load_environment(num_examples=1)
    row = env.get_dataset()[0]
    state = new_state(row["prompt"], [], "", "default", row["info"], 0)
    env.setup_state(state)
    messages = [*row["prompt"], {"role": "assistant", "content": "<move>Q7</move>"}]
    feedback, state = env.env_response(messages, state)
    text = feedback[0]["content"]
    assert text.startswith("Invalid move:") and "<move>B2</move>" in text
    assert "2 more invalid moves end the game." in text and state["invalid_moves"] == 1


def test_items_are_pure_functions_of_seed_and_index() -> None:
    a = ttt.load_environment(num_examples=20, seed=3).get_dataset()
    b = ttt.load_environment(num_examples=5, seed=3).get_dataset()
    c = ttt.load_environment(num_examples=20, seed=4).get_dataset()
    assert [r["info"] for r in a[:5]] == [r["info"] for r in b]
    assert [r["info"] for r in a] != [r["info"] for r in c]
    evals = ttt.load_environment(num_examples=20, seed=3).get_eval_dataset()
    assert {r["info"]["index"] for r in evals}.isdisjoint(r["info"]["index"] for r in a)


def test_knobs_choose_opponent_and_first_player() -> None:
    rows = ttt.load_environment(num_examples=4, difficulty="medium").get_dataset()
    assert [r["info"]["opponent"] for r in rows] == ["random"] * 2 + ["perfect"] * 2
    assert [r["info"]["board"].count("O") for r in rows] == [0, 1, 0, 1]
    rows = ttt.load_environment(num_examples=3, opponent="perfect", first="opponent").get_dataset()
    assert all(r["info"]["board"].count("O") == 1 for r in rows)
    assert all(r["info"]["opponent"] == "perfect" for r in rows)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"difficulty": "insane"}, "difficulty must be one of"),
        ({"opponent": "smart"}, "opponent must be one of"),
        ({"first": "me"}, "first must be one of"),
        ({"max_turns": 2}, "max_turns must be at least 5"),
        ({"num_examples": 0}, "num_examples must be at least 1"),
        ({"max_invalid_moves": 0}, "max_invalid_moves must be at least 1"),
    ],
)
def test_bad_knobs_are_refused_clearly(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ttt.load_environment(**kwargs)


async def test_reference_never_loses_over_http() -> None:
    env = vfgym.load_environment("tictactoe", num_examples=50, difficulty="medium")
    (best,) = await evaluate_over_http(env, 50, "reference")
    assert len(best.reward) == 50 and min(best.reward) >= 0.5  # never loses
    assert all(s["stop_reason"] == "completed" for s in best.state)
    assert best.metrics["invalid_moves"] == [0.0] * 50
    assert best.metrics["format_reward"] == [1.0] * 50
    assert sum(best.reward) / 50 >= 0.7  # half the games are against the random opponent


@pytest.mark.parametrize("opponent", ["random", "perfect"])
@pytest.mark.parametrize("first", ["player", "opponent"])
def test_reference_never_loses_against_either_opponent(opponent: str, first: str) -> None:
    env = ttt.load_environment(num_examples=60, opponent=opponent, first=first, seed=11)
    rewards = [play(env, row, env.reference_policy)["reward"] for row in env.get_dataset()]
    assert min(rewards) >= 0.5
    random_rewards = [
        play(env, row, env.make_random_policy(i))["reward"]
        for i, row in enumerate(env.get_dataset())
    ]
    if opponent == "perfect":
        assert rewards == [0.5] * 60  # perfect against perfect is always a draw
        assert sum(random_rewards) / 60 < 0.35
    else:
        assert sum(rewards) / 60 > 0.9
        assert sum(random_rewards) / 60 < 0.8


def brute_lines(board: str) -> set[str]:
    """The marks that fill a row, column or diagonal, found by coordinates."""
    lines = [[(r, c) for c in range(3)] for r in range(3)]
    lines += [[(r, c) for r in range(3)] for c in range(3)]
    lines += [[(k, k) for k in range(3)], [(k, 2 - k) for k in range(3)]]
    found = set()
    for line in lines:
        marks = {board[r * 3 + c] for r, c in line}
        if len(marks) == 1 and "." not in marks:
            found |= marks
    return found


def brute_winner(board: str) -> str | None:
    """The one mark with a line (boards of play never have two)."""
    found = brute_lines(board)
    assert len(found) <= 1, board
    return found.pop() if found else None


def opponent_outcomes(board: str, seed: int, kind: str) -> set[str]:
    """Every result X can reach against the built-in opponent from `board` (X to move),
    trying every X move at every turn."""
    results: set[str] = set()
    for cell in ttt.empty_cells(board):
        after, result, text = ttt.play_move(board, cell, kind, seed)
        assert ttt.render_board(after) in text
        if result is None:
            assert ttt.winner(after) is None and ttt.empty_cells(after)
            results |= opponent_outcomes(after, seed, kind)
        else:
            want = brute_winner(after)
            expected = {"X": "win", "O": "loss", None: "draw"}[want]
            assert result == expected, (after, result)
            if want is None:
                assert "." not in after
            results.add(result)
    return results


def reference_outcomes(env: Any, board: str, intro: str) -> set[str]:
    """Every result the reference policy reaches against every O reply (O chosen freely)."""
    messages = [{"role": "user", "content": f"{intro}\n\n{ttt.render_board(board)}"}]
    move = env.reference_policy(messages)["content"]
    cell = ttt.parse_cell(re.search(r"<move>(.*)</move>", move).group(1))
    assert board[cell] == "."
    after = ttt.place(board, cell, "X")
    if ttt.winner(after):
        return {"win"}
    if "." not in after:
        return {"draw"}
    results: set[str] = set()
    for reply in ttt.empty_cells(after):
        then = ttt.place(after, reply, "O")
        if ttt.winner(then):
            results.add("loss")
        elif "." not in then:
            results.add("draw")
        else:
            results |= reference_outcomes(env, then, "Your move.")
    return results


def test_tictactoe_winner_agrees_with_brute_force_on_every_board() -> None:
    for cells in itertools.product("XO.", repeat=9):
        board = "".join(cells)
        found = brute_lines(board)
        if len(found) <= 1:
            assert ttt.winner(board) == (found.pop() if found else None), board
        else:
            assert ttt.winner(board) in found, board


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tictactoe_perfect_opponent_never_loses_whatever_x_plays(seed: int) -> None:
    empty = "." * 9
    assert "win" not in opponent_outcomes(empty, seed, "perfect")
    opening = ttt.opponent_move(empty, "perfect", seed)
    assert "win" not in opponent_outcomes(ttt.place(empty, opening, "O"), seed, "perfect")


def test_tictactoe_reference_never_loses_against_any_opponent() -> None:
    env = ttt.load_environment(num_examples=1)
    assert "loss" not in reference_outcomes(env, "." * 9, "New game.")
    for opening in range(9):
        board = ttt.place("." * 9, opening, "O")
        assert "loss" not in reference_outcomes(env, board, "New game.")


def test_tictactoe_score_and_efficiency() -> None:
    env = ttt.load_environment(num_examples=1)
    game = env.new_game({"board": "OO.XX....", "opponent": "random", "opponent_seed": 0})
    text = env.apply_move(game, "C2")
    assert "Three in a row: you win!" in text and env.score(game) == 1.0
    assert env.efficiency(game, {}) == 1.0
    game = env.new_game({"board": "XOXXOOO.X", "opponent": "random", "opponent_seed": 0})
    text = env.apply_move(game, "B3")
    assert "it is a draw" in text and env.score(game) == 0.5


def test_tictactoe_feedback_names_the_cell_the_opponent_took() -> None:
    env = ttt.load_environment(num_examples=30, seed=17, opponent="random")
    rng = random.Random(17)
    for row in env.get_dataset():
        game = env.new_game(row["info"])
        while not env.is_over(game):
            before = game["board"]
            cell = rng.choice(ttt.empty_cells(before))
            text = env.apply_move(game, ttt.cell_name(cell))
            after = game["board"]
            changed = [i for i in range(9) if before[i] != after[i]]
            replies = [i for i in changed if i != cell]
            assert after[cell] == "X" and all(after[i] == "O" for i in replies)
            said = re.findall(r"O played ([A-C][1-3])\.", text)
            assert said == [ttt.cell_name(i) for i in replies]
            assert ttt.render_board(after) in text


def test_tictactoe_turn_limit_leaves_room_for_the_invalid_moves_allowed() -> None:
    env = ttt.load_environment(num_examples=8, seed=3, opponent="random", max_invalid_moves=8)
    for row in env.get_dataset():
        state = play(env, row, slips_then(env.reference_policy, 7))
        assert state["invalid_moves"] == 7 and env.is_over(state["game_state"]), row["info"]


@pytest.mark.parametrize("digit", ["\uff12", "\u0662"])  # fullwidth 2, Arabic-Indic 2
def test_tictactoe_reads_a_row_digit_in_any_script_as_the_other_games_do(digit: str) -> None:
    """Connect Four, Nim, Sudoku, Minesweeper and Guess the Number read a fullwidth or an
    Arabic-Indic digit as the digit; tic-tac-toe refused "B" with a fullwidth 2 as "not a
    cell", which it is."""
    env = ttt.load_environment(num_examples=1, first="player")
    game = env.new_game(env.dataset[0]["info"])
    assert env.apply_move(game, f"B{digit}").startswith("You played B2.")
    assert ttt.parse_cell(f"{digit}b") == ttt.parse_cell("2B")


def test_tictactoe_medium_meets_every_opponent_on_both_sides() -> None:
    """Difficulty "medium" (a mixed opponent) with `first="alternate"` must pair each kind
    of opponent with each side to move first, not tie the perfect opponent to its own opening."""
    env = tictactoe.load_environment(num_examples=8, difficulty="medium", first="alternate")
    pairs = {
        (row["info"]["opponent"], row["info"]["board"] != tictactoe.EMPTY * 9)
        for row in env.dataset
    }
    assert pairs == {(kind, starts) for kind in ("random", "perfect") for starts in (False, True)}
