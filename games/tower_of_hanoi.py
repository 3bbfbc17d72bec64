"""Tower of Hanoi: move every disk onto the target peg, never a larger disk on a smaller one.

Knobs: `disks` (the number of disks; `difficulty` presets "easy" 3, "medium" 4,
"hard" 6), `start` ("classic": every disk on one peg; "random": each disk on a
random peg, a legal position whatever the order), `max_turns` (default: the
optimal number of moves from the start, plus slack), `max_invalid_moves`.
The start and target pegs come from the item's seed. One disk moves per turn,
written `<move>A C</move>` (from peg A to peg C; `A->C`, `AC` and `1 3` work too).
Winnable by deduction: the recursive solution is optimal from any legal
position. Efficiency is the optimal number of moves over the moves used.
"""

from __future__ import annotations

import random
import re
from typing import Any

from vfgym.games._base import (
    EVAL_OFFSET,
    TextGame,
    ascii_digits,
    check_choice,
    check_whole,
    counted,
    game_rows,
    move_message,
)

from vfgym.errors import InvalidMove
from vfgym.types import ChatMessage, Messages

GYM_ID = "vfgym/TowerOfHanoi-v0"
KIND = "game"
NEEDS_SANDBOX = False

PEGS = "ABC"
DISKS = {"easy": 3, "medium": 4, "hard": 6}
STARTS = ("classic", "random")
MAX_DISKS = 12

#: Pegs and the word "to" are read in either case; the pegs may also be written together
#: ("AC", "13"), one character each, so two of them can only be read one way.
_MOVE = re.compile(r"^\s*([A-C1-3])\s*(?:(?:->|→|-|to|,)\s*)?([A-C1-3])\s*\.?\s*$", re.IGNORECASE)
_PEG_LINE = re.compile(r"^Peg ([ABC]):(.*)$", re.MULTILINE)
_TARGET = re.compile(r"onto peg ([ABC])")

SYSTEM_PROMPT = """You are playing the Tower of Hanoi.
There are three pegs, A, B and C, and disks of different sizes (1 is the smallest).
Each turn, move the top disk of one peg onto another peg. A disk may never be placed
on a smaller disk. Move every disk onto the target peg to win.
The position lists each peg's disks from bottom to top.
Reply with one move inside move tags, from-peg then to-peg, for example: <move>A C</move>"""


def _peg(symbol: str) -> int:
    """Peg index of 'A'..'C' or '1'..'3'."""
    symbol = symbol.upper()
    return PEGS.index(symbol) if symbol in PEGS else int(symbol) - 1


def positions_of(pegs: list[list[int]], disks: int) -> list[int]:
    """The peg of every disk: `positions[d]` for disk d (1-based; index 0 unused)."""
    where = [0] * (disks + 1)
    for index, stack in enumerate(pegs):
        for disk in stack:
            where[disk] = index
    return where


def optimal_moves(positions: list[int], target: int) -> int:
    """The fewest moves that gather every disk on `target` from `positions`."""
    count, goal = 0, target
    for disk in range(len(positions) - 1, 0, -1):
        if positions[disk] != goal:
            # Disk must move to `goal`; the smaller ones wait on the third peg and
            # afterwards travel as one tower (2^(disk-1) - 1 moves).
            count += 1 + (2 ** (disk - 1) - 1)
            goal = 3 - positions[disk] - goal
    return count


def first_optimal_move(positions: list[int], target: int) -> tuple[int, int]:
    """The first move of an optimal solution from `positions` (not yet solved)."""
    goal, pending = target, None
    for disk in range(len(positions) - 1, 0, -1):
        if positions[disk] != goal:
            pending = (positions[disk], goal)  # move this disk once everything above is clear
            goal = 3 - positions[disk] - goal
    if pending is None:
        raise ValueError("every disk is already on the target peg")
    # `pending` belongs to the smallest misplaced disk whose smaller disks all sit
    # on the peg they must wait on, so it is the move to make now.
    return pending


class TowerOfHanoiEnv(TextGame):
    """Move a tower of disks between three pegs."""

    game_name = "tower-of-hanoi"

    def new_game(self, info: dict[str, Any]) -> dict[str, Any]:
        return {
            "pegs": [list(stack) for stack in info["pegs"]],
            "disks": info["disks"],
            "target": info["target"],
            "optimal": info["optimal"],
            "moves": 0,
        }

    def apply_move(self, game: dict[str, Any], move: str) -> str:
        match = _MOVE.match(move)
        if not match and not move.isascii():  # peg numbers of another script (fullwidth)
            match = _MOVE.match(ascii_digits(move))
        if not match:
            raise InvalidMove(
                f"{move[:40]!r} is not a move; write the from-peg and the to-peg, "
                "like <move>A C</move>."
            )
        src, dst = _peg(match.group(1)), _peg(match.group(2))
        if src == dst:
            raise InvalidMove(f"a disk must move to another peg, not from {PEGS[src]} to itself.")
        pegs = game["pegs"]
        if not pegs[src]:
            raise InvalidMove(f"peg {PEGS[src]} is empty; move a disk from a peg that has one.")
        disk = pegs[src][-1]
        if pegs[dst] and pegs[dst][-1] < disk:
            raise InvalidMove(
                f"disk {disk} cannot go on the smaller disk {pegs[dst][-1]} on peg {PEGS[dst]}."
            )
        pegs[dst].append(pegs[src].pop())
        game["moves"] += 1
        text = f"Moved disk {disk} from {PEGS[src]} to {PEGS[dst]}.\n{self.render(game)}"
        if self.is_over(game):
            moves = counted(game["moves"], "move", "moves")
            text += f"\nSolved in {moves} (optimal: {game['optimal']})."
        return text

    def is_over(self, game: dict[str, Any]) -> bool:
        return len(game["pegs"][game["target"]]) == game["disks"]

    def score(self, game: dict[str, Any]) -> float:
        return 1.0 if self.is_over(game) else 0.0

    def efficiency(self, game: dict[str, Any], state: dict[str, Any]) -> float:
        return min(1.0, game["optimal"] / max(1, game["moves"]))

    def render(self, game: dict[str, Any]) -> str:
        return render_pegs(game["pegs"], game["target"])

    @staticmethod
    def read_position(messages: Messages) -> tuple[list[list[int]], int]:
        """The latest pegs shown in the conversation and the target peg."""
        target = None
        pegs = None
        for message in reversed(messages):
            if message.get("role") != "user":
                continue
            text = message.get("content") or ""
            lines = _PEG_LINE.findall(text)
            if pegs is None and len(lines) == 3:
                pegs = [[int(d) for d in body.split()] for _, body in lines]
            found = _TARGET.search(text)
            if target is None and found:
                target = PEGS.index(found.group(1))
            if pegs is not None and target is not None:
                return pegs, target
        raise ValueError("no Tower of Hanoi position found in the conversation")

    def reference_policy(self, messages: Messages) -> ChatMessage:
        pegs, target = self.read_position(messages)
        disks = sum(len(stack) for stack in pegs)
        src, dst = first_optimal_move(positions_of(pegs, disks), target)
        return move_message(f"{PEGS[src]} {PEGS[dst]}")

    def random_move(self, messages: Messages, rng: random.Random) -> str:
        src, dst = rng.sample(PEGS, 2)
        return f"{src} {dst}"


def render_pegs(pegs: list[list[int]], target: int) -> str:
    """Each peg's disks from bottom to top, and the target peg."""
    lines = [f"Peg {PEGS[i]}:" + "".join(f" {d}" for d in stack) for i, stack in enumerate(pegs)]
    return "\n".join(lines) + f"\n(goal: every disk onto peg {PEGS[target]})"


def generate_item(rng: random.Random, disks: int, start: str) -> tuple[str, dict[str, Any], str]:
    """A start position and a target peg; the position is never already solved."""
    target = rng.randrange(3)
    while True:
        if start == "classic":
            home = rng.choice([p for p in range(3) if p != target])
            where = [home] * (disks + 1)
        else:
            where = [0] + [rng.randrange(3) for _ in range(disks)]
        if any(where[d] != target for d in range(1, disks + 1)):
            break
    pegs: list[list[int]] = [[], [], []]
    for disk in range(disks, 0, -1):  # bottom to top: largest first
        pegs[where[disk]].append(disk)
    optimal = optimal_moves(where, target)
    task = "There is 1 disk. Move it" if disks == 1 else f"There are {disks} disks. Move them all"
    question = f"{task} onto peg {PEGS[target]}.\n{render_pegs(pegs, target)}"
    info = {"pegs": pegs, "disks": disks, "target": target, "optimal": optimal}
    return question, info, str(optimal)


def load_environment(
    num_examples: int = 100,
    seed: int = 0,
    difficulty: str = "medium",
    disks: int | None = None,
    start: str = "random",
    max_turns: int | None = None,
    max_invalid_moves: int = 3,
) -> TowerOfHanoiEnv:
    """Build the environment; `disks` overrides the difficulty's number of disks."""
    check_choice("difficulty", difficulty, DISKS)
    n = DISKS[difficulty] if disks is None else disks
    check_whole("disks", n, example=DISKS[difficulty])
    check_whole("max_invalid_moves", max_invalid_moves, example=3)
    if not 1 <= n <= MAX_DISKS:
        raise ValueError(f"disks must be a whole number from 1 to {MAX_DISKS}, not {n!r}")
    check_choice("start", start, STARTS)
    if max_turns is not None and max_turns < 1:
        raise ValueError("max_turns must be at least 1 (or None for the default)")
    # The classic start needs 2^n - 1 moves, the most any position needs; the slack
    # holds every invalid move short of the last one allowed, so invalid moves end a
    # game, not the turn limit.
    turns = max_turns or (2**n - 1) + max(5, n * 2, max_invalid_moves - 1)
    make = lambda rng, i: generate_item(rng, n, start)  # noqa: E731
    return TowerOfHanoiEnv(
        dataset=game_rows("tower-of-hanoi", make, num_examples, seed),
        eval_dataset=game_rows("tower-of-hanoi", make, num_examples, seed, offset=EVAL_OFFSET),
        system_prompt=SYSTEM_PROMPT,
        max_turns=turns,
        max_invalid_moves=max_invalid_moves,
    )
