"""Guess the number: find a hidden integer from higher/lower hints.

Knobs: `low`/`high` (the range; `difficulty` presets "easy" 1-20, "medium" 1-100,
"hard" 1-1000), `max_turns` (default: enough for binary search, plus slack),
`max_invalid_moves`. Winnable by deduction: binary search always wins.
"""

from __future__ import annotations

import math
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
    last_user_text,
    move_message,
    shown_number,
)

from vfgym.errors import InvalidMove
from vfgym.types import ChatMessage, Messages

GYM_ID = "vfgym/GuessTheNumber-v0"
KIND = "game"
NEEDS_SANDBOX = False

RANGES = {"easy": (1, 20), "medium": (1, 100), "hard": (1, 1000)}
_RANGE = re.compile(r"between (-?\d+) and (-?\d+)")
#: A hint opens its reply: an invalid move's reply quotes the move mid-line, and a move
#: worded like a hint must not be read as one.
_HINT = re.compile(r"^(-?\d+) is too (low|high)\. Guess again\.", re.MULTILINE)

SYSTEM_PROMPT = """You are playing Guess the Number.
I am thinking of a whole number in a range I will tell you. Each turn, guess one number.
I answer whether your guess is too low or too high, until you find it.
Reply with your guess inside move tags, for example: <move>42</move>"""


class GuessTheNumberEnv(TextGame):
    """Higher/lower search for a hidden number."""

    game_name = "guess-the-number"

    def new_game(self, info: dict[str, Any]) -> dict[str, Any]:
        return {
            "low": info["low"],
            "high": info["high"],
            "target": info["target"],
            "guesses": [],
            "won": False,
        }

    def apply_move(self, game: dict[str, Any], move: str) -> str:
        try:
            guess = int(move)  # (a move comes stripped)
        except ValueError:
            guess = self._whole_number(game, move)
        if not game["low"] <= guess <= game["high"]:
            raise InvalidMove(self._outside(game, str(guess)))
        game["guesses"].append(guess)
        target = game["target"]
        if guess < target:
            return f"{guess} is too low. Guess again."
        if guess > target:
            return f"{guess} is too high. Guess again."
        game["won"] = True
        guesses = counted(len(game["guesses"]), "guess", "guesses")
        return f"{guess} is correct! You found the number in {guesses}."

    def _whole_number(self, game: dict[str, Any], move: str) -> int:
        """A move `int()` refused: a number with a full stop ("42."), or why it is none."""
        digits = move.rstrip(".")
        try:
            return int(digits)
        except ValueError:
            if digits.lstrip("+-").isdecimal():  # a whole number, too long for int()
                raise InvalidMove(self._outside(game, digits)) from None
            raise InvalidMove(
                f"{move[:40]!r} is not a whole number; guess like <move>42</move>."
            ) from None

    @staticmethod
    def _outside(game: dict[str, Any], digits: str) -> str:
        return f"{shown_number(digits)} is outside the range {game['low']} to {game['high']}."

    def is_over(self, game: dict[str, Any]) -> bool:
        return game["won"]

    def score(self, game: dict[str, Any]) -> float:
        return 1.0 if game["won"] else 0.0

    def efficiency(self, game: dict[str, Any], state: dict[str, Any]) -> float:
        # Binary search's most guesses, ceil(log2(size + 1)), in exact integer arithmetic.
        optimal = (game["high"] - game["low"] + 1).bit_length()
        return min(1.0, optimal / max(1, len(game["guesses"])))

    def render(self, game: dict[str, Any]) -> str:
        guesses = ", ".join(map(str, game["guesses"])) or "none yet"
        return f"Range {game['low']}-{game['high']}; guesses: {guesses}" + (
            " (found)" if game["won"] else ""
        )

    @staticmethod
    def _bounds(messages: Messages) -> tuple[int, int]:
        """The range still possible, read from the conversation alone."""
        text = "\n".join(m.get("content") or "" for m in messages if m.get("role") != "assistant")
        low, high = map(int, _RANGE.search(text).groups())
        for guess, direction in _HINT.findall(text):
            if direction == "low":
                low = max(low, int(guess) + 1)
            else:
                high = min(high, int(guess) - 1)
        return low, high

    def reference_policy(self, messages: Messages) -> ChatMessage:
        low, high = self._bounds(messages)
        return move_message(str((low + high) // 2))

    def random_move(self, messages: Messages, rng: random.Random) -> str:
        low, high = map(
            int, _RANGE.search(last_user_text(messages[:2]) or messages[-1]["content"]).groups()
        )
        return str(rng.randint(low, high))


def generate_item(rng: random.Random, low: int, high: int) -> tuple[str, dict[str, Any], str]:
    target = rng.randint(low, high)
    question = f"I am thinking of a number between {low} and {high}. What is it?"
    return question, {"low": low, "high": high, "target": target}, str(target)


def load_environment(
    num_examples: int = 100,
    seed: int = 0,
    difficulty: str = "medium",
    low: int | None = None,
    high: int | None = None,
    max_turns: int | None = None,
    max_invalid_moves: int = 3,
) -> GuessTheNumberEnv:
    """Build the environment; `low`/`high` override the difficulty's range."""
    check_choice("difficulty", difficulty, RANGES)
    lo, hi = RANGES[difficulty]
    lo, hi = (lo if low is None else low), (hi if high is None else high)
    check_whole("low", lo, example=1)
    check_whole("high", hi, example=100)
    check_whole("max_invalid_moves", max_invalid_moves, example=3)
    if lo >= hi:
        raise ValueError(f"low ({lo}) must be below high ({hi})")
    if max_turns is not None and max_turns < 1:
        raise ValueError("max_turns must be at least 1 (or None for the default)")
    # Binary search's guesses, plus room for every invalid move short of the last one
    # allowed (at least 4 turns of slack), so invalid moves end a game, not the turn limit.
    turns = max_turns or math.ceil(math.log2(hi - lo + 2)) + max(4, max_invalid_moves - 1)
    make = lambda rng, i: generate_item(rng, lo, hi)  # noqa: E731
    return GuessTheNumberEnv(
        dataset=game_rows("guess-the-number", make, num_examples, seed),
        eval_dataset=game_rows("guess-the-number", make, num_examples, seed, offset=EVAL_OFFSET),
        system_prompt=SYSTEM_PROMPT,
        max_turns=turns,
        max_invalid_moves=max_invalid_moves,
    )
