"""Minesweeper: reveal every safe cell of a grid without opening a mine.

The first reveal is always safe, and opens an area: the mines are placed only
then, away from that cell and its neighbours, from the item's seed (so a
dataset row and a first move always give the same board). A revealed cell shows
how many of its eight neighbours hold mines; a cell with none opens its
neighbours in turn.

Cells are named by column letter and row number, `A1` at the top left. A move is
one or more actions separated by commas: `reveal B3`, `flag C4`, `unflag C4`
(a bare `B3` reveals), for example `<move>reveal B3, flag C4</move>`. Flags are
notes for the player: they stop a cell from being revealed by mistake and do
not count towards winning; the feedback counts the mines not yet flagged, never
below zero (with more flags than mines it says how many flags at least are on safe
cells). Revealing a cell that was already revealed, a
flagged cell, or flagging a revealed cell is invalid (nothing happens). The game
is won the moment the last safe cell opens: the actions after it in the same move
are not played.

Knobs: `width`/`height`/`mines` (`difficulty` presets "easy" 6x6 with 5 mines,
"medium" 8x8 with 10, "hard" 10x10 with 20), `max_turns`, `max_invalid_moves`.
Not always winnable by deduction: sometimes only a guess is left. The reference
policy deduces (single-cell and subset rules) and otherwise makes the guess
least likely to hit a mine. `step_reward` is the share of safe cells a move opened.
"""

from __future__ import annotations

import random
import re
from itertools import product
from typing import Any

from vfgym.games._base import (
    EVAL_OFFSET,
    TextGame,
    check_choice,
    check_whole,
    game_rows,
    move_message,
    move_number,
)

from vfgym.errors import InvalidMove
from vfgym.types import ChatMessage, Messages, State

GYM_ID = "vfgym/Minesweeper-v0"
KIND = "game"
NEEDS_SANDBOX = False

PRESETS = {"easy": (6, 6, 5), "medium": (8, 8, 10), "hard": (10, 10, 20)}
MAX_SIDE = 26

HIDDEN, FLAG, EMPTY, MINE, BLAST = "#", "F", ".", "*", "X"
_ACTION = re.compile(r"^(?:(reveal|open|r|flag|f|unflag|u)\s+)?([A-Za-z])\s*(\d+)$", re.IGNORECASE)
_ROW = re.compile(r"^\s*(\d+) ((?:[#F.*X1-8] ?)+)$", re.MULTILINE)
_MINES = re.compile(r"There (?:are|is) (\d+) mine")

SYSTEM_PROMPT = """You are playing Minesweeper.
Some cells of the grid hide mines. Reveal every cell that is not a mine to win; revealing a
mine loses. A revealed cell shows how many of its 8 neighbours are mines (. means none).
Your first reveal is always safe. On the board: # hidden, F flagged, . or 1-8 revealed.
Cells are named by column letter and row number, A1 at the top left.
A move is one or more actions separated by commas: reveal B3, flag C4, unflag C4.
Reply with your actions inside move tags, for example: <move>reveal B3</move>"""


def cell_name(r: int, c: int) -> str:
    return f"{chr(ord('A') + c)}{r + 1}"


def neighbours(r: int, c: int, height: int, width: int) -> list[tuple[int, int]]:
    return [
        (r + dr, c + dc)
        for dr, dc in product((-1, 0, 1), repeat=2)
        if (dr or dc) and 0 <= r + dr < height and 0 <= c + dc < width
    ]


def place_mines(
    mine_seed: int, height: int, width: int, mines: int, first: tuple[int, int]
) -> set[tuple[int, int]]:
    """The mines, away from the first reveal and (when there is room) its neighbours."""
    rng = random.Random(f"{mine_seed}:{first[0]}:{first[1]}")
    keep_clear = {first, *neighbours(*first, height, width)}
    cells = [(r, c) for r in range(height) for c in range(width)]
    allowed = [sq for sq in cells if sq not in keep_clear]
    if len(allowed) < mines:
        allowed = [sq for sq in cells if sq != first]
    return set(rng.sample(allowed, mines))


def fresh_game(info: dict[str, Any]) -> dict[str, Any]:
    """A game before the first reveal: no mines placed yet."""
    return {
        "width": info["width"],
        "height": info["height"],
        "mines": info["mines"],
        "mine_seed": info["mine_seed"],
        "mine_cells": None,
        "revealed": [],
        "flags": [],
        "blast": None,
        "last_opened": 0,
    }


def render_board(game: dict[str, Any], show_mines: bool = False) -> str:
    """The board as the player sees it; mines are drawn once the game is lost."""
    h, w = game["height"], game["width"]
    mines = {tuple(m) for m in game["mine_cells"]} if game["mine_cells"] else set()
    revealed = {tuple(x) for x in game["revealed"]}
    flags = {tuple(x) for x in game["flags"]}
    lines = ["    " + " ".join(chr(ord("A") + c) for c in range(w))]
    for r in range(h):
        row = []
        for c in range(w):
            sq = (r, c)
            if show_mines and sq in mines:
                row.append(BLAST if list(sq) == game["blast"] else MINE)
            elif sq in revealed:
                count = sum(n in mines for n in neighbours(r, c, h, w))
                row.append(str(count) if count else EMPTY)
            else:
                row.append(FLAG if sq in flags else HIDDEN)
        lines.append(f"{r + 1:>3} " + " ".join(row))
    return "\n".join(lines)


def mine_count(mines: int, flags: int) -> str:
    """The mines left unflagged, if every flag were right. More flags than mines cannot
    all be right: the count stays at zero and says how many flags at least are wrong,
    rather than going negative."""
    if flags <= mines:
        return f"Mines: {mines} (unflagged: {mines - flags})."
    extra = flags - mines
    wrong = "1 is on a safe cell" if extra == 1 else f"{extra} are on safe cells"
    return f"Mines: {mines} (unflagged: 0; {flags} flags, so at least {wrong})."


def parse_actions(move: str) -> list[tuple[str, int, int]]:
    """(kind, row, column) of each action; InvalidMove names the one that cannot be read."""
    actions = []
    for part in re.split(r"[,;\n]+", move):
        part = part.strip().rstrip(".")
        if not part:
            continue
        match = _ACTION.match(part)
        if not match:
            raise InvalidMove(
                f"could not read {part[:30]!r}; write actions like 'reveal B3', 'flag C4' "
                "or 'unflag C4', separated by commas."
            )
        verb = (match.group(1) or "reveal").lower()
        kind = {"open": "reveal", "r": "reveal", "f": "flag", "u": "unflag"}.get(verb, verb)
        row, col = move_number(match.group(3)) - 1, ord(match.group(2).upper()) - ord("A")
        actions.append((kind, row, col))
    if not actions:
        raise InvalidMove("the move holds no action; write one like <move>reveal B3</move>.")
    return actions


class MinesweeperEnv(TextGame):
    """Clear a minefield; the first reveal is safe."""

    game_name = "minesweeper"

    def new_game(self, info: dict[str, Any]) -> dict[str, Any]:
        return fresh_game(info)

    def apply_move(self, game: dict[str, Any], move: str) -> str:
        actions = parse_actions(move)
        h, w = game["height"], game["width"]
        revealed = {tuple(x) for x in game["revealed"]}
        flags = {tuple(x) for x in game["flags"]}
        pending_flags = set(flags)
        for kind, r, c in actions:  # check every action before any takes effect
            name = cell_name(r, c)
            if not (0 <= r < h and 0 <= c < w):
                last = cell_name(h - 1, w - 1)
                raise InvalidMove(f"{name} is off the board; cells go from A1 to {last}.")
            if kind == "reveal" and (r, c) in revealed:
                raise InvalidMove(f"{name} is already revealed; reveal a hidden (#) cell.")
            if kind == "reveal" and (r, c) in pending_flags:
                raise InvalidMove(f"{name} is flagged; unflag it first to reveal it.")
            if kind == "flag" and (r, c) in revealed:
                raise InvalidMove(f"{name} is revealed; only hidden cells can be flagged.")
            if kind == "flag" and (r, c) in pending_flags:
                raise InvalidMove(f"{name} is already flagged.")
            if kind == "unflag" and (r, c) not in pending_flags:
                raise InvalidMove(f"{name} has no flag to remove.")
            if kind == "flag":
                pending_flags.add((r, c))
            elif kind == "unflag":
                pending_flags.discard((r, c))
        before = len(revealed)
        safe = h * w - game["mines"]
        notes = []
        for kind, r, c in actions:
            if len(revealed) == safe:
                break  # the last safe cell opened: the game is won, and over
            name = cell_name(r, c)
            if kind == "flag" and (r, c) in revealed:
                # Opened by an earlier reveal of this move: a flag there would count
                # against the mines left and could never be seen on the board.
                notes.append(f"{name} was opened by an earlier reveal, so it is not flagged.")
            elif kind == "flag":
                flags.add((r, c))
                notes.append(f"Flagged {name}.")
            elif kind == "unflag":
                flags.discard((r, c))
                notes.append(f"Removed the flag on {name}.")
            elif (r, c) in revealed:
                continue  # opened by an earlier reveal of this move
            else:
                if game["mine_cells"] is None:
                    placed = place_mines(game["mine_seed"], h, w, game["mines"], (r, c))
                    game["mine_cells"] = sorted([list(m) for m in placed])
                mines = {tuple(m) for m in game["mine_cells"]}
                if (r, c) in mines:
                    game["blast"] = [r, c]
                    notes.append(f"{name} was a mine. You lose.")
                    break
                opened = self._flood(r, c, mines, revealed, flags, h, w)
                notes.append(
                    f"Revealed {name}" + (f" (+{opened - 1} more)." if opened > 1 else ".")
                )
        game["revealed"] = sorted([list(x) for x in revealed])
        game["flags"] = sorted([list(x) for x in flags])
        game["last_opened"] = len(revealed) - before
        if self._won(game):
            notes.append("Every safe cell is revealed. You win!")
        elif game["blast"] is None:
            notes.append(mine_count(game["mines"], len(flags)))
        return " ".join(notes) + "\n" + self.render(game)

    @staticmethod
    def _flood(r: int, c: int, mines: set, revealed: set, flags: set, h: int, w: int) -> int:
        """Reveal (r, c), and every neighbour of a cell with no mine around it; the count."""
        opened = 0
        stack = [(r, c)]
        while stack:
            sq = stack.pop()
            if sq in revealed:
                continue
            revealed.add(sq)
            flags.discard(sq)
            opened += 1
            around = neighbours(*sq, h, w)
            if not any(n in mines for n in around):
                stack.extend(n for n in around if n not in revealed)
        return opened

    @staticmethod
    def _won(game: dict[str, Any]) -> bool:
        safe = game["width"] * game["height"] - game["mines"]
        return game["blast"] is None and len(game["revealed"]) == safe

    def is_over(self, game: dict[str, Any]) -> bool:
        return game["blast"] is not None or self._won(game)

    def score(self, game: dict[str, Any]) -> float:
        return 1.0 if self._won(game) else 0.0

    def render(self, game: dict[str, Any]) -> str:
        return render_board(game, show_mines=game["blast"] is not None)

    def start_turn(self, game: dict[str, Any]) -> None:
        """A refused move opens nothing: clear the count before the move is tried."""
        game["last_opened"] = 0

    def step_reward(self, state: State) -> float:
        """The share of all safe cells the last move opened."""
        game = state["game_state"]
        return game["last_opened"] / (game["width"] * game["height"] - game["mines"])

    # ---------------------------------------------------------------- policies

    @staticmethod
    def read_board(messages: Messages) -> tuple[list[list[str]], int]:
        """The latest board in the conversation and the number of mines."""
        board = None
        mines = None
        for message in reversed(messages):
            if message.get("role") != "user":
                continue
            text = message.get("content") or ""
            if board is None:
                rows = _ROW.findall(text)
                if rows:
                    board = [body.split() for _, body in rows]
            found = _MINES.search(text)
            if found:
                mines = int(found.group(1))
                break
        if board is None or mines is None:
            raise ValueError("no Minesweeper board found in the conversation")
        return board, mines

    def reference_policy(self, messages: Messages) -> ChatMessage:
        board, mines = self.read_board(messages)
        safe, guess = deduce(board, mines)
        targets = sorted(safe) if safe else [guess]
        # Flags are the player's notes, not facts: a target under one is unflagged first,
        # since the game refuses to reveal a flagged cell.
        actions = []
        for r, c in targets:
            if board[r][c] == FLAG:
                actions.append(f"unflag {cell_name(r, c)}")
            actions.append(f"reveal {cell_name(r, c)}")
        return move_message(", ".join(actions))

    def random_move(self, messages: Messages, rng: random.Random) -> str:
        board, _ = self.read_board(messages)
        hidden = [(r, c) for r, row in enumerate(board) for c, ch in enumerate(row) if ch == HIDDEN]
        r, c = rng.choice(hidden) if hidden else (0, 0)
        return f"reveal {cell_name(r, c)}"


def deduce(board: list[list[str]], mines: int) -> tuple[set[tuple[int, int]], tuple[int, int]]:
    """Cells proven safe, and the hidden cell least likely to be a mine (for a guess).

    Each number gives a constraint "these hidden cells hold k mines", and so does
    the mine count over all hidden cells. Single-cell rules (k = 0, or k = the
    number of cells) and subset rules (a constraint inside another leaves the
    difference with the difference of counts) run until nothing changes.
    """
    h, w = len(board), len(board[0])
    hidden = {(r, c) for r in range(h) for c in range(w) if board[r][c] in (HIDDEN, FLAG)}
    if len(hidden) == h * w:  # the first move: the middle opens the widest area
        return set(), (h // 2, w // 2)
    raw = []
    for r, c in product(range(h), range(w)):
        ch = board[r][c]
        if ch in (HIDDEN, FLAG):
            continue
        count = 0 if ch == EMPTY else int(ch)
        cells = frozenset(n for n in neighbours(r, c, h, w) if n in hidden)
        if cells:
            raw.append((cells, count))
    raw.append((frozenset(hidden), mines))
    known_mines: set[tuple[int, int]] = set()
    known_safe: set[tuple[int, int]] = set()
    changed = True
    while changed:
        changed = False
        reduced = set()
        for cells, count in raw:
            rest = cells - known_mines - known_safe
            need = count - len(cells & known_mines)
            if not rest:
                continue
            if need == 0:
                known_safe |= rest
                changed = True
            elif need == len(rest):
                known_mines |= rest
                changed = True
            else:
                reduced.add((rest, need))
        if changed:
            continue
        small = [x for x in reduced if len(x[0]) <= 8]  # the global constraint is too broad
        for (a, ka), (b, kb) in product(small, reduced):
            if a < b:
                diff, k = b - a, kb - ka
                if k == 0:
                    known_safe |= diff
                    changed = True
                elif k == len(diff):
                    known_mines |= diff
                    changed = True
    if known_safe:
        return known_safe, next(iter(known_safe))
    # No certainty: a cell's risk is its worst constraint's share of mines, or the
    # overall density of what is left for a cell no number touches.
    unknown = hidden - known_mines
    density = (mines - len(known_mines)) / max(1, len(unknown))
    risk: dict[tuple[int, int], float] = {}
    for cells, count in raw[:-1]:
        rest = cells - known_mines
        if rest:
            share = (count - len(cells & known_mines)) / len(rest)
            for sq in rest:
                risk[sq] = max(risk.get(sq, 0.0), share)
    best = min(sorted(unknown), key=lambda sq: risk.get(sq, density))
    return set(), best


def generate_item(
    rng: random.Random, width: int, height: int, mines: int
) -> tuple[str, dict[str, Any], str]:
    info = {"width": width, "height": height, "mines": mines, "mine_seed": rng.getrandbits(48)}
    game = fresh_game(info)
    # The policy reads the count back from this sentence (_MINES).
    count = "There is 1 mine" if mines == 1 else f"There are {mines} mines"
    question = (
        f"The board is {width} columns (A-{chr(ord('A') + width - 1)}) by {height} rows "
        f"(1-{height}). {count}. Reveal a first cell.\n{render_board(game)}"
    )
    return question, info, ""


def load_environment(
    num_examples: int = 100,
    seed: int = 0,
    difficulty: str = "medium",
    width: int | None = None,
    height: int | None = None,
    mines: int | None = None,
    max_turns: int | None = None,
    max_invalid_moves: int = 3,
) -> MinesweeperEnv:
    """Build the environment; `width`/`height`/`mines` override the difficulty's preset."""
    check_choice("difficulty", difficulty, PRESETS)
    w, h, m = PRESETS[difficulty]
    w, h = (w if width is None else width), (h if height is None else height)
    m = m if mines is None else mines
    # A bool is an int to isinstance: mines=True played a 1-mine game reported as
    # "Mines: True"; check_whole refuses it, as every game's counts are refused.
    for name, value in (("width", w), ("height", h)):
        check_whole(name, value, example=8)
        if not 3 <= value <= MAX_SIDE:
            raise ValueError(f"{name} must be a whole number from 3 to {MAX_SIDE}, not {value!r}")
    check_whole("mines", m, example=10)
    check_whole("max_invalid_moves", max_invalid_moves, example=3)
    if not 1 <= m <= w * h - 9:
        raise ValueError(
            f"mines must be a whole number from 1 to {w * h - 9} on a {w}x{h} board "
            f"(the first reveal and its neighbours stay clear), not {m!r}"
        )
    if max_turns is not None and max_turns < 1:
        raise ValueError("max_turns must be at least 1 (or None for the default)")
    # One safe cell per turn always fits, beside every invalid move short of the last one
    # allowed: invalid moves end a game, not the turn limit.
    turns = max_turns or (w * h - m) + max(5, max_invalid_moves - 1)
    make = lambda rng, i: generate_item(rng, w, h, m)  # noqa: E731
    return MinesweeperEnv(
        dataset=game_rows("minesweeper", make, num_examples, seed),
        eval_dataset=game_rows("minesweeper", make, num_examples, seed, offset=EVAL_OFFSET),
        system_prompt=SYSTEM_PROMPT,
        max_turns=turns,
        max_invalid_moves=max_invalid_moves,
    )
