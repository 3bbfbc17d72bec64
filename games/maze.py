"""Maze: walk from your square to the exit of a generated perfect maze.

The maze is a grid of squares, `#` wall and `.` floor; `P` is you and `E` the
exit. Each move is one or more steps, `N`/`E`/`S`/`W` (or `U`/`R`/`D`/`L`),
for example `<move>NNEES</move>`; a step into a wall makes the whole move
invalid (nothing moves), it is not a silent bump.

Knobs: `width`/`height` (in maze cells; the grid is 2n+1 squares across;
`difficulty` presets "easy" 4x4, "medium" 7x7, "hard" 10x10), `view` ("full":
the whole maze is shown after every move; "partial": only the squares within
`radius` steps, counted as a square window around you), `max_turns` (default:
enough to explore the whole maze one new square per turn), `max_invalid_moves`.
Winnable by deduction: breadth-first search on the full view, frontier
exploration on the partial view. Efficiency is the shortest path length over the
steps taken.
"""

from __future__ import annotations

import random
import re
from collections import deque
from typing import Any

from vfgym.games._base import (
    EVAL_OFFSET,
    TextGame,
    check_choice,
    check_whole,
    game_rows,
    move_message,
)

from vfgym.errors import InvalidMove
from vfgym.types import ChatMessage, Messages

GYM_ID = "vfgym/Maze-v0"
KIND = "game"
NEEDS_SANDBOX = False

SIZES = {"easy": (4, 4), "medium": (7, 7), "hard": (10, 10)}
VIEWS = ("full", "partial")
MAX_CELLS = 40
MAX_STEPS_PER_MOVE = 2000

WALL, FLOOR, PLAYER, EXIT = "#", ".", "P", "E"
STEPS = {"N": (-1, 0), "E": (0, 1), "S": (1, 0), "W": (0, -1)}
_ALIASES = {"U": "N", "R": "E", "D": "S", "L": "W"}
_WORDS = re.compile(r"\b(north|east|south|west|up|down|left|right)\b", re.IGNORECASE)
_AT = re.compile(r"You are at row (\d+), column (\d+)")
_VIEW = re.compile(r"View of rows (\d+)-(\d+), columns (\d+)-(\d+):\n")

SYSTEM_PROMPT = """You are in a maze drawn as a grid of squares: # is a wall, . is floor,
P is you and E is the exit. Rows count from 0 at the top, columns from 0 at the left.
Each turn, move one or more steps: N (up), S (down), E (right), W (left), in order,
for example <move>NNEES</move>. A step into a wall makes the whole move invalid and you
stay where you were. Reach the exit to win.
Reply with your steps inside move tags, for example: <move>SSE</move>"""


def carve_maze(rng: random.Random, width: int, height: int) -> list[list[str]]:
    """A perfect maze (one path between any two squares) by randomized depth-first search."""
    grid = [[WALL] * (2 * width + 1) for _ in range(2 * height + 1)]
    start = (rng.randrange(height), rng.randrange(width))
    seen = {start}
    stack = [start]
    grid[2 * start[0] + 1][2 * start[1] + 1] = FLOOR
    while stack:
        r, c = stack[-1]
        options = [
            (r + dr, c + dc)
            for dr, dc in STEPS.values()
            if 0 <= r + dr < height and 0 <= c + dc < width and (r + dr, c + dc) not in seen
        ]
        if not options:
            stack.pop()
            continue
        nr, nc = rng.choice(options)
        grid[r + nr + 1][c + nc + 1] = FLOOR  # the wall square between the two cells
        grid[2 * nr + 1][2 * nc + 1] = FLOOR
        seen.add((nr, nc))
        stack.append((nr, nc))
    return grid


def shortest_path(
    passable: Any, start: tuple[int, int], goal_test: Any
) -> tuple[tuple[int, int], str] | None:
    """Breadth-first search: the nearest square passing `goal_test` and the steps to it."""
    previous: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
    queue = deque([start])
    while queue:
        square = queue.popleft()
        if goal_test(square):
            steps = []
            at = square
            while previous[at] is not None:
                at, step = previous[at]  # type: ignore[misc]
                steps.append(step)
            return square, "".join(reversed(steps))
        for step, (dr, dc) in STEPS.items():
            nxt = (square[0] + dr, square[1] + dc)
            if nxt not in previous and passable(nxt):
                previous[nxt] = (square, step)
                queue.append(nxt)
    return None


def parse_steps(move: str) -> str:
    """The steps of a move as a string of N/E/S/W; InvalidMove if anything else is there.

    A full stop after the steps ends a sentence, as in every game of the catalogue.
    """
    text = _WORDS.sub(
        lambda m: m.group(1)[0].upper().translate(str.maketrans("UDLR", "NSWE")),
        move.rstrip().removesuffix("."),
    )
    steps = []
    for char in re.sub(r"[\s,;\-]+", "", text).upper():
        char = _ALIASES.get(char, char)
        if char not in STEPS:
            raise InvalidMove(
                f"{char!r} is not a step; use N, E, S and W (or U, R, D, L), like <move>NNE</move>."
            )
        steps.append(char)
    if not steps:
        raise InvalidMove("the move holds no steps; write them like <move>NNE</move>.")
    if len(steps) > MAX_STEPS_PER_MOVE:
        raise InvalidMove(f"at most {MAX_STEPS_PER_MOVE} steps fit in one move.")
    return "".join(steps)


class MazeEnv(TextGame):
    """Walk a generated perfect maze to its exit, seeing all of it or only nearby squares."""

    game_name = "maze"

    def __init__(self, *, view: str = "full", radius: int = 2, **kwargs: Any):
        self.view = view
        self.radius = radius
        super().__init__(**kwargs)

    def new_game(self, info: dict[str, Any]) -> dict[str, Any]:
        return {
            "grid": [list(row) for row in info["grid"]],
            "player": list(info["start"]),
            "exit": list(info["exit"]),
            "shortest": info["shortest"],
            "steps": 0,
            "won": False,
        }

    def apply_move(self, game: dict[str, Any], move: str) -> str:
        steps = parse_steps(move)
        grid = game["grid"]
        r, c = game["player"]
        taken = 0
        for k, step in enumerate(steps, 1):
            dr, dc = STEPS[step]
            if grid[r + dr][c + dc] == WALL:
                raise InvalidMove(
                    f"step {k} ({step}) from row {r}, column {c} runs into a wall; "
                    "nothing moved. Check the map and try again."
                )
            r, c = r + dr, c + dc
            taken += 1
            if [r, c] == game["exit"]:
                break
        game["player"] = [r, c]
        game["steps"] += taken
        game["won"] = game["player"] == game["exit"]
        if game["won"]:
            return f"You reached the exit in {game['steps']} steps. You win!"
        return f"You moved {steps[:taken]}.\n{self.view_text(game)}"

    def is_over(self, game: dict[str, Any]) -> bool:
        return game["won"]

    def score(self, game: dict[str, Any]) -> float:
        return 1.0 if game["won"] else 0.0

    def efficiency(self, game: dict[str, Any], state: dict[str, Any]) -> float:
        return min(1.0, game["shortest"] / max(1, game["steps"]))

    # ------------------------------------------------------------ rendering

    def render(self, game: dict[str, Any]) -> str:
        """The whole maze with you and the exit (what a human watching sees)."""
        return "\n".join("".join(row) for row in marked_grid(game))

    def view_text(self, game: dict[str, Any]) -> str:
        """What the player sees after a move."""
        return view_text(game, self.view, self.radius)

    # -------------------------------------------------------------- policies

    @staticmethod
    def read_map(
        messages: Messages, latest_only: bool = False
    ) -> tuple[dict[tuple[int, int], str], tuple[int, int]]:
        """The squares seen in the conversation, and where the player is now.

        The partial view forgets what it showed before, so the policy remembers it
        by merging every view; `latest_only` reads just the last one.
        """
        known: dict[tuple[int, int], str] = {}
        player = None
        if latest_only:
            views = [
                m
                for m in messages
                if m.get("role") == "user" and _VIEW.search(m.get("content") or "")
            ]
            messages = views[-1:]
        for message in messages:
            if message.get("role") != "user":
                continue
            text = message.get("content") or ""
            at = _AT.search(text)
            view = _VIEW.search(text)
            if not at or not view:
                continue
            player = (int(at.group(1)), int(at.group(2)))
            r0, r1, c0, _ = map(int, view.groups())
            lines = text[view.end() :].split("\n")[: r1 - r0 + 1]
            for dr, line in enumerate(lines):
                for dc, char in enumerate(line.strip()):
                    known[(r0 + dr, c0 + dc)] = FLOOR if char == PLAYER else char
        if player is None:
            raise ValueError("no maze view found in the conversation")
        return known, player

    def reference_policy(self, messages: Messages) -> ChatMessage:
        known, player = self.read_map(messages)

        def passable(square: tuple[int, int]) -> bool:
            return known.get(square, WALL) != WALL

        found = shortest_path(passable, player, lambda sq: known.get(sq) == EXIT)
        if found is None:  # explore: walk to the nearest seen floor next to an unseen square
            found = shortest_path(
                passable,
                player,
                lambda sq: any((sq[0] + dr, sq[1] + dc) not in known for dr, dc in STEPS.values()),
            )
        if found is None or not found[1]:
            raise ValueError("the maze as seen has no way on; the conversation is inconsistent")
        return move_message(found[1])

    def random_move(self, messages: Messages, rng: random.Random) -> str:
        known, (r, c) = self.read_map(messages, latest_only=True)
        open_steps = [s for s, (dr, dc) in STEPS.items() if known.get((r + dr, c + dc)) != WALL]
        return rng.choice(open_steps or list(STEPS))


def marked_grid(game: dict[str, Any]) -> list[list[str]]:
    """The maze's squares with the player and the exit drawn in."""
    rows = [list(row) for row in game["grid"]]
    rows[game["exit"][0]][game["exit"][1]] = EXIT
    rows[game["player"][0]][game["player"][1]] = PLAYER
    return rows


def view_text(game: dict[str, Any], view: str, radius: int) -> str:
    """The whole maze, or the square window within `radius` of the player, with coordinates."""
    rows = marked_grid(game)
    r, c = game["player"]
    if view == "full":
        r0, r1, c0, c1 = 0, len(rows) - 1, 0, len(rows[0]) - 1
    else:
        r0, r1 = max(0, r - radius), min(len(rows) - 1, r + radius)
        c0, c1 = max(0, c - radius), min(len(rows[0]) - 1, c + radius)
    window = "\n".join("".join(row[c0 : c1 + 1]) for row in rows[r0 : r1 + 1])
    return f"You are at row {r}, column {c}.\nView of rows {r0}-{r1}, columns {c0}-{c1}:\n{window}"


def generate_item(rng: random.Random, width: int, height: int) -> tuple[dict[str, Any], str]:
    """A maze, a random start cell and the exit at the cell farthest from it."""
    grid = carve_maze(rng, width, height)
    start = (2 * rng.randrange(height) + 1, 2 * rng.randrange(width) + 1)
    distance: dict[tuple[int, int], int] = {start: 0}
    queue = deque([start])
    while queue:
        r, c = queue.popleft()
        for dr, dc in STEPS.values():
            nxt = (r + dr, c + dc)
            if grid[nxt[0]][nxt[1]] == FLOOR and nxt not in distance:
                distance[nxt] = distance[(r, c)] + 1
                queue.append(nxt)
    far = max(distance.values())
    exit_ = min(sq for sq, d in distance.items() if d == far and sq[0] % 2 and sq[1] % 2)
    info = {
        "grid": ["".join(row) for row in grid],
        "start": list(start),
        "exit": list(exit_),
        "shortest": distance[exit_],
    }
    return info, str(distance[exit_])


def load_environment(
    num_examples: int = 100,
    seed: int = 0,
    difficulty: str = "medium",
    width: int | None = None,
    height: int | None = None,
    view: str = "full",
    radius: int = 2,
    max_turns: int | None = None,
    max_invalid_moves: int = 3,
) -> MazeEnv:
    """Build the environment; `width`/`height` (in cells) override the difficulty's size."""
    check_choice("difficulty", difficulty, SIZES)
    w, h = SIZES[difficulty]
    w, h = (w if width is None else width), (h if height is None else height)
    for name, value in (("width", w), ("height", h)):
        if not isinstance(value, int) or not 2 <= value <= MAX_CELLS:
            raise ValueError(f"{name} must be a whole number of cells from 2 to {MAX_CELLS}")
    check_choice("view", view, VIEWS)
    check_whole("radius", radius, example=2)
    check_whole("max_invalid_moves", max_invalid_moves, example=3)
    if radius < 1:
        raise ValueError(f"radius must be a whole number of squares, at least 1, not {radius!r}")
    if max_turns is not None and max_turns < 1:
        raise ValueError("max_turns must be at least 1 (or None for the default)")
    # Exploring reveals at least one new floor square per turn, and there are 2wh - 1;
    # beside them, every invalid move short of the last one allowed.
    turns = max_turns or max(2 * w * h + 2, 2 * w * h - 1 + max_invalid_moves - 1)

    def make(rng: random.Random, index: int) -> tuple[str, dict[str, Any], str]:
        info, answer = generate_item(rng, w, h)
        start = {**info, "player": info["start"]}
        shown = view_text(start, view, radius)
        rows, cols = 2 * h + 1, 2 * w + 1
        question = f"The maze is {rows} rows by {cols} columns. Find the exit E.\n{shown}"
        return question, info, answer

    return MazeEnv(
        view=view,
        radius=radius,
        dataset=game_rows("maze", make, num_examples, seed),
        eval_dataset=game_rows("maze", make, num_examples, seed, offset=EVAL_OFFSET),
        system_prompt=SYSTEM_PROMPT,
        max_turns=turns,
        max_invalid_moves=max_invalid_moves,
    )
