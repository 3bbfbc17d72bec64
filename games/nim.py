"""Nim: take objects from heaps in turn; whoever takes the last object wins (or, misère, loses).

The player moves first against a built-in opponent. Knobs: `heaps` (number of heaps),
`max_heap` (largest heap), `opponent` ("optimal": the nim-sum strategy, taking one object
from the largest heap when it has no winning move; or "random"), `misere`, `start`
("winning": every item starts from a position the player can force a win from — the
issue's "nim from a winning position"; or "random": any position, with `info["winning"]`
saying which), `difficulty` presets ("easy" 3 heaps up to 5 against a random opponent,
"medium" 4 up to 7, "hard" 5 up to 15, both optimal), `max_invalid_moves`.

The reference policy plays the nim-sum strategy with the misère endgame rule (when every
heap but one is a single object, leave an odd number of single objects), so it wins every
game that starts from a winning position.
"""

from __future__ import annotations

import random
import re
from functools import reduce
from operator import xor
from typing import Any

from vfgym.games._base import (
    EVAL_OFFSET,
    TextGame,
    check_choice,
    check_flag,
    check_whole,
    counted,
    game_rows,
    move_message,
    move_number,
)

from vfgym.errors import InvalidMove
from vfgym.types import ChatMessage, Messages

GYM_ID = "vfgym/Nim-v0"
KIND = "game"
NEEDS_SANDBOX = False

OPPONENTS = ("optimal", "random")
STARTS = ("winning", "random")
DIFFICULTIES = {"easy": (3, 5, "random"), "medium": (4, 7, "optimal"), "hard": (5, 15, "optimal")}

_MOVE = re.compile(r"^\D*?(\d+)\D+?(\d+)\D*$")
#: "take 2 from heap 3", "take 2 out of heap 3": the count comes first when "from", or
#: the word "heap" (or "pile") naming the second number, stands between the numbers.
_COUNT_FROM_HEAP = re.compile(
    r"^\D*?(\d+)\D*?(?:\bfrom\b|\b(?:heap|pile)\b)\D*?(\d+)\D*$", re.IGNORECASE
)
#: A minus sign before a number ("1 -2"); a dash between two numbers ("1-2", "1 - 2")
#: only separates them.
_NEGATIVE = re.compile(r"(?<!\d)[-\u2212]\d")
_HEAP = re.compile(r"^\s*heap (\d+): [o ]*\((\d+)\)\s*$", re.MULTILINE)
_RULES = {
    False: "Whoever takes the last object wins.",
    True: "Misère rules: whoever takes the last object loses.",
}

SYSTEM_PROMPT = """You are playing Nim against me. There are several heaps of objects.
On your turn, choose one heap and take one or more objects from it (up to the whole heap).
Then I take my turn the same way. The rules of each game say whether taking the last
object wins (normal play) or loses (misère play). After each move I show the heaps.
Reply with the heap number and how many objects to take, inside move tags.
For example, to take 2 objects from heap 3: <move>3 2</move>"""


# ------------------------------------------------------------------- the rules


def nim_sum(heaps: list[int]) -> int:
    return reduce(xor, heaps, 0)


def is_winning(heaps: list[int], misere: bool) -> bool:
    """True when the player to move can force a win."""
    if not any(heaps):
        # Nobody can move: the previous player took the last object.
        return misere
    if misere and all(h <= 1 for h in heaps):
        return sum(heaps) % 2 == 0
    return nim_sum(heaps) != 0


def winning_move(heaps: list[int], misere: bool) -> tuple[int, int] | None:
    """A move (heap index, count) that leaves the opponent a losing position, if any."""
    big = [i for i, h in enumerate(heaps) if h > 1]
    if misere and len(big) <= 1:
        ones = sum(1 for h in heaps if h == 1)
        if not big:  # only single objects: leave an odd number of them
            return (heaps.index(1), 1) if ones % 2 == 0 else None
        i = big[0]  # shrink the one big heap to 0 or 1 so the singles left are odd
        return (i, heaps[i] - 1) if ones % 2 == 0 else (i, heaps[i])
    total = nim_sum(heaps)
    if total == 0:
        return None
    for i, h in enumerate(heaps):
        if h ^ total < h:
            return i, h - (h ^ total)
    return None  # unreachable: some heap always has the top bit of a non-zero nim-sum


def opponent_move(heaps: list[int], kind: str, misere: bool, seed: int) -> tuple[int, int]:
    """The built-in opponent's move; a pure function of the heaps, its kind and its seed."""
    rng = random.Random(f"{seed}:{heaps}")
    if kind == "optimal":
        move = winning_move(heaps, misere)
        if move is not None:
            return move
        largest = max(range(len(heaps)), key=lambda i: (heaps[i], -i))
        return largest, 1
    i = rng.choice([i for i, h in enumerate(heaps) if h > 0])
    return i, rng.randint(1, heaps[i])


def render_heaps(heaps: list[int]) -> str:
    return "\n".join(f"heap {i}: {' '.join('o' * h)} ({h})" for i, h in enumerate(heaps, 1))


def read_heaps(messages: Messages) -> tuple[list[int], bool]:
    """The latest heaps shown and whether the game is misère, from the conversation alone."""
    texts = [m.get("content") or "" for m in messages if m.get("role") == "user"]
    for text in reversed(texts):
        found = _HEAP.findall(text)
        if found:
            misere = any(_RULES[True] in t for t in texts)
            return [int(count) for _, count in found], misere
    raise ValueError("no Nim heaps found in the conversation")


# ------------------------------------------------------------------- the game


class NimEnv(TextGame):
    """Nim against a built-in opponent; the player moves first."""

    game_name = "nim"

    def new_game(self, info: dict[str, Any]) -> dict[str, Any]:
        return {
            "heaps": list(info["heaps"]),
            "misere": info["misere"],
            "opponent": info["opponent"],
            "opponent_seed": info["opponent_seed"],
            "moves": 0,
            "chances": 0,  # moves made from a winning position
            "kept": 0,  # of those, moves that kept the win
            "result": None,
        }

    def apply_move(self, game: dict[str, Any], move: str) -> str:
        heaps, misere = game["heaps"], game["misere"]
        if _NEGATIVE.search(move):
            # Read without its sign, "1 -2" would take 2: refuse it rather than guess.
            raise InvalidMove(
                f"{move[:40]!r} holds a negative number; heap numbers and counts are whole "
                "numbers from 1, like <move>1 2</move> (take 2 objects from heap 1)."
            )
        match = _MOVE.match(move)
        if not match:
            raise InvalidMove(
                f"{move[:40]!r} is not a move; give a heap number and a count, "
                "like <move>1 2</move>."
            )
        heap, count = move_number(match.group(1)), move_number(match.group(2))
        if _COUNT_FROM_HEAP.match(move):
            heap, count = count, heap
        if not 1 <= heap <= len(heaps):
            raise InvalidMove(f"there is no heap {heap}; heaps are numbered 1 to {len(heaps)}.")
        if heaps[heap - 1] == 0:
            raise InvalidMove(f"heap {heap} is empty; take from a heap that has objects.")
        size = heaps[heap - 1]
        if not 1 <= count <= size:
            allowed = "take 1" if size == 1 else f"take between 1 and {size}"
            raise InvalidMove(f"heap {heap} has {counted(size, 'object', 'objects')}: {allowed}.")
        was_winning = is_winning(heaps, misere)
        heaps[heap - 1] -= count
        game["moves"] += 1
        if was_winning:
            game["chances"] += 1
            game["kept"] += int(not is_winning(heaps, misere))
        lines = [f"You took {count} from heap {heap}."]
        if not any(heaps):
            game["result"] = "loss" if misere else "win"
            lines.append("You took the last object: " + ("you lose." if misere else "you win!"))
            return " ".join(lines)
        i, taken = opponent_move(heaps, game["opponent"], misere, game["opponent_seed"])
        heaps[i] -= taken
        lines.append(f"I took {taken} from heap {i + 1}.")
        if not any(heaps):
            game["result"] = "win" if misere else "loss"
            lines.append("I took the last object: " + ("you win!" if misere else "you lose."))
            return " ".join(lines)
        return f"{' '.join(lines)}\n\n{render_heaps(heaps)}\n\nYour move."

    def is_over(self, game: dict[str, Any]) -> bool:
        return game["result"] is not None

    def score(self, game: dict[str, Any]) -> float:
        return 1.0 if game["result"] == "win" else 0.0

    def efficiency(self, game: dict[str, Any], state: dict[str, Any]) -> float:
        """The share of the player's moves from a winning position that kept the win."""
        return game["kept"] / game["chances"] if game["chances"] else 1.0

    def render(self, game: dict[str, Any]) -> str:
        status = {"win": "player won", "loss": "player lost"}.get(game["result"], "player to move")
        rules = "misère" if game["misere"] else "normal play"
        return f"{render_heaps(game['heaps'])}\n({rules}; {status})"

    def reference_policy(self, messages: Messages) -> ChatMessage:
        heaps, misere = read_heaps(messages)
        move = winning_move(heaps, misere)
        if move is None:  # a losing position: take one object and hope for a mistake
            largest = max(range(len(heaps)), key=lambda i: (heaps[i], -i))
            move = (largest, 1)
        return move_message(f"{move[0] + 1} {move[1]}")

    def random_move(self, messages: Messages, rng: random.Random) -> str:
        try:
            heaps, _ = read_heaps(messages)
        except ValueError:
            return f"{rng.randint(1, 3)} 1"
        i = rng.choice([i for i, h in enumerate(heaps) if h > 0])
        return f"{i + 1} {rng.randint(1, heaps[i])}"


# ------------------------------------------------------------------- items


def generate_item(
    rng: random.Random, heaps: int, max_heap: int, opponent: str, misere: bool, start: str
) -> tuple[str, dict[str, Any], str]:
    """A position: resampled until the player can force a win when `start` is "winning"."""
    while True:
        sizes = [rng.randint(1, max_heap) for _ in range(heaps)]
        winning = is_winning(sizes, misere)
        if winning or start == "random":
            break
    question = (
        f"New game of Nim with {counted(heaps, 'heap', 'heaps')}. {_RULES[misere]} "
        "You move first.\n\n"
        f"{render_heaps(sizes)}\n\nYour move."
    )
    info = {
        "heaps": sizes,
        "misere": misere,
        "opponent": opponent,
        "opponent_seed": rng.getrandbits(32),
        "winning": winning,
    }
    return question, info, ""


def load_environment(
    num_examples: int = 100,
    seed: int = 0,
    difficulty: str = "medium",
    heaps: int | None = None,
    max_heap: int | None = None,
    opponent: str | None = None,
    misere: bool = False,
    start: str = "winning",
    max_turns: int | None = None,
    max_invalid_moves: int = 3,
) -> NimEnv:
    """Build the environment; `heaps`, `max_heap` and `opponent` override the difficulty."""
    check_choice("difficulty", difficulty, DIFFICULTIES)
    preset_heaps, preset_max, preset_opponent = DIFFICULTIES[difficulty]
    heaps = preset_heaps if heaps is None else heaps
    max_heap = preset_max if max_heap is None else max_heap
    opponent = preset_opponent if opponent is None else opponent
    check_whole("heaps", heaps, example=preset_heaps)
    check_whole("max_heap", max_heap, example=preset_max)
    check_flag("misere", misere)
    check_whole("max_invalid_moves", max_invalid_moves, example=3)
    if not 1 <= heaps <= 9:
        raise ValueError(f"heaps must be between 1 and 9, not {heaps}")
    if not 1 <= max_heap <= 30:
        raise ValueError(f"max_heap must be between 1 and 30, not {max_heap}")
    check_choice("opponent", opponent, OPPONENTS)
    check_choice("start", start, STARTS)
    if start == "winning" and max_heap == 1 and not is_winning([1] * heaps, misere):
        raise ValueError(
            f"{heaps} heaps of one object are always lost by the first player; "
            "allow max_heap of 2 or more, or use start='random'"
        )
    # Each round removes at least two objects, so the player moves at most this often.
    turns = max_turns if max_turns is not None else (heaps * max_heap + 1) // 2 + max_invalid_moves
    if turns < 1:
        raise ValueError(f"max_turns must be at least 1, not {turns}")
    make = lambda rng, i: generate_item(rng, heaps, max_heap, opponent, misere, start)  # noqa: E731
    return NimEnv(
        dataset=game_rows("nim", make, num_examples, seed),
        eval_dataset=game_rows("nim", make, num_examples, seed, offset=EVAL_OFFSET),
        system_prompt=SYSTEM_PROMPT,
        max_turns=turns,
        max_invalid_moves=max_invalid_moves,
    )
