"""Sudoku: fill the grid so every row, column and box holds each digit once.

Puzzles are 4x4 (2x2 boxes, digits 1-4) or 9x9 (3x3 boxes, digits 1-9), each with
exactly one solution: a full grid is drawn from the item's seed, then givens are
removed one by one while a solver confirms the solution stays unique.

A move places one or more digits, `<move>r3c5=7</move>` or
`<move>r3c5=7 r3c6=1</move>` (row, column, digit; all placements of a move are
checked together, on the grid they leave, so their order does not matter, and none
is made if one is refused; a cell named twice is refused). A placement that puts a
digit twice in a row, column or box, or that writes over a given, is invalid.
A placement that breaks no rule but is not the solution is accepted; you may
overwrite your own digits or clear one with `r3c5=0`. The game is won when the
grid is full (a full grid that breaks no rule is the solution, since it is unique).

Knobs: `size` (4 or 9), `difficulty` ("easy", "medium", "hard": fewer givens),
`givens` (overrides the difficulty's target; removal stops earlier when no
further given can go without losing uniqueness), `max_turns`,
`max_invalid_moves`. Winnable by deduction. Efficiency is the number of empty
cells over the placements made.
"""

from __future__ import annotations

import random
import re
from typing import Any

from vfgym.games._base import (
    EVAL_OFFSET,
    TextGame,
    check_choice,
    check_whole,
    counted,
    game_rows,
    move_message,
    move_number,
)
from vfgym.games._boards import latest_shown

from vfgym.errors import InvalidMove
from vfgym.types import ChatMessage, Messages

GYM_ID = "vfgym/Sudoku-v0"
KIND = "game"
NEEDS_SANDBOX = False

SIZES = (4, 9)
GIVENS = {4: {"easy": 10, "medium": 7, "hard": 5}, 9: {"easy": 40, "medium": 32, "hard": 27}}
MIN_GIVENS = {4: 4, 9: 17}

_PLACEMENT = re.compile(r"r\s*(\d+)\s*c\s*(\d+)\s*[=:]\s*(\d+|\.)", re.IGNORECASE)
_SEPARATORS = re.compile(r"[\s,;]+")
#: A full stop after a move's last digit ends a sentence (as in every game of the
#: catalogue); a dot after "=" is a clear, `r3c5=.`, and stays.
_FULL_STOP = re.compile(r"(\d)\s*\.\s*$")
_ROW = re.compile(r"^r(\d+)\s*\|(.*)$", re.MULTILINE)

SYSTEM_PROMPT = """You are solving a Sudoku puzzle.
Fill every empty cell (shown as .) so that each row, each column and each box holds
every digit exactly once. Rows are r1, r2, ... from the top; columns c1, c2, ... from the left.
A move places digits: <move>r3c5=7</move> puts 7 in row 3, column 5. You may place several
digits in one move, separated by spaces: <move>r3c5=7 r3c6=1</move>. A digit that repeats one
in its row, column or box, or a change to a given, is refused. You may overwrite your own
digits, or clear one with r3c5=0. The puzzle is solved when the grid is full.
Reply with your placements inside move tags, for example: <move>r1c2=4</move>"""


def box_size(n: int) -> int:
    return 2 if n == 4 else 3


def _units(n: int) -> tuple[list[int], list[int], list[int]]:
    """Row, column and box index of every cell."""
    b = box_size(n)
    rows = [i // n for i in range(n * n)]
    cols = [i % n for i in range(n * n)]
    boxes = [(i // n) // b * b + (i % n) // b for i in range(n * n)]
    return rows, cols, boxes


def _check_repeats(grid: list[int], placed: dict[int, int], n: int) -> None:
    """Refuse the move (nothing is placed) if a digit it placed repeats another digit of
    `grid` in the same row, column or box."""
    rows, cols, boxes = _units(n)
    for cell, digit in placed.items():
        if not digit:
            continue
        for other in range(n * n):
            if other == cell or grid[other] != digit:
                continue
            for unit, label in ((rows, "row"), (cols, "column"), (boxes, "box")):
                if unit[other] == unit[cell]:
                    name = f"r{cell // n + 1}c{cell % n + 1}"
                    where = f"r{other // n + 1}c{other % n + 1}"
                    raise InvalidMove(
                        f"{name}={digit} repeats the {digit} at {where} in the same "
                        f"{label}; nothing was placed."
                    )


def solve(
    grid: list[int], n: int, limit: int = 1, exclude: tuple[int, int] | None = None
) -> list[list[int]]:
    """Up to `limit` solutions of `grid` (0 = empty).

    Depth-first search on the most constrained cell. `exclude=(cell, digit)`
    forbids that digit in that cell: that is how uniqueness is checked when a
    given is removed, since any other solution must differ there.
    """
    rows, cols, boxes = _units(n)
    full = (1 << (n + 1)) - 2  # bits 1..n
    row_used, col_used, box_used = [0] * n, [0] * n, [0] * n
    for i, digit in enumerate(grid):
        if digit:
            bit = 1 << digit
            if row_used[rows[i]] & bit or col_used[cols[i]] & bit or box_used[boxes[i]] & bit:
                return []
            row_used[rows[i]] |= bit
            col_used[cols[i]] |= bit
            box_used[boxes[i]] |= bit
    empty = [i for i, digit in enumerate(grid) if not digit]
    work = list(grid)
    found: list[list[int]] = []
    banned = {exclude[0]: 1 << exclude[1]} if exclude else {}

    def search() -> bool:
        best, best_mask, best_count = -1, 0, n + 1
        for i in empty:
            if work[i]:
                continue
            mask = full & ~(row_used[rows[i]] | col_used[cols[i]] | box_used[boxes[i]])
            mask &= ~banned.get(i, 0)
            count = mask.bit_count()
            if count < best_count:
                best, best_mask, best_count = i, mask, count
                if count <= 1:
                    break
        if best < 0:
            found.append(list(work))
            return len(found) >= limit
        r, c, b = rows[best], cols[best], boxes[best]
        mask = best_mask
        while mask:
            bit = mask & -mask
            mask ^= bit
            work[best] = bit.bit_length() - 1
            row_used[r] |= bit
            col_used[c] |= bit
            box_used[b] |= bit
            done = search()
            row_used[r] ^= bit
            col_used[c] ^= bit
            box_used[b] ^= bit
            if done:
                work[best] = 0
                return True
        work[best] = 0
        return False

    search()
    return found


def full_grid(rng: random.Random, n: int) -> list[int]:
    """A random complete grid.

    A patterned solution, then rows within bands, bands, columns within stacks,
    stacks and digits shuffled (moves that keep a grid valid), and maybe a transpose.
    """
    b = box_size(n)

    def order() -> list[int]:
        bands = rng.sample(range(b), b)
        return [band * b + k for band in bands for k in rng.sample(range(b), b)]

    row_order, col_order = order(), order()
    digits = rng.sample(range(1, n + 1), n)
    grid = [digits[(b * (r % b) + r // b + c) % n] for r in row_order for c in col_order]
    if rng.random() < 0.5:  # transpose
        grid = [grid[c * n + r] for r in range(n) for c in range(n)]
    return grid


def make_puzzle(rng: random.Random, n: int, target_givens: int) -> tuple[list[int], list[int]]:
    """(puzzle, solution): givens removed in random order while the solution stays unique."""
    solution = full_grid(rng, n)
    puzzle = list(solution)
    givens = n * n
    for cell in rng.sample(range(n * n), n * n):
        if givens <= target_givens:
            break
        digit = puzzle[cell]
        puzzle[cell] = 0
        if solve(puzzle, n, limit=1, exclude=(cell, digit)):
            puzzle[cell] = digit  # another solution exists without this given: keep it
        else:
            givens -= 1
    return puzzle, solution


def render_grid(grid: list[int], n: int) -> str:
    """The grid with row labels r1.., column numbers and box borders; '.' is empty."""
    b = box_size(n)
    header = "     " + "   ".join(
        " ".join(str(c + 1) for c in range(k, k + b)) for k in range(0, n, b)
    )
    rule = "   +" + "+".join("-" * (2 * b + 1) for _ in range(n // b)) + "+"
    lines = [header, rule]
    for r in range(n):
        cells = [str(d) if d else "." for d in grid[r * n : (r + 1) * n]]
        boxes = [" ".join(cells[k : k + b]) for k in range(0, n, b)]
        lines.append(f"r{r + 1:<2}| " + " | ".join(boxes) + " |")
        if (r + 1) % b == 0:
            lines.append(rule)
    return "\n".join(lines)


def read_grid(text: str) -> list[int] | None:
    """The grid drawn in `text` by `render_grid`, or None if there is none."""
    rows = _ROW.findall(text)
    n = len(rows)
    if n not in SIZES:
        return None
    grid = []
    for _, body in rows:
        cells = [tok for tok in body.split() if tok != "|"]
        if len(cells) != n:
            return None
        grid.extend(0 if tok == "." else int(tok) for tok in cells)
    return grid


class SudokuEnv(TextGame):
    """Fill a Sudoku grid with a unique solution."""

    game_name = "sudoku"

    def new_game(self, info: dict[str, Any]) -> dict[str, Any]:
        return {
            "n": info["n"],
            "givens": list(info["puzzle"]),
            "grid": list(info["puzzle"]),
            "placements": 0,
        }

    def apply_move(self, game: dict[str, Any], move: str) -> str:
        n = game["n"]
        move = _FULL_STOP.sub(r"\1", move)
        tokens = [t for t in _SEPARATORS.split(_PLACEMENT.sub(" \0 ", move)) if t]
        leftovers = [t for t in tokens if t != "\0"]
        placements = _PLACEMENT.findall(move)
        if leftovers or not placements:
            raise InvalidMove(
                f"could not read {(' '.join(leftovers) or move)[:40]!r}; write placements "
                "as row, column and digit, like <move>r3c5=7</move> or <move>r1c1=2 r1c2=9</move>."
            )
        grid = list(game["grid"])
        made: dict[int, int] = {}  # cell -> digit, in the order the move names them
        for r_text, c_text, d_text in placements:
            r, c = move_number(r_text), move_number(c_text)
            digit = 0 if d_text == "." else move_number(d_text)
            name = f"r{r}c{c}"
            if not (1 <= r <= n and 1 <= c <= n):
                raise InvalidMove(f"{name} is off the grid; rows and columns go from 1 to {n}.")
            if not 0 <= digit <= n:
                raise InvalidMove(
                    f"{digit} is not a digit of this puzzle; use 1 to {n} (0 clears)."
                )
            cell = (r - 1) * n + (c - 1)
            if game["givens"][cell]:
                raise InvalidMove(f"{name} is a given ({game['givens'][cell]}); it cannot change.")
            if cell in made:
                raise InvalidMove(f"{name} is named twice in one move; place each cell once.")
            grid[cell] = made[cell] = digit
        # The placements are judged together, by the grid they leave, so their order in
        # the move does not matter (a clear may come after the digit it makes room for).
        _check_repeats(grid, made, n)
        game["grid"] = grid
        game["placements"] += len(made)
        left = grid.count(0)
        status = (
            "Solved: the grid is complete!"
            if not left
            else f"{counted(left, 'empty cell', 'empty cells')} left."
        )
        placed = " ".join(
            f"r{cell // n + 1}c{cell % n + 1}={digit}" for cell, digit in made.items()
        )
        return f"Placed {placed}. {status}\n{render_grid(grid, n)}"

    def is_over(self, game: dict[str, Any]) -> bool:
        return 0 not in game["grid"]

    def score(self, game: dict[str, Any]) -> float:
        # Placements never break a rule, so a full grid is a valid one: the unique solution.
        return 1.0 if self.is_over(game) else 0.0

    def efficiency(self, game: dict[str, Any], state: dict[str, Any]) -> float:
        empties = game["givens"].count(0)
        return min(1.0, empties / max(1, game["placements"]))

    def render(self, game: dict[str, Any]) -> str:
        return render_grid(game["grid"], game["n"])

    @staticmethod
    def latest_grid(messages: Messages) -> list[int]:
        grid = latest_shown(messages, read_grid, roles=("user",))
        if grid is None:
            raise ValueError("no Sudoku grid found in the conversation")
        return grid

    def reference_policy(self, messages: Messages) -> ChatMessage:
        grid = self.latest_grid(messages)
        n = 4 if len(grid) == 16 else 9
        solutions = solve(grid, n)
        if not solutions:
            raise ValueError("the grid shown has no solution; a placement must be undone")
        solution = solutions[0]
        moves = [f"r{i // n + 1}c{i % n + 1}={solution[i]}" for i in range(n * n) if not grid[i]]
        return move_message(" ".join(moves))

    def random_move(self, messages: Messages, rng: random.Random) -> str:
        grid = self.latest_grid(messages)
        n = 4 if len(grid) == 16 else 9
        empty = [i for i, d in enumerate(grid) if not d] or list(range(n * n))
        cell = rng.choice(empty)
        return f"r{cell // n + 1}c{cell % n + 1}={rng.randint(1, n)}"


def generate_item(rng: random.Random, n: int, givens: int) -> tuple[str, dict[str, Any], str]:
    puzzle, solution = make_puzzle(rng, n, givens)
    question = f"Solve this {n}x{n} Sudoku.\n{render_grid(puzzle, n)}"
    info = {"n": n, "puzzle": puzzle, "solution": solution}
    return question, info, "".join(map(str, solution))


def load_environment(
    num_examples: int = 100,
    seed: int = 0,
    difficulty: str = "medium",
    size: int = 9,
    givens: int | None = None,
    max_turns: int | None = None,
    max_invalid_moves: int = 3,
) -> SudokuEnv:
    """Build the environment; `givens` overrides the difficulty's number of givens."""
    check_whole("size", size, example=9)
    if size not in SIZES:
        raise ValueError(f"size must be 4 or 9, not {size!r}")
    check_choice("difficulty", difficulty, GIVENS[size])
    target = GIVENS[size][difficulty] if givens is None else givens
    # At most one cell fewer than the grid: a puzzle with every cell given is a game
    # over before its first move, scored as a win whatever the model says.
    most = size * size - 1
    if not isinstance(target, int) or not MIN_GIVENS[size] <= target <= most:
        raise ValueError(
            f"givens must be a whole number from {MIN_GIVENS[size]} to {most} "
            f"for a {size}x{size} grid (at least one cell left to fill), not {target!r}"
        )
    if max_turns is not None and max_turns < 1:
        raise ValueError("max_turns must be at least 1 (or None for the default)")
    # One placement per turn always fits (an item has at most size² - target empty cells),
    # beside every invalid move short of the last one allowed.
    check_whole("max_invalid_moves", max_invalid_moves, example=3)
    turns = max_turns or max(size * size, size * size - target + max_invalid_moves - 1)
    make = lambda rng, i: generate_item(rng, size, target)  # noqa: E731
    return SudokuEnv(
        dataset=game_rows("sudoku", make, num_examples, seed),
        eval_dataset=game_rows("sudoku", make, num_examples, seed, offset=EVAL_OFFSET),
        system_prompt=SYSTEM_PROMPT,
        max_turns=turns,
        max_invalid_moves=max_invalid_moves,
    )
