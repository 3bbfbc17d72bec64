"""Hangman: reveal a hidden English word one letter at a time before the misses run out.

Each move is one letter (every copy of it in the word is revealed) or a guess of the
whole word. A letter not in the word, or a wrong whole word, is a miss.

Knobs: `difficulty` picks the word lengths — "easy" 8-12 letters, "medium" 6-8, "hard" 4-5
(short words give fewer clues) — `min_length`/`max_length` override it; `max_misses`
(default 6), `max_invalid_moves`. Per-step reward (Gym adapter): the share of the word's
letters the move revealed.

The words (`data/hangman_words.txt`, 17,852 of them) are derived from SCOWL as shipped in
Debian's `wamerican-small` (Kevin Atkinson's Spell Checker Oriented Word Lists; the notice
is in the data file). The reference policy keeps the words of the list that fit the board
and guesses the letter found in most of them, or the word once a single one is left.
"""

from __future__ import annotations

import random
import re
import string
from functools import cache
from importlib import resources
from typing import Any

from vfgym.games._base import (
    EVAL_OFFSET,
    TextGame,
    check_choice,
    check_whole,
    counted,
    game_rows,
    move_message,
)
from vfgym.games._boards import latest_shown

from vfgym.errors import InvalidMove
from vfgym.types import ChatMessage, Messages, State

GYM_ID = "vfgym/Hangman-v0"
KIND = "game"
NEEDS_SANDBOX = False

DIFFICULTIES = {"easy": (8, 12), "medium": (6, 8), "hard": (4, 5)}
MIN_LENGTH, MAX_LENGTH = 4, 12
HIDDEN = "_"

_WORD = re.compile(r"^Word: ([A-Z_ ]+?) +\((\d+) letters\)$", re.MULTILINE)
_GUESSED = re.compile(r"^Guessed letters: ([A-Z ]*|none)$", re.MULTILINE)
_WRONG = re.compile(r"^Wrong words: ([A-Z ]+)$", re.MULTILINE)

SYSTEM_PROMPT = """You are playing Hangman. Find the hidden English word.
Each turn, guess one letter: every place where it occurs in the word is revealed. If the
letter is not in the word, that is a miss. You may also guess the whole word at once; a wrong
word is a miss too. The game is lost when the misses run out, won when the word is found.
After each guess I show the word with hidden letters as _, your misses and the letters
guessed so far.
Reply with one letter or the whole word inside move tags, for example: <move>e</move>"""


@cache
def words_by_length() -> dict[int, tuple[str, ...]]:
    """The shipped word list, grouped by length, read once."""
    text = resources.files("vfgym.games").joinpath("data/hangman_words.txt").read_text("ascii")
    groups: dict[int, list[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            groups.setdefault(len(line), []).append(line)
    return {n: tuple(ws) for n, ws in groups.items()}


def start_game(word: str, max_misses: int) -> dict[str, Any]:
    """A fresh game state for `word`."""
    return {
        "word": word,
        "max_misses": max_misses,
        "guessed": [],
        "wrong_words": [],
        "misses": 0,
        "moves": 0,
        "won": False,
        "step_revealed": 0,
    }


def pattern(word: str, guessed: list[str]) -> str:
    return "".join(c if c in guessed else HIDDEN for c in word)


def render_board(game: dict[str, Any]) -> str:
    shown = " ".join(pattern(game["word"], game["guessed"]).upper())
    misses = [c.upper() for c in game["guessed"] if c not in game["word"]]
    lines = [
        f"Word: {shown}  ({len(game['word'])} letters)",
        f"Misses: {game['misses']} of {game['max_misses']}"
        + (f" ({' '.join(misses)})" if misses else ""),
        "Guessed letters: " + (" ".join(c.upper() for c in game["guessed"]) or "none"),
    ]
    if game["wrong_words"]:
        lines.append("Wrong words: " + " ".join(w.upper() for w in game["wrong_words"]))
    return "\n".join(lines)


def _read_text(text: str) -> tuple[str, set[str], set[str]] | None:
    shown = _WORD.search(text)
    if not shown:
        return None
    guessed = _GUESSED.search(text)
    wrong = _WRONG.search(text)
    letters = set() if not guessed or guessed.group(1) == "none" else guessed.group(1)
    return (
        shown.group(1).replace(" ", "").lower(),
        {c.lower() for c in letters if c.isalpha()},
        set(wrong.group(1).lower().split()) if wrong else set(),
    )


def read_board(messages: Messages) -> tuple[str, set[str], set[str]]:
    """The shown pattern (lowercase, _ hidden), guessed letters and wrong words, from the
    latest board in the conversation."""
    found = latest_shown(messages, _read_text)
    if found is None:
        raise ValueError("no Hangman board found in the conversation")
    return found


def candidates(shown: str, guessed: set[str], wrong: set[str]) -> list[str]:
    """The words of the list that fit the board: revealed letters in place, and no guessed
    letter hiding behind a _ (it would have been revealed)."""
    hidden = f"[^{''.join(sorted(guessed))}]" if guessed else "."
    regex = re.compile("".join(hidden if c == HIDDEN else c for c in shown))
    pool = words_by_length().get(len(shown), ())
    return [w for w in pool if regex.fullmatch(w) and w not in wrong]


# ------------------------------------------------------------------- the game


class HangmanEnv(TextGame):
    """Hangman; the hidden word is in the dataset row's info."""

    game_name = "hangman"

    def new_game(self, info: dict[str, Any]) -> dict[str, Any]:
        return start_game(info["word"], info["max_misses"])

    def apply_move(self, game: dict[str, Any], move: str) -> str:
        guess = move.strip().strip(".!\"'").lower()
        word = game["word"]
        if not guess.isascii() or not guess.isalpha() or len(guess) not in (1, len(word)):
            raise InvalidMove(
                f"{move[:40]!r} is neither one letter nor a {len(word)}-letter word; "
                "guess like <move>e</move>."
            )
        hidden_before = pattern(word, game["guessed"]).count(HIDDEN)
        if len(guess) == 1:
            if guess in game["guessed"]:
                raise InvalidMove(f"{guess.upper()} was already guessed; pick another letter.")
            game["guessed"].append(guess)
            count = word.count(guess)
            if count:
                head = f"{guess.upper()} is in the word ({count} time{'s' if count > 1 else ''})."
            else:
                game["misses"] += 1
                head = f"No {guess.upper()} in the word."
        else:
            if guess in game["wrong_words"]:
                raise InvalidMove(f"{guess.upper()} was already guessed; it is not the word.")
            if guess == word:
                game["guessed"].extend(c for c in dict.fromkeys(word) if c not in game["guessed"])
                head = f"{guess.upper()} is the word!"
            else:
                game["wrong_words"].append(guess)
                game["misses"] += 1
                head = f"{guess.upper()} is not the word."
        game["moves"] += 1
        hidden_after = pattern(word, game["guessed"]).count(HIDDEN)
        game["step_revealed"] = hidden_before - hidden_after
        if hidden_after == 0:
            game["won"] = True
            head += f" You found {word.upper()} with {counted(game['misses'], 'miss', 'misses')}."
        elif game["misses"] >= game["max_misses"]:
            head += f" Out of misses: the word was {word.upper()}."
        return f"{head}\n\n{render_board(game)}"

    def start_turn(self, game: dict[str, Any]) -> None:
        """An invalid move reveals nothing: a valid one sets the count (apply_move)."""
        game["step_revealed"] = 0

    def step_reward(self, state: State) -> float:
        """The share of the word's letters that the last move revealed."""
        game = state["game_state"]
        return game["step_revealed"] / len(game["word"])

    def is_over(self, game: dict[str, Any]) -> bool:
        return game["won"] or game["misses"] >= game["max_misses"]

    def score(self, game: dict[str, Any]) -> float:
        return 1.0 if game["won"] else 0.0

    def efficiency(self, game: dict[str, Any], state: State) -> float:
        """1 for a game without a miss, less for each miss spent."""
        return 1.0 - game["misses"] / (game["max_misses"] + 1)

    def render(self, game: dict[str, Any]) -> str:
        status = "found" if game["won"] else ("lost" if self.is_over(game) else "playing")
        return f"{render_board(game)}\n({status})"

    def reference_policy(self, messages: Messages) -> ChatMessage:
        shown, guessed, wrong = read_board(messages)
        words = candidates(shown, guessed, wrong)
        if len(words) == 1:
            return move_message(words[0])
        counts = dict.fromkeys(string.ascii_lowercase, 0)
        for word in words:
            for c in set(word):
                counts[c] += 1
        fresh = [c for c in string.ascii_lowercase if c not in guessed]
        return move_message(max(fresh, key=lambda c: (counts[c], -ord(c))))

    def random_move(self, messages: Messages, rng: random.Random) -> str:
        """A random letter not guessed yet."""
        try:
            _, guessed, _ = read_board(messages)
        except ValueError:
            guessed = set()
        fresh = [c for c in string.ascii_lowercase if c not in guessed]
        return rng.choice(fresh or list(string.ascii_lowercase))


# ------------------------------------------------------------------- items


def generate_item(
    rng: random.Random, min_length: int, max_length: int, max_misses: int
) -> tuple[str, dict[str, Any], str]:
    groups = words_by_length()
    pool = [w for n in range(min_length, max_length + 1) for w in groups.get(n, ())]
    word = rng.choice(pool)
    allowed = counted(max_misses, "time", "times")
    question = (
        f"I picked a hidden English word of {len(word)} letters. "
        f"You may miss {allowed}.\n\n{render_board(start_game(word, max_misses))}"
    )
    return question, {"word": word, "max_misses": max_misses}, word


def load_environment(
    num_examples: int = 100,
    seed: int = 0,
    difficulty: str = "medium",
    min_length: int | None = None,
    max_length: int | None = None,
    max_misses: int = 6,
    max_turns: int | None = None,
    max_invalid_moves: int = 3,
) -> HangmanEnv:
    """Build the environment; `min_length`/`max_length` override the difficulty's lengths."""
    check_choice("difficulty", difficulty, DIFFICULTIES)
    low, high = DIFFICULTIES[difficulty]
    low = low if min_length is None else min_length
    high = high if max_length is None else max_length
    check_whole("min_length", low, example=MIN_LENGTH)
    check_whole("max_length", high, example=MAX_LENGTH)
    check_whole("max_misses", max_misses, example=6)
    check_whole("max_invalid_moves", max_invalid_moves, example=3)
    if not MIN_LENGTH <= low <= high <= MAX_LENGTH:
        raise ValueError(
            f"word lengths must satisfy {MIN_LENGTH} <= min_length <= max_length <= "
            f"{MAX_LENGTH}, got {low} and {high}"
        )
    if not 1 <= max_misses <= 25:
        raise ValueError(f"max_misses must be between 1 and 25, not {max_misses}")
    # A game ends by its misses, never by the turn limit: it holds at most one hit per
    # letter of the word and `max_misses` misses (wrong whole words among them), and never
    # more than 26 letter guesses; plus the invalid moves allowed.
    longest = max(26, high + max_misses)
    turns = max_turns if max_turns is not None else longest + max_invalid_moves
    if turns < 1:
        raise ValueError(f"max_turns must be at least 1, not {turns}")
    make = lambda rng, i: generate_item(rng, low, high, max_misses)  # noqa: E731
    return HangmanEnv(
        dataset=game_rows("hangman", make, num_examples, seed),
        eval_dataset=game_rows("hangman", make, num_examples, seed, offset=EVAL_OFFSET),
        system_prompt=SYSTEM_PROMPT,
        max_turns=turns,
        max_invalid_moves=max_invalid_moves,
    )
