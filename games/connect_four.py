"""Connect Four against a built-in searching opponent: line up four before it does.

Seven columns, six rows; a piece dropped in a column falls to the lowest empty cell. The
player is X, the opponent O. Knobs: `depth` (the opponent's alpha-beta search depth in
plies; 0 plays uniformly at random; `difficulty` presets "easy" 0, "medium" 1, "hard" 3),
`first` ("player", "opponent" or "alternate" by item), `opening_plies` (random moves
played for both sides before the game is handed over, for variety; default 2),
`max_invalid_moves`. The opponent breaks ties between equally good moves with a
generator seeded per item, so games vary but replay exactly. Reward: 1 win, 0.5 draw,
0 loss. The evaluation counts open lines and, above all, threats (empty cells that would
complete four) on the rows whose parity decides the endgame. The reference policy searches
deeper than any preset (5 plies) with the same evaluation, breaking ties with a generator
seeded by the board it reads.
"""

from __future__ import annotations

import random
import re
from functools import cache, lru_cache
from typing import Any

from vfgym.games._base import EVAL_OFFSET, check_choice, check_whole, game_rows, move_message
from vfgym.games._boards import (
    EMPTY,
    FIRSTS,
    OPPONENT,
    PLAYER,
    OpponentGame,
    latest_board,
    opponent_moves_first,
)

from vfgym.errors import InvalidMove
from vfgym.types import ChatMessage, Messages

GYM_ID = "vfgym/ConnectFour-v0"
KIND = "game"
NEEDS_SANDBOX = False
#: The reference searches deeper than the opponent but can still draw or lose: it
#: promises no reward on every game (`vfgym check` still plays it, for errors).
REFERENCE_REWARD = None

ROWS, COLS = 6, 7
DIFFICULTIES = {"easy": 0, "medium": 1, "hard": 3}
REFERENCE_DEPTH = 5
MAX_DEPTH = 6
ORDER = (3, 2, 4, 1, 5, 0, 6)  # centre first: better pruning, and the tie-break
WIN = 1_000_000
HEADER = " ".join(str(c + 1) for c in range(COLS))
_BOARD = re.compile(r"^" + re.escape(HEADER) + r"\n((?:[.XO](?: [.XO]){6}\n?){6})", re.MULTILINE)

SYSTEM_PROMPT = """You are playing Connect Four. You are X, your opponent is O.
The board has 7 columns (numbered 1 to 7, left to right) and 6 rows. On your turn, drop a
piece into a column that is not full: it falls to the lowest empty cell. The first to line up
four pieces in a row — across, up and down, or diagonally — wins. A full board is a draw.
After each of your moves I show the opponent's reply and the board (top row first).
Reply with a column number inside move tags, for example: <move>4</move>"""


# ----------------------------------------------------------- bitboards
# Each column takes 7 bits (6 cells, bottom first, and a spare bit that keeps lines
# from wrapping into the next column).


def _bit(row_from_bottom: int, col: int) -> int:
    return 1 << (col * (ROWS + 1) + row_from_bottom)


BOTTOM = [_bit(0, c) for c in range(COLS)]
TOP = [_bit(ROWS - 1, c) for c in range(COLS)]
COLUMN = [((1 << ROWS) - 1) << (c * (ROWS + 1)) for c in range(COLS)]
FULL = sum(COLUMN)
BOTTOM_ROW = sum(BOTTOM)
ODD_ROWS = sum(_bit(r, c) for r in range(0, ROWS, 2) for c in range(COLS))  # 1st, 3rd, 5th
EVEN_ROWS = FULL & ~ODD_ROWS


@cache
def windows() -> tuple[int, ...]:
    """Every line of four cells, as bit masks (69 of them)."""
    found = []
    for col in range(COLS):
        for row in range(ROWS):
            for dc, dr in ((1, 0), (0, 1), (1, 1), (1, -1)):
                cells = [(row + k * dr, col + k * dc) for k in range(4)]
                if all(0 <= r < ROWS and 0 <= c < COLS for r, c in cells):
                    found.append(sum(_bit(r, c) for r, c in cells))
    return tuple(found)


def has_four(mask: int) -> bool:
    for shift in (1, ROWS + 1, ROWS, ROWS + 2):  # vertical, horizontal, both diagonals
        pairs = mask & (mask >> shift)
        if pairs & (pairs >> (2 * shift)):
            return True
    return False


def to_bits(board: str) -> tuple[int, int]:
    """(X mask, O mask) of a board string (row-major, top row first)."""
    masks = {PLAYER: 0, OPPONENT: 0}
    for i, cell in enumerate(board):
        if cell != EMPTY:
            masks[cell] |= _bit(ROWS - 1 - i // COLS, i % COLS)
    return masks[PLAYER], masks[OPPONENT]


def drop(mask_all: int, col: int) -> int:
    """The bit a piece dropped in `col` lands on."""
    return (mask_all + BOTTOM[col]) & COLUMN[col]


def threats(mask: int, both: int) -> int:
    """Empty cells where `mask`'s side would complete four."""
    found = (mask << 1) & (mask << 2) & (mask << 3)  # vertical: three below
    for shift in (ROWS + 1, ROWS, ROWS + 2):  # horizontal, both diagonals
        pair = (mask << shift) & (mask << 2 * shift)
        found |= pair & (mask << 3 * shift)
        found |= pair & (mask >> shift)
        pair = (mask >> shift) & (mask >> 2 * shift)
        found |= pair & (mask << shift)
        found |= pair & (mask >> 3 * shift)
    return found & FULL & ~both


@lru_cache(maxsize=1 << 18)
def evaluate(me: int, them: int) -> int:
    """A static score for the side to move (`me`).

    Open lines count (fuller lines more), and threats — empty cells that would complete
    four — count much more, most of all on the rows where they decide the endgame: the
    odd rows (1st, 3rd, 5th from the bottom) for the side that moved first, the even rows
    for the other, since as the board fills each side is forced to give up the cells of
    the other parity.
    """
    both = me | them
    playable = (both + BOTTOM_ROW) & FULL
    mine, theirs = threats(me, both), threats(them, both)
    if mine & playable:
        return WIN // 2  # the side to move wins next move
    first = both.bit_count() % 2 == 0  # the side to move moved first in this game
    my_rows, their_rows = (ODD_ROWS, EVEN_ROWS) if first else (EVEN_ROWS, ODD_ROWS)
    score = 48 * (mine & my_rows).bit_count() + 12 * (mine & their_rows).bit_count()
    score -= 48 * (theirs & their_rows).bit_count() + 12 * (theirs & my_rows).bit_count()
    weights = (0, 1, 3, 6)  # a line with k pieces and none of the other side's
    for line in windows():
        own, other = me & line, them & line
        if own and not other:
            score += weights[own.bit_count()]
        elif other and not own:
            score -= weights[other.bit_count()]
    return score


#: Transposition-table bounds: the stored value is exact, a lower or an upper bound.
EXACT, LOWER, UPPER = 0, 1, 2


def negamax(
    me: int, them: int, depth: int, alpha: int, beta: int, table: dict[tuple[int, int], Any]
) -> int:
    """The value for the side to move (`me`), searched `depth` plies with alpha-beta.

    `table` remembers positions already searched at the same depth (move orders
    transpose often in Connect Four), so each root search passes a fresh dict.
    """
    both = me | them
    if both & FULL == FULL:
        return 0
    if depth == 0:
        return evaluate(me, them)
    key = (me, them)
    entry = table.get(key)
    if entry is not None and entry[0] == depth:
        _, flag, stored = entry
        if flag == EXACT:
            return stored
        if flag == LOWER:
            alpha = max(alpha, stored)
        else:
            beta = min(beta, stored)
        if alpha >= beta:
            return stored
    start = alpha
    value = alpha
    for col in ORDER:
        if both & TOP[col]:
            continue
        moved = me | drop(both, col)
        if has_four(moved):
            value = WIN + depth  # sooner wins score higher
        else:
            value = -negamax(them, moved, depth - 1, -beta, -alpha, table)
        if value >= beta:
            table[key] = (depth, LOWER, value)
            return value
        alpha = max(alpha, value)
    table[key] = (depth, UPPER if alpha <= start else EXACT, alpha)
    return alpha


def best_columns(me: int, them: int, depth: int) -> list[int]:
    """Every column whose searched value ties for best, in centre-first order."""
    both = me | them
    legal = [c for c in ORDER if not both & TOP[c]]
    best, values = -(WIN * 2), {}
    table: dict[tuple[int, int], Any] = {}
    for col in legal:
        moved = me | drop(both, col)
        if has_four(moved):
            values[col] = WIN + depth
        else:
            values[col] = -negamax(them, moved, depth - 1, -(WIN * 2), -(best - 1), table)
        best = max(best, values[col])
    return [c for c in legal if values[c] == best]


# ------------------------------------------------------------------ the board


def legal_columns(board: str) -> list[int]:
    return [c for c in range(COLS) if board[c] == EMPTY]


def place(board: str, col: int, mark: str) -> str:
    """The board after dropping `mark` in `col` (which must not be full)."""
    for row in range(ROWS - 1, -1, -1):
        i = row * COLS + col
        if board[i] == EMPTY:
            return board[:i] + mark + board[i + 1 :]
    raise ValueError(f"column {col + 1} is full")


def winner(board: str) -> str | None:
    x, o = to_bits(board)
    return PLAYER if has_four(x) else OPPONENT if has_four(o) else None


def opponent_move(board: str, depth: int, seed: int) -> int:
    """The built-in opponent's column: a pure function of the board, its depth and seed."""
    rng = random.Random(f"{seed}:{board}")
    if depth == 0:
        return rng.choice(legal_columns(board))
    x, o = to_bits(board)
    return rng.choice(best_columns(o, x, depth))


def render_board(board: str) -> str:
    rows = [" ".join(board[r * COLS : (r + 1) * COLS]) for r in range(ROWS)]
    return "\n".join([HEADER, *rows])


def read_board(messages: Messages) -> str:
    """The latest board shown in the conversation (what a player sees)."""
    found = latest_board(messages, _BOARD)
    if found is None:
        raise ValueError("no Connect Four board found in the conversation")
    return found.replace(" ", "").replace("\n", "")


# ------------------------------------------------------------------- the game


class ConnectFourEnv(OpponentGame):
    """Connect Four; the environment answers each move with the opponent's reply."""

    game_name = "connect-four"
    line = "four"

    def new_game(self, info: dict[str, Any]) -> dict[str, Any]:
        return {
            "board": info["board"],
            "depth": info["depth"],
            "opponent_seed": info["opponent_seed"],
            "moves": 0,
            "result": None,
        }

    def apply_move(self, game: dict[str, Any], move: str) -> str:
        text = move.strip().lower().removeprefix("column").strip().rstrip(".")
        # isdecimal, not isdigit: int() refuses digits such as "²"; two digits at most.
        if not (text.isdecimal() and len(text) <= 2 and 1 <= int(text) <= COLS):
            raise InvalidMove(
                f"{move[:40]!r} is not a column; give a number 1-7, like <move>4</move>."
            )
        col = int(text) - 1
        board = game["board"]
        if board[col] != EMPTY:
            free = ", ".join(str(c + 1) for c in legal_columns(board))
            raise InvalidMove(f"column {col + 1} is full; choose one of {free}.")
        game["moves"] += 1
        return self.finish_turn(game, place(board, col, PLAYER), f"You played column {col + 1}.")

    def board_winner(self, board: str) -> str | None:
        return winner(board)

    def board_full(self, board: str) -> bool:
        return not legal_columns(board)

    def opponent_reply(self, game: dict[str, Any], board: str) -> tuple[str, str]:
        col = opponent_move(board, game["depth"], game["opponent_seed"])
        return place(board, col, OPPONENT), f"O played column {col + 1}."

    def render_board(self, board: str) -> str:
        return render_board(board)

    def efficiency(self, game: dict[str, Any], state: dict[str, Any]) -> float:
        """Four moves is the fastest possible win."""
        return min(1.0, 4 / max(1, game["moves"]))

    def reference_policy(self, messages: Messages) -> ChatMessage:
        board = read_board(messages)
        x, o = to_bits(board)
        # Equal moves are told apart by a generator seeded with the board: still a pure
        # function of what the conversation shows, but not always the same shape of game.
        col = random.Random(board).choice(best_columns(x, o, REFERENCE_DEPTH))
        return move_message(str(col + 1))

    def random_move(self, messages: Messages, rng: random.Random) -> str:
        try:
            return str(rng.choice(legal_columns(read_board(messages))) + 1)
        except ValueError:
            return str(rng.randint(1, COLS))


# ------------------------------------------------------------------- items


def random_opening(rng: random.Random, plies: int, marks: tuple[str, str]) -> str:
    """A board after `plies` random moves, `marks[0]` first, none of which makes four."""
    board = EMPTY * (ROWS * COLS)
    for ply in range(plies):
        mark = marks[ply % 2]
        quiet = [c for c in legal_columns(board) if winner(place(board, c, mark)) is None]
        board = place(board, rng.choice(quiet), mark)
    return board


def generate_item(
    rng: random.Random, index: int, depth: int, first: str, opening_plies: int
) -> tuple[str, dict[str, Any], str]:
    """A game: random opening plies (no one wins in them), then the opponent's first move
    when it starts.

    An opening after which that first move would complete four is drawn again: the
    player would be handed a game already lost. (An opening that passes the first time
    is the one earlier versions drew, so such items are unchanged.)
    """
    opponent_starts = opponent_moves_first(first, index)
    seed = rng.getrandbits(32)
    marks = (OPPONENT, PLAYER) if opponent_starts else (PLAYER, OPPONENT)
    intro = f"New game. {opening_plies} opening moves were played at random."
    while True:
        board = random_opening(rng, opening_plies, marks)
        if not opponent_starts:
            intro += " You move first."
            break
        col = opponent_move(board, depth, seed)
        if winner(place(board, col, OPPONENT)) is None:
            board = place(board, col, OPPONENT)
            intro += f" O moves first and played column {col + 1}."
            break
    question = f"{intro}\n\n{render_board(board)}\n\nYour move (you are X)."
    return question, {"board": board, "depth": depth, "opponent_seed": seed}, ""


def load_environment(
    num_examples: int = 100,
    seed: int = 0,
    difficulty: str = "medium",
    depth: int | None = None,
    first: str = "alternate",
    opening_plies: int = 2,
    max_turns: int | None = None,
    max_invalid_moves: int = 3,
) -> ConnectFourEnv:
    """Build the environment; `depth` overrides the difficulty's search depth."""
    check_choice("difficulty", difficulty, DIFFICULTIES)
    depth = DIFFICULTIES[difficulty] if depth is None else depth
    check_whole("depth", depth, example=DIFFICULTIES[difficulty])
    check_whole("opening_plies", opening_plies, example=2)
    check_whole("max_invalid_moves", max_invalid_moves, example=3)
    if not 0 <= depth <= MAX_DEPTH:
        raise ValueError(f"depth must be between 0 (random) and {MAX_DEPTH}, not {depth}")
    check_choice("first", first, FIRSTS)
    if opening_plies not in range(0, 9, 2):
        raise ValueError(
            f"opening_plies must be an even number from 0 to 8 (so the same side starts), "
            f"not {opening_plies}"
        )
    turns = max_turns if max_turns is not None else ROWS * COLS // 2 + max_invalid_moves
    if turns < 1:
        raise ValueError(f"max_turns must be at least 1, not {turns}")
    make = lambda rng, i: generate_item(rng, i, depth, first, opening_plies)  # noqa: E731
    return ConnectFourEnv(
        dataset=game_rows("connect-four", make, num_examples, seed),
        eval_dataset=game_rows("connect-four", make, num_examples, seed, offset=EVAL_OFFSET),
        system_prompt=SYSTEM_PROMPT,
        max_turns=turns,
        max_invalid_moves=max_invalid_moves,
    )
