"""Connect Four: lines on hand-built boards, the searching opponent, invalid moves, reference."""

from __future__ import annotations

import copy
import random
import re
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from game_play import evaluate_over_http, play
from vfgym.games import connect_four as c4
from vfgym.games import connect_four as cf

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


DIRECTIONS_C4 = ((0, 1), (1, 0), (1, 1), (1, -1))


def brute_winner(board: str) -> str | None:
    """Scan every cell and direction for four equal marks (X checked first, as the game does)."""
    found = set()
    for r in range(c4.ROWS):
        for c in range(c4.COLS):
            mark = board[r * c4.COLS + c]
            if mark == c4.EMPTY:
                continue
            for dr, dc in DIRECTIONS_C4:
                cells = [(r + k * dr, c + k * dc) for k in range(4)]
                if all(0 <= rr < c4.ROWS and 0 <= cc < c4.COLS for rr, cc in cells) and all(
                    board[rr * c4.COLS + cc] == mark for rr, cc in cells
                ):
                    found.add(mark)
    return "X" if "X" in found else ("O" if "O" in found else None)


def random_gravity_board(rng: random.Random, plies: int) -> str:
    """A board reached by `plies` alternating drops in random columns (no win check)."""
    board = c4.EMPTY * (c4.ROWS * c4.COLS)
    for ply in range(plies):
        cols = c4.legal_columns(board)
        if not cols:
            break
        board = c4.place(board, rng.choice(cols), "XO"[ply % 2])
    return board


def plain_negamax(me: int, them: int, depth: int) -> int:
    """The same search as the opponent's, without pruning or a table."""
    both = me | them
    if both & c4.FULL == c4.FULL:
        return 0
    if depth == 0:
        return c4.evaluate(me, them)
    best = -(c4.WIN * 4)
    for col in range(c4.COLS):
        if both & c4.TOP[col]:
            continue
        moved = me | c4.drop(both, col)
        value = c4.WIN + depth if c4.has_four(moved) else -plain_negamax(them, moved, depth - 1)
        best = max(best, value)
    return best


def plain_best(me: int, them: int, depth: int) -> set[int]:
    both = me | them
    values = {}
    for col in range(c4.COLS):
        if both & c4.TOP[col]:
            continue
        moved = me | c4.drop(both, col)
        if c4.has_four(moved):
            values[col] = c4.WIN + depth
        else:
            values[col] = -plain_negamax(them, moved, depth - 1)
    best = max(values.values())
    return {col for col, value in values.items() if value == best}


def check_c4_turn(before: str, after: str, text: str) -> None:
    """One X then (unless the game ended) one O, each at the lowest free cell of the column
    the feedback names."""
    played = re.search(r"You played column (\d)\.", text)
    assert played, text
    board = c4.place(before, int(played.group(1)) - 1, "X")
    replied = re.search(r"O played column (\d)\.", text)
    if replied:
        col = int(replied.group(1)) - 1
        assert board[col] == c4.EMPTY, "the opponent played a full column"
        board = c4.place(board, col, "O")
    assert after == board
    assert c4.render_board(after) in text


def brute_threats(mask: int, both: int) -> int:
    """Empty cells that would give `mask` four in a row, by trying each one."""
    found = 0
    for r in range(c4.ROWS):
        for c in range(c4.COLS):
            bit = 1 << (c * (c4.ROWS + 1) + r)
            if not bit & both and c4.has_four(mask | bit):
                found |= bit
    return found


def test_c4_winner_agrees_with_a_brute_force_scan_on_random_boards() -> None:
    rng = random.Random(1)
    for _ in range(3000):
        density = rng.random()
        board = "".join(
            rng.choice("XO") if rng.random() < density else c4.EMPTY
            for _ in range(c4.ROWS * c4.COLS)
        )
        assert c4.winner(board) == brute_winner(board), board


def test_c4_every_line_of_four_wins_alone_at_every_edge() -> None:
    """Each of the 69 lines, alone on an empty board, is a win for its mark."""
    count = 0
    for r in range(c4.ROWS):
        for c in range(c4.COLS):
            for dr, dc in DIRECTIONS_C4:
                cells = [(r + k * dr, c + k * dc) for k in range(4)]
                if not all(0 <= rr < c4.ROWS and 0 <= cc < c4.COLS for rr, cc in cells):
                    continue
                count += 1
                for mark in "XO":
                    board = list(c4.EMPTY * (c4.ROWS * c4.COLS))
                    for rr, cc in cells:
                        board[rr * c4.COLS + cc] = mark
                    assert c4.winner("".join(board)) == mark, cells
                    board[cells[3][0] * c4.COLS + cells[3][1]] = c4.EMPTY  # three only
                    assert c4.winner("".join(board)) is None, cells
    assert count == len(c4.windows()) == 69


def test_c4_filling_the_last_cell_without_a_line_is_a_draw() -> None:
    rows = ["XXOOXXO", "OOXXOOX"] * 3
    full = "".join(rows)
    assert brute_winner(full) is None
    board = "." + full[1:]  # the top-left cell (an X) still open
    env = c4.load_environment(num_examples=1)
    game = env.new_game({"board": board, "depth": 1, "opponent_seed": 0})
    text = env.apply_move(game, "1")
    assert game["result"] == "draw" and env.score(game) == 0.5
    assert "it is a draw" in text and game["board"] == full


def test_c4_pruned_search_picks_the_same_best_columns_as_plain_minimax() -> None:
    rng = random.Random(5)
    checked = 0
    while checked < 40:
        board = random_gravity_board(rng, rng.randrange(4, 30))
        if c4.winner(board) or not c4.legal_columns(board):
            continue
        x, o = c4.to_bits(board)
        depth = 1 + checked % 3
        assert set(c4.best_columns(o, x, depth)) == plain_best(o, x, depth), (board, depth)
        checked += 1


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_c4_every_turn_is_legal_and_the_result_matches_the_board(depth: int) -> None:
    env = c4.load_environment(num_examples=12, seed=3, depth=depth)
    policy = env.make_random_policy(1)
    for row in env.dataset:
        game = env.new_game(row["info"])
        messages = list(row["prompt"])
        while not env.is_over(game):
            move = policy(messages)
            before = game["board"]
            text = env.apply_move(game, move["content"][6:-7])
            check_c4_turn(before, game["board"], text)
            messages += [move, {"role": "user", "content": text}]
        expected = {"X": "win", "O": "loss", None: "draw"}[brute_winner(game["board"])]
        assert game["result"] == expected
        if expected == "draw":
            assert c4.EMPTY not in game["board"]


def test_c4_a_full_column_is_refused_and_nothing_changes() -> None:
    board = ("X" + "." * 6) + ("O" + "." * 6) + ("X" + "." * 6) * 2 + ("O" + "." * 6) * 2
    env = c4.load_environment(num_examples=1)
    game = env.new_game({"board": board, "depth": 1, "opponent_seed": 0})
    kept = copy.deepcopy(game)
    with pytest.raises(InvalidMove, match="column 1 is full; choose one of 2, 3, 4, 5, 6, 7"):
        env.apply_move(game, "1")
    for bad in ("0", "8", "x", "4.5"):
        with pytest.raises(InvalidMove):
            env.apply_move(game, bad)
    assert game == kept


def test_c4_threats_are_exactly_the_cells_that_complete_four() -> None:
    rng = random.Random(21)
    for _ in range(400):
        board = random_gravity_board(rng, rng.randrange(0, 42))
        x, o = c4.to_bits(board)
        if c4.has_four(x) or c4.has_four(o):
            continue
        for me in (x, o):
            assert c4.threats(me, x | o) == brute_threats(me, x | o), board


@pytest.mark.parametrize("first", ["player", "opponent"])
def test_c4_items_start_from_the_position_the_intro_describes(first: str) -> None:
    env = c4.load_environment(num_examples=20, seed=4, first=first, opening_plies=4)
    for row in env.dataset:
        board, question = row["info"]["board"], row["prompt"][-1]["content"]
        assert brute_winner(board) is None and c4.render_board(board) in question
        xs, os_ = board.count("X"), board.count("O")
        if first == "opponent":
            assert os_ == xs + 1 == 3
            assert re.search(r"O moves first and played column \d\.", question)
        else:
            assert xs == os_ == 2 and "You move first." in question
        for i, cell in enumerate(board):  # pieces rest on the floor or on another piece
            below = i + c4.COLS
            assert cell == c4.EMPTY or below >= len(board) or board[below] != c4.EMPTY


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
