"""Tic-tac-toe against a built-in opponent: get three in a row before it does.

The player is always X, the built-in opponent O. Knobs: `opponent` ("random",
"perfect" — exhaustive minimax, choosing among equally good moves with a seeded
generator — or "mixed", which alternates the two every two items, so that with
`first="alternate"` each meets both openings; `difficulty` presets
"easy" random, "medium" mixed, "hard" perfect), `first` ("player", "opponent" or
"alternate" by item), `max_turns`, `max_invalid_moves`. Reward: 1 win, 0.5 draw,
0 loss. The reference policy plays perfectly (never loses) and, among the moves
that keep the minimax value, takes the one that wins most often against a random
opponent.
"""

from __future__ import annotations

import random
import re
from functools import cache, lru_cache
from typing import Any

from vfgym.games._base import (
    EVAL_OFFSET,
    TextGame,
    ascii_digits,
    check_choice,
    check_whole,
    game_rows,
    move_message,
)

from vfgym.errors import InvalidMove
from vfgym.types import ChatMessage, Messages

GYM_ID = "vfgym/TicTacToe-v0"
KIND = "game"
NEEDS_SANDBOX = False

OPPONENTS = ("random", "perfect", "mixed")
FIRSTS = ("player", "opponent", "alternate")
DIFFICULTIES = {"easy": "random", "medium": "mixed", "hard": "perfect"}
PLAYER, OPPONENT, EMPTY = "X", "O", "."
COLUMNS = "ABC"
LINES = (
    (0, 1, 2),
    (3, 4, 5),
    (6, 7, 8),
    (0, 3, 6),
    (1, 4, 7),
    (2, 5, 8),
    (0, 4, 8),
    (2, 4, 6),
)
_CELL = re.compile(r"^\s*([A-Ca-c])\s*([1-3])\s*$|^\s*([1-3])\s*([A-Ca-c])\s*$|^\s*([1-9])\s*$")
_BOARD = re.compile(r"^   A B C\n1  (.) (.) (.)\n2  (.) (.) (.)\n3  (.) (.) (.)$", re.MULTILINE)

SYSTEM_PROMPT = """You are playing tic-tac-toe on a 3x3 board. You are X, your opponent is O.
Take turns placing your mark in an empty cell (shown as "."); the first to get three marks in a
row, column or diagonal wins. A full board with no line is a draw.
A cell is named by its column letter (A, B, C, left to right) and row number (1, 2, 3, top to
bottom): A1 is the top-left corner, B2 the centre, C3 the bottom-right corner.
After each of your moves I show the opponent's reply and the board.
Reply with one cell inside move tags, for example: <move>B2</move>"""


# ------------------------------------------------------------------ the rules


#: Cell names by index, row-major: A1 B1 C1 A2 ... C3.
CELL_NAMES = tuple(f"{COLUMNS[i % 3]}{i // 3 + 1}" for i in range(9))


def cell_name(index: int) -> str:
    """The name of cell `index` (0-8, row-major), e.g. 4 -> "B2"."""
    return CELL_NAMES[index]


@lru_cache(maxsize=1024)
def parse_cell(text: str) -> int:
    """The cell index (0-8) a move names: "B2", "2b" or a number 1-9 counted row by row,
    a full stop after it allowed (as every game of the catalogue allows one), its digit
    in any script (a fullwidth 2 in "B2", as the games that read numbers with int() take it).

    Memoised (a failed parse raises and is not kept): models repeat the same few spellings.
    """
    match = _CELL.match(text.rstrip().removesuffix("."))
    if not match and not text.isascii():  # a row digit of another script (fullwidth)
        match = _CELL.match(ascii_digits(text).rstrip().removesuffix("."))
    if not match:
        raise InvalidMove(
            f"{text[:40]!r} is not a cell; name one by column letter and row number, "
            "like <move>B2</move>."
        )
    col, row, row2, col2, number = match.groups()
    if number:
        return int(number) - 1
    col, row = (col, row) if col else (col2, row2)
    return (int(row) - 1) * 3 + COLUMNS.index(col.upper())


# A board is one of at most 3**9 strings, so the pure functions of a board below are
# memoised without bound: a game's move then costs dictionary lookups, not searches.


@cache
def winner(board: str) -> str | None:
    """The mark that has three in a row, if any."""
    for a, b, c in LINES:
        if board[a] != EMPTY and board[a] == board[b] == board[c]:
            return board[a]
    return None


@cache
def _empty(board: str) -> tuple[int, ...]:
    return tuple(i for i, mark in enumerate(board) if mark == EMPTY)


def empty_cells(board: str) -> list[int]:
    return list(_empty(board))


@cache
def _empty_names(board: str) -> str:
    return ", ".join(CELL_NAMES[i] for i in _empty(board))


def place(board: str, index: int, mark: str) -> str:
    return board[:index] + mark + board[index + 1 :]


def other(mark: str) -> str:
    return OPPONENT if mark == PLAYER else PLAYER


@cache
def minimax_value(board: str, to_move: str) -> int:
    """The game's value for the side to move with perfect play: 1 win, 0 draw, -1 loss."""
    if winner(board) is not None:
        return -1  # the previous move made a line
    moves = _empty(board)
    if not moves:
        return 0
    return max(-minimax_value(place(board, i, to_move), other(to_move)) for i in moves)


def best_moves(board: str, mark: str) -> list[int]:
    """Every move that keeps the minimax value for `mark`."""
    return list(_best(board, mark))


@cache
def _best(board: str, mark: str) -> tuple[int, ...]:
    values = {i: -minimax_value(place(board, i, mark), other(mark)) for i in _empty(board)}
    top = max(values.values())
    return tuple(i for i, value in values.items() if value == top)


@cache
def score_against_random(board: str, mark: str, to_move: str) -> float:
    """`mark`'s expected score (1/0.5/0) if it plays `best_moves` wisely and the other side
    plays uniformly at random."""
    won = winner(board)
    if won is not None:
        return 1.0 if won == mark else 0.0
    moves = _empty(board)
    if not moves:
        return 0.5
    if to_move == mark:
        return max(
            score_against_random(place(board, i, mark), mark, other(mark))
            for i in _best(board, mark)
        )
    total = sum(score_against_random(place(board, i, to_move), mark, mark) for i in moves)
    return total / len(moves)


@lru_cache(maxsize=1 << 15)
def opponent_move(board: str, kind: str, seed: int) -> int:
    """The built-in opponent's cell; a pure function of the board, its kind and its seed.

    Memoised: seeding a generator from the position costs more than the rest of a
    move, and training replays the same items (and so positions) many times.
    """
    rng = random.Random(f"{seed}:{board}")
    choices = _empty(board) if kind == "random" else _best(board, OPPONENT)
    return rng.choice(choices)


@lru_cache(maxsize=1 << 14)
def play_move(board: str, cell: int, opponent: str, seed: int) -> tuple[str, str | None, str]:
    """X plays the empty `cell`, then the opponent replies unless the game is over: the new
    board, the result ("win", "loss", "draw" or None) and the text that reports it.

    A pure function of its arguments, memoised: a move is then one lookup.
    """
    board = place(board, cell, PLAYER)
    lines = [f"You played {CELL_NAMES[cell]}."]
    result = None
    if winner(board) == PLAYER:
        result = "win"
        lines.append("Three in a row: you win!")
    elif not _empty(board):
        result = "draw"
        lines.append("The board is full: it is a draw.")
    else:
        reply = opponent_move(board, opponent, seed)
        board = place(board, reply, OPPONENT)
        lines.append(f"O played {CELL_NAMES[reply]}.")
        if winner(board) == OPPONENT:
            result = "loss"
            lines.append("O has three in a row: you lose.")
        elif not _empty(board):
            result = "draw"
            lines.append("The board is full: it is a draw.")
    return board, result, f"{' '.join(lines)}\n\n{render_board(board)}"


@cache
def render_board(board: str) -> str:
    rows = [f"{r + 1}  " + " ".join(board[r * 3 : r * 3 + 3]) for r in range(3)]
    return "\n".join(["   A B C", *rows])


def read_board(messages: Messages) -> str:
    """The latest board shown in the conversation (what a player sees)."""
    for message in reversed(messages):
        if message.get("role") == "assistant":
            continue
        found = _BOARD.findall(message.get("content") or "")
        if found:
            return "".join(found[-1])
    raise ValueError("no tic-tac-toe board found in the conversation")


# ----------------------------------------------------------------- the game


class TicTacToeEnv(TextGame):
    """Tic-tac-toe; the environment answers each move with the opponent's reply."""

    game_name = "tictactoe"

    def new_game(self, info: dict[str, Any]) -> dict[str, Any]:
        return {
            "board": info["board"],
            "opponent": info["opponent"],
            "opponent_seed": info["opponent_seed"],
            "moves": [],
            "result": None,
        }

    def apply_move(self, game: dict[str, Any], move: str) -> str:
        cell = parse_cell(move)
        board = game["board"]
        if board[cell] != EMPTY:
            raise InvalidMove(
                f"{CELL_NAMES[cell]} is already taken by {board[cell]}; choose an empty cell "
                f"({_empty_names(board)})."
            )
        board, result, text = play_move(board, cell, game["opponent"], game["opponent_seed"])
        game["moves"].append(CELL_NAMES[cell])
        if result is not None:
            game["result"] = result
        game["board"] = board
        return text if game["result"] else f"{text}\n\nYour move (you are X)."

    def is_over(self, game: dict[str, Any]) -> bool:
        return game["result"] is not None

    def score(self, game: dict[str, Any]) -> float:
        return {"win": 1.0, "draw": 0.5}.get(game["result"], 0.0)

    def efficiency(self, game: dict[str, Any], state: dict[str, Any]) -> float:
        """Three moves is the fastest possible win."""
        return min(1.0, 3 / max(1, len(game["moves"])))

    def render(self, game: dict[str, Any]) -> str:
        status = {"win": "X won", "loss": "O won", "draw": "draw"}.get(game["result"], "X to move")
        return f"{render_board(game['board'])}\n{status}"

    def reference_policy(self, messages: Messages) -> ChatMessage:
        board = read_board(messages)
        choice = max(
            best_moves(board, PLAYER),
            key=lambda i: score_against_random(place(board, i, PLAYER), PLAYER, OPPONENT),
        )
        return move_message(cell_name(choice))

    def random_move(self, messages: Messages, rng: random.Random) -> str:
        try:
            board = read_board(messages)
        except ValueError:
            return cell_name(rng.randrange(9))
        return cell_name(rng.choice(empty_cells(board)))


# ------------------------------------------------------------------- items


def generate_item(
    rng: random.Random, index: int, opponent: str, first: str
) -> tuple[str, dict[str, Any], str]:
    """One game: the opponent's kind and seed, and its opening move when it starts."""
    # "mixed" changes kind every two items, and "alternate" the first player every item,
    # so each kind meets both openings rather than always the same one.
    kind = opponent if opponent != "mixed" else ("random", "perfect")[index // 2 % 2]
    opponent_starts = first == "opponent" or (first == "alternate" and index % 2 == 1)
    seed = rng.getrandbits(32)
    board = EMPTY * 9
    if opponent_starts:
        opening = opponent_move(board, kind, seed)
        board = place(board, opening, OPPONENT)
        intro = f"New game. O moved first and played {cell_name(opening)}."
    else:
        intro = "New game. You move first."
    question = f"{intro}\n\n{render_board(board)}\n\nYour move (you are X)."
    info = {"board": board, "opponent": kind, "opponent_seed": seed}
    return question, info, ""


def load_environment(
    num_examples: int = 100,
    seed: int = 0,
    difficulty: str = "medium",
    opponent: str | None = None,
    first: str = "alternate",
    max_turns: int | None = None,
    max_invalid_moves: int = 3,
) -> TicTacToeEnv:
    """Build the environment; `opponent` overrides the difficulty's opponent.

    `max_turns` defaults to 10, or more when `max_invalid_moves` allows more invalid moves
    than 10 turns hold beside a full game's five X moves: invalid moves end a game, not
    the turn limit.
    """
    check_choice("difficulty", difficulty, DIFFICULTIES)
    kind = DIFFICULTIES[difficulty] if opponent is None else opponent
    check_choice("opponent", kind, OPPONENTS)
    check_choice("first", first, FIRSTS)
    check_whole("max_invalid_moves", max_invalid_moves, example=3)
    if max_turns is None:
        max_turns = max(10, 5 + max_invalid_moves - 1)
    if max_turns < 5:
        raise ValueError(
            f"max_turns must be at least 5 (a full game has 5 X moves), not {max_turns}"
        )
    make = lambda rng, i: generate_item(rng, i, kind, first)  # noqa: E731
    return TicTacToeEnv(
        dataset=game_rows("tictactoe", make, num_examples, seed),
        eval_dataset=game_rows("tictactoe", make, num_examples, seed, offset=EVAL_OFFSET),
        system_prompt=SYSTEM_PROMPT,
        max_turns=max_turns,
        max_invalid_moves=max_invalid_moves,
    )
