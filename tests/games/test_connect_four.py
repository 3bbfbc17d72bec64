"""Connect Four: lines on hand-built boards, the searching opponent, invalid moves, reference."""

from __future__ import annotations

from typing import Any

import pytest
from game_play import evaluate_over_http, play
from vfgym.games import connect_four as c4

import vfgym
from vfgym.errors import InvalidMove

EMPTY_BOARD = "." * 42


def build(moves: str) -> str:
    """A board from moves written as column digits (1-7), X and O alternating from X."""
    board = EMPTY_BOARD
    for i, col in enumerate(moves):
        board = c4.place(board, int(col) - 1, "XO"[i % 2])
    return board


def game(board: str, depth: int = 2) -> dict[str, Any]:
    return {"board": board, "depth": depth, "opponent_seed": 5, "moves": 0, "result": None}


# -- lines ------------------------------------------------------------------------


def test_four_in_a_row_in_every_direction() -> None:
    assert c4.winner(build("1122334")) == "X"  # across the bottom row
    assert c4.winner(build("1212121")) == "X"  # up column 1
    assert c4.winner(build("112233")) is None
    rising = "".join(
        [
            ".......",
            ".......",
            "...X...",
            "..XO...",
            ".XOO...",
            "XOXO...",
        ]
    )
    falling = "".join(
        [
            ".......",
            ".......",
            "...O...",
            "...XO..",
            "...XXO.",
            "...XXXO",
        ]
    )
    assert c4.winner(rising) == "X" and c4.winner(falling) == "O"
    assert c4.winner(rising.replace("X", ".", 1)) is None  # take away the top of the line


def test_lines_do_not_wrap_between_columns() -> None:
    # Column 1 holds X at rows 4-6 (top three); column 2 holds X at its bottom cell.
    board = "".join(
        [
            "X......",
            "X......",
            "X......",
            "O......",
            "O......",
            "OX.....",
        ]
    )
    x, _ = c4.to_bits(board)
    assert not c4.has_four(x) and c4.winner(board) is None


def test_pieces_fall_to_the_lowest_empty_cell() -> None:
    board = build("44")
    assert board[5 * 7 + 3] == "X" and board[4 * 7 + 3] == "O"
    assert c4.render_board(board).splitlines()[-2:] == [". . . O . . .", ". . . X . . ."]
    assert c4.read_board([{"role": "user", "content": c4.render_board(board)}]) == board


# -- the searching players ------------------------------------------------------------


def test_opponent_takes_a_win_and_blocks_one() -> None:
    board = build("1717273")  # O (to move) has three up column 7; X threatens column 4
    assert c4.opponent_move(board, depth=1, seed=1) == 6  # its own win comes first
    board = build("12131")  # X has three up column 1; O to move must block it
    assert c4.opponent_move(board, depth=1, seed=1) == 0


def test_reference_finds_the_double_threat() -> None:
    # X on 2 and 3 of the bottom row, O on 6 and 7: column 4 makes an open three that
    # cannot be stopped on both sides; column 1 or 5 could be blocked.
    board = build("2637")
    env = c4.load_environment(num_examples=1)
    message = env.reference_policy([{"role": "user", "content": c4.render_board(board)}])
    assert message["content"] == "<move>4</move>"


def test_the_last_cell_can_end_in_a_draw() -> None:
    env = c4.load_environment(num_examples=1)
    board = "X.XOXOOXXXOOXOXOOXOOOOOXXOXXXXOXXOOOOXOOXX"  # only column 2's top cell is free
    state = game(board)
    text = env.apply_move(state, "2")
    assert state["result"] == "draw" and "draw" in text and env.score(state) == 0.5


def test_a_win_and_a_loss_are_scored() -> None:
    env = c4.load_environment(num_examples=1)
    state = game(build("152535"))  # X on columns 1-3 of the bottom row; O up column 5
    text = env.apply_move(state, "4")
    assert state["result"] == "win" and "you win" in text and env.score(state) == 1.0
    state = game(build("171727"), depth=1)  # O has three up column 7; X plays elsewhere
    text = env.apply_move(state, "5")
    assert state["result"] == "loss" and "O played column 7" in text and env.score(state) == 0.0


# -- invalid moves ---------------------------------------------------------------------


def test_invalid_moves_leave_the_game_unchanged() -> None:
    env = c4.load_environment(num_examples=1)
    full = build("111111")
    state = game(full)
    for move, message in (
        ("8", "not a column"),
        ("0", "not a column"),
        ("left", "not a column"),
        ("1", "column 1 is full; choose one of 2, 3, 4, 5, 6, 7"),
    ):
        with pytest.raises(InvalidMove, match=message):
            env.apply_move(state, move)
    assert state == game(full)
    assert env.apply_move(state, "column 4.").startswith("You played column 4.")


def test_invalid_moves_end_the_game() -> None:
    env = c4.load_environment(num_examples=1)
    state = play(env, env.get_dataset()[0], lambda m: {"role": "assistant", "content": "9"})
    assert state["invalid_moves"] == 3 and state["reward"] == 0.0


# -- datasets ---------------------------------------------------------------------------


def test_items_are_pure_functions_of_seed_and_index() -> None:
    a = c4.load_environment(num_examples=12, seed=1).get_dataset()
    b = c4.load_environment(num_examples=4, seed=1).get_dataset()
    c = c4.load_environment(num_examples=12, seed=2).get_dataset()
    assert [r["info"] for r in a[:4]] == [r["info"] for r in b]
    assert [r["info"]["board"] for r in a] != [r["info"]["board"] for r in c]
    pieces = [(r["info"]["board"].count("X"), r["info"]["board"].count("O")) for r in a]
    assert pieces[0::2] == [(1, 1)] * 6 and pieces[1::2] == [(1, 2)] * 6  # alternate starts


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"difficulty": "x"}, "difficulty must be one of"),
        ({"depth": 7}, "depth must be between 0"),
        ({"first": "me"}, "first must be one of"),
        ({"opening_plies": 3}, "opening_plies must be an even number"),
    ],
)
def test_bad_knobs_are_refused_clearly(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        c4.load_environment(**kwargs)


# -- the reference policy --------------------------------------------------------------


async def test_reference_beats_the_random_opponent_over_http() -> None:
    """Over the real HTTP path (20 games; the 50-game result runs directly below)."""
    env = vfgym.load_environment("connect-four", num_examples=20, difficulty="easy")
    (out,) = await evaluate_over_http(env, 20, "reference")
    assert len(out.reward) == 20 and min(out.reward) >= 0.5
    assert sum(out.reward) / 20 >= 0.95 and out.metrics["invalid_moves"] == [0.0] * 20


def test_reference_does_well_against_the_default_opponent() -> None:
    env = c4.load_environment(num_examples=50, seed=3)  # medium: search depth 1
    rows = env.get_dataset()
    best = [play(env, row, env.reference_policy)["reward"] for row in rows]
    rand = [play(env, row, env.make_random_policy(i))["reward"] for i, row in enumerate(rows)]
    assert sum(best) / 50 >= 0.65 and sum(rand) / 50 <= 0.1
