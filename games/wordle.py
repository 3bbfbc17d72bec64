"""Wordle: find a hidden five-letter English word in six guesses from coloured feedback.

Each guess must be a word of the list; every letter comes back green (right letter,
right place), yellow (in the word, elsewhere) or grey (not in the word, or no more
copies of it: a letter guessed twice is yellow or green at most as many times as the
word holds it, greens first, then yellows from left to right).

Knobs: `difficulty` picks the hidden words — "easy" common words (2,113), "medium"
adds rarer ones (2,851; neither ever a plural or a past tense), "hard" adds plurals and
past tenses (4,583) — `max_guesses` (6), `max_invalid_moves`. Any of the 4,653 words
is an allowed guess at every level. Per-step reward (Gym adapter): the share of the
word's letters newly placed green by the guess.

The words (`data/wordle_words.txt`) are derived from SCOWL as shipped in Debian's
`wamerican` and `wamerican-small` packages (Kevin Atkinson's Spell Checker Oriented Word
Lists; the notice is in the data file). The reference policy keeps the words consistent
with the feedback shown and picks the guess that splits them most finely (smallest
expected group, then smallest largest group), checking on small sets that the guess
leaves every outcome solvable in the guesses left; it solves every hidden word of every
level in at most six guesses.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from typing import Any

import numpy as np
from vfgym.games._base import (
    EVAL_OFFSET,
    TextGame,
    check_choice,
    check_whole,
    counted,
    game_rows,
    move_message,
)

from vfgym.errors import InvalidMove
from vfgym.types import ChatMessage, Messages, State

GYM_ID = "vfgym/Wordle-v0"
KIND = "game"
NEEDS_SANDBOX = False

WORD_LENGTH = 5
MAX_GUESSES = 6
DIFFICULTIES = {"easy": 1, "medium": 2, "hard": 3}
#: How the first message describes the hidden word at each level (the policy reads it).
DESCRIPTIONS = {
    1: "a common English word",
    2: "an English word that is not a plural or a past tense",
    3: "an English word (plurals and past tenses included)",
}
GREEN, YELLOW, GREY = "G", "Y", "-"
#: The best first guess of each level by the reference policy's own rule (smallest
#: expected group, over the allowed words); fixed here so the first move costs nothing.
OPENERS = {1: "raise", 2: "raise", 3: "tares"}
#: Sets this small are searched for a guess that provably finishes in the guesses left.
PLAN_LIMIT = 400
PLAN_WIDTH = 8

_WORD = re.compile(r"[a-z]{5}")
_ROW = re.compile(r"^\s*\d+\.\s+([A-Z]{5})\s+([GY-]{5})\s*$", re.MULTILINE)
#: "You have 6 guesses" (or "1 guess") in the first message.
_GUESSES = re.compile(r"You have (\d+) guess")

SYSTEM_PROMPT = f"""You are playing Wordle. Find the hidden five-letter English word.
Each turn, guess one five-letter word from the English dictionary. For each letter of your
guess I answer with one mark:
  {GREEN}  the letter is in the word, in this position (green)
  {YELLOW}  the letter is in the word, in another position (yellow)
  {GREY}  the letter is not in the word, or not that many times (grey)
A letter you guess twice is marked {GREEN} or {YELLOW} at most as many times as the word holds
it: exact positions ({GREEN}) count first, then {YELLOW} from left to right.
After each guess I show the board of all your guesses and their marks.
Reply with your guess inside move tags, for example: <move>crane</move>"""


# ------------------------------------------------------------------- the rules


@lru_cache(maxsize=1 << 16)
def feedback(guess: str, answer: str) -> str:
    """The marks of `guess` against `answer`, e.g. feedback("speed", "abide") == "--Y-Y".

    Memoised: a pure function of two words, and players (and openings) repeat guesses.
    """
    if guess == answer:
        return GREEN * len(guess)
    if len(set(guess)) == len(guess):
        # No repeated letter (most guesses): a letter not in place is yellow exactly when
        # the word holds it, as the general rule below gives; no counting needed.
        return "".join(
            [
                GREEN if g == a else YELLOW if g in answer else GREY
                for g, a in zip(guess, answer, strict=True)
            ]
        )
    marks: list[str | None] = []
    spare = []  # the answer's letters not matched in place: each can make one yellow
    for g, a in zip(guess, answer, strict=True):
        if g == a:
            marks.append(GREEN)
        else:
            marks.append(None)
            spare.append(a)
    for i, g in enumerate(guess):
        if marks[i] is None:
            if g in spare:
                marks[i] = YELLOW
                spare.remove(g)
            else:
                marks[i] = GREY
    return "".join(marks)  # type: ignore[arg-type]


def pattern_code(marks: str) -> int:
    """A mark string as a number 0-242 (grey 0, yellow 1, green 2 per position, base 3)."""
    return sum({GREY: 0, YELLOW: 1, GREEN: 2}[m] * 3**i for i, m in enumerate(marks))


SOLVED = pattern_code(GREEN * WORD_LENGTH)


@dataclass(frozen=True)
class WordBank:
    """The word list with the arrays the solver computes feedback on."""

    words: tuple[str, ...]
    tiers: np.ndarray
    letters: np.ndarray  # (n, 5) letter numbers 0-25
    masks: np.ndarray  # (n,) bit set of each word's letters
    plain: np.ndarray  # (n,) True where the word's five letters all differ
    distinct: np.ndarray  # indices of the plain words
    index: dict[str, int] = field(repr=False)

    def solutions(self, tier: int) -> np.ndarray:
        return np.nonzero(self.tiers <= tier)[0]


@cache
def word_bank() -> WordBank:
    """The shipped word list, read once."""
    text = resources.files("vfgym.games").joinpath("data/wordle_words.txt").read_text("ascii")
    pairs = [line.split() for line in text.splitlines() if line and not line.startswith("#")]
    words = tuple(word for word, _ in pairs)
    odd = [word for word in words if not _WORD.fullmatch(word)]
    if odd:  # apply_move takes a listed word as a valid five-letter guess
        raise ValueError(f"the Wordle list holds words that are not five letters a-z: {odd[:5]}")
    letters = np.array([[ord(c) - 97 for c in w] for w in words], dtype=np.uint8)
    masks = np.bitwise_or.reduce(np.left_shift(np.uint32(1), letters.astype(np.uint32)), axis=1)
    plain = np.array([len(set(w)) == WORD_LENGTH for w in words], dtype=bool)
    return WordBank(
        words=words,
        tiers=np.array([int(t) for _, t in pairs], dtype=np.uint8),
        letters=letters,
        masks=masks,
        plain=plain,
        distinct=np.nonzero(plain)[0],
        index={w: i for i, w in enumerate(words)},
    )


def pattern_codes(bank: WordBank, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Feedback codes of guesses `rows` against hidden words `cols`: (len(rows), len(cols)).

    A guess with five different letters needs no letter counting: each letter is
    green, else yellow exactly when the word holds it. Guesses with a repeated
    letter take the general rule.
    """
    guess, answer = bank.letters[rows], bank.letters[cols]
    codes = np.zeros((len(rows), len(cols)), dtype=np.uint8)
    plain = bank.plain[rows]
    if plain.any():
        g, masks = guess[plain], bank.masks[cols][None, :]
        out = np.zeros((len(g), len(cols)), dtype=np.uint8)
        for i in range(WORD_LENGTH):
            green = g[:, i, None] == answer[None, :, i]
            present = (masks >> g[:, i, None].astype(np.uint32)) & 1
            out += (green + present.astype(np.uint8)) * np.uint8(3**i)
        codes[plain] = out
    if not plain.all():
        g = guess[~plain]
        green = g[:, None, :] == answer[None, :, :]
        out = np.zeros((len(g), len(cols)), dtype=np.uint8)
        for i in range(WORD_LENGTH):
            spare = ((answer[None, :, :] == g[:, i, None, None]) & ~green).sum(2)
            earlier = np.zeros_like(spare)
            for k in range(i):
                earlier += (g[:, k] == g[:, i])[:, None] & ~green[:, :, k]
            mark = 2 * green[:, :, i] + (~green[:, :, i] & (spare > earlier))
            out += mark.astype(np.uint8) * np.uint8(3**i)
        codes[~plain] = out
    return codes


# ------------------------------------------------------------------ the solver


def group_sizes(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of feedback codes: the largest group of equal codes and the sum of squared
    group sizes (the expected group size, times the row length)."""
    rows, width = codes.shape
    if width >= 243:  # counting is cheaper than sorting
        flat = codes.astype(np.int32) + (np.arange(rows, dtype=np.int32) * 243)[:, None]
        counts = np.bincount(flat.ravel(), minlength=rows * 243).reshape(rows, 243)
        return counts.max(axis=1), (counts * counts).sum(axis=1)
    ordered = np.sort(codes, axis=1)
    starts = np.ones((rows, width), dtype=bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    first = np.flatnonzero(starts)  # flat positions where a group begins; every row has one
    sizes = np.diff(np.append(first, rows * width))
    row_first = np.flatnonzero(first % width == 0)
    squares = np.bincount(first // width, weights=sizes * sizes, minlength=rows).astype(np.int64)
    return np.maximum.reduceat(sizes, row_first), squares


class Solver:
    """Picks guesses for a set of words still possible; remembers every set it has seen.

    Pure functions of the candidate set, so results are cached across games (the
    same feedback leads to the same set) and the policy stays deterministic.
    """

    def __init__(self, bank: WordBank):
        self.bank = bank
        self._plans: dict[tuple[bytes, int], int | None] = {}
        self._ranks: dict[bytes, np.ndarray] = {}
        # Codes of every plain probe against each hidden word met so far, filled one
        # column per word on first use, so a set's split is a gather, not a recount.
        self._columns = np.zeros((len(bank.distinct), len(bank.words)), dtype=np.uint8)
        self._filled = np.zeros(len(bank.words), dtype=bool)
        self._row_of = np.full(len(bank.words), -1)
        self._row_of[bank.distinct] = np.arange(len(bank.distinct))

    def codes_of(self, guess: int, cands: np.ndarray) -> np.ndarray:
        """The feedback codes of one guess against each of `cands`."""
        row = self._row_of[guess]
        if row < 0 or not self._filled[cands].all():
            return pattern_codes(self.bank, np.array([guess]), cands)[0]
        return self._columns[row, cands]

    def probe_codes(self, cands: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The probes worth trying on `cands` (plain words, and the candidates) and their codes."""
        missing = cands[~self._filled[cands]]
        if len(missing):
            self._columns[:, missing] = pattern_codes(self.bank, self.bank.distinct, missing)
            self._filled[missing] = True
        extra = cands[~self.bank.plain[cands]]
        probes = np.concatenate([self.bank.distinct, extra])
        codes = self._columns[:, cands]
        if len(extra):
            codes = np.concatenate([codes, pattern_codes(self.bank, extra, cands)])
        return probes, codes

    def ranked(self, cands: np.ndarray) -> np.ndarray:
        """The best guesses for `cands`: smallest expected group, then smallest largest group."""
        key = cands.tobytes()
        if key not in self._ranks:
            probes, codes = self.probe_codes(cands)
            largest, squares = group_sizes(codes)
            outside = ~np.isin(probes, cands)
            squares -= ~outside  # a candidate's own (solved) group costs nothing
            order = np.lexsort((probes, outside, largest, squares))
            self._ranks[key] = probes[order[:PLAN_WIDTH]]
        return self._ranks[key]

    def split(self, guess: int, cands: np.ndarray) -> list[np.ndarray]:
        """The groups of `cands` that guessing `guess` tells apart (the solved one left out)."""
        codes = self.codes_of(guess, cands)
        return [cands[codes == c] for c in np.unique(codes) if c != SOLVED]

    def plan(self, cands: np.ndarray, left: int) -> int | None:
        """A guess after which every outcome is solvable within `left` guesses, if found."""
        key = (cands.tobytes(), left)
        if key not in self._plans:
            self._plans[key] = self._search(cands, left)
        return self._plans[key]

    def _search(self, cands: np.ndarray, left: int) -> int | None:
        if left <= 0 or (left == 1 and len(cands) > 1):
            return None
        if len(cands) <= 2:
            return int(cands[0])
        for guess in self.ranked(cands):
            if all(self.plan(group, left - 1) is not None for group in self.split(guess, cands)):
                return int(guess)
        return None

    def choose(self, cands: np.ndarray, left: int) -> int:
        if len(cands) <= 2:
            return int(cands[0])
        if len(cands) <= PLAN_LIMIT:
            planned = self.plan(cands, left)
            if planned is not None:
                return planned
        return int(self.ranked(cands)[0])

    def candidates(self, tier: int, history: list[tuple[str, str]]) -> np.ndarray:
        """The hidden words of level `tier` consistent with every (guess, marks) shown."""
        cands = self.bank.solutions(tier)
        for guess, marks in history:
            cands = cands[self.codes_of(self.bank.index[guess], cands) == pattern_code(marks)]
        return cands

    def next_guess(self, tier: int, history: list[tuple[str, str]], left: int) -> str:
        if not history:
            return OPENERS[tier]
        cands = self.candidates(tier, history)
        if len(cands) == 0:
            raise ValueError("no word of the list is consistent with the feedback shown")
        return self.bank.words[self.choose(cands, left)]


@cache
def solver() -> Solver:
    """The shared solver (its caches fill as games are played)."""
    return Solver(word_bank())


# ------------------------------------------------------------------- the game


def render_board(guesses: list[str], marks: list[str]) -> str:
    if len(guesses) != len(marks):
        raise ValueError(f"{len(guesses)} guesses but {len(marks)} rows of marks")
    if not guesses:
        return "(no guesses yet)"
    return "\n".join(map(_board_row, range(1, len(guesses) + 1), guesses, marks))


@lru_cache(maxsize=1 << 14)
def _board_row(n: int, guess: str, marks: str) -> str:
    """Row `n` of the board (the board is drawn again after every guess)."""
    return f"{n}. {guess.upper()}  {marks}"


def read_history(messages: Messages) -> tuple[int, list[tuple[str, str]], int]:
    """Level, (guess, marks) so far and guesses allowed, read from the conversation alone."""
    texts = [m.get("content") or "" for m in messages if m.get("role") == "user"]
    if not texts:
        raise ValueError("no Wordle game found in the conversation")
    first = texts[0]
    tier = next((t for t, d in DESCRIPTIONS.items() if d in first), max(DESCRIPTIONS))
    allowed = _GUESSES.search(first)
    # The latest board: a refused move's reply shows none, and must not erase the history.
    rows = next((found for text in reversed(texts) if (found := _ROW.findall(text))), [])
    history = [(word.lower(), marks) for word, marks in rows]
    return tier, history, int(allowed.group(1)) if allowed else MAX_GUESSES


class WordleEnv(TextGame):
    """Wordle with a fixed word list; the hidden word is in the dataset row's info."""

    game_name = "wordle"

    def new_game(self, info: dict[str, Any]) -> dict[str, Any]:
        return {
            "answer": info["word"],
            "max_guesses": info["max_guesses"],
            "guesses": [],
            "marks": [],
            "won": False,
            "step_greens": 0,
        }

    def apply_move(self, game: dict[str, Any], move: str) -> str:
        word = move.strip().strip(".!\"'").lower()
        if word not in word_bank().index:  # (every listed word is five letters a-z)
            if not _WORD.fullmatch(word):
                raise InvalidMove(
                    f"{move[:40]!r} is not a five-letter word; guess like <move>crane</move>."
                )
            raise InvalidMove(f"{word!r} is not in the word list; guess an English word.")
        marks = feedback(word, game["answer"])
        new_greens = 0
        if GREEN in marks:  # only the greens no earlier guess had count
            earlier = game["marks"]
            for i, mark in enumerate(marks):
                if mark == GREEN:
                    for m in earlier:
                        if m[i] == GREEN:
                            break
                    else:
                        new_greens += 1
        game["guesses"].append(word)
        game["marks"].append(marks)
        game["step_greens"] = new_greens
        used, total = len(game["guesses"]), game["max_guesses"]
        if marks == GREEN * WORD_LENGTH:
            game["won"] = True
            head = f"{word.upper()}  {marks}: solved in {counted(used, 'guess', 'guesses')}!"
        elif used >= total:
            head = (
                f"{word.upper()}  {marks}. Out of guesses: the word was {game['answer'].upper()}."
            )
        else:
            left = total - used
            head = f"{word.upper()}  {marks}. {counted(left, 'guess', 'guesses')} left."
        return f"{head}\n\n{render_board(game['guesses'], game['marks'])}"

    def start_turn(self, game: dict[str, Any]) -> None:
        """A guess that counts sets `step_greens` (apply_move); any other move leaves 0."""
        game["step_greens"] = 0

    def step_reward(self, state: State) -> float:
        """The share of the word's letters that the last guess newly placed green."""
        return state["game_state"]["step_greens"] / WORD_LENGTH

    def is_over(self, game: dict[str, Any]) -> bool:
        return game["won"] or len(game["guesses"]) >= game["max_guesses"]

    def score(self, game: dict[str, Any]) -> float:
        return 1.0 if game["won"] else 0.0

    def efficiency(self, game: dict[str, Any], state: State) -> float:
        """1 for a first-guess solve, down to 1/max_guesses for the last guess."""
        total = game["max_guesses"]
        return (total + 1 - len(game["guesses"])) / total

    def render(self, game: dict[str, Any]) -> str:
        status = "solved" if game["won"] else ("lost" if self.is_over(game) else "playing")
        return f"{render_board(game['guesses'], game['marks'])}\n({status})"

    def reference_policy(self, messages: Messages) -> ChatMessage:
        tier, history, allowed = read_history(messages)
        return move_message(solver().next_guess(tier, history, allowed - len(history)))

    def random_move(self, messages: Messages, rng: random.Random) -> str:
        """Any allowed word, ignoring the feedback: the floor a policy must beat."""
        return rng.choice(word_bank().words)


# ------------------------------------------------------------------- items


def generate_item(
    rng: random.Random, tier: int, max_guesses: int
) -> tuple[str, dict[str, Any], str]:
    bank = word_bank()
    word = bank.words[int(rng.choice(bank.solutions(tier)))]
    question = (
        f"I picked a hidden five-letter word: {DESCRIPTIONS[tier]}. "
        f"You have {counted(max_guesses, 'guess', 'guesses')}. Make your first guess."
    )
    return question, {"word": word, "max_guesses": max_guesses, "tier": tier}, word


def load_environment(
    num_examples: int = 100,
    seed: int = 0,
    difficulty: str = "medium",
    max_guesses: int = MAX_GUESSES,
    max_turns: int | None = None,
    max_invalid_moves: int = 3,
) -> WordleEnv:
    """Build the environment; `max_turns` defaults to the guesses plus the invalid moves."""
    check_choice("difficulty", difficulty, DIFFICULTIES)
    check_whole("max_guesses", max_guesses, example=MAX_GUESSES)
    check_whole("max_invalid_moves", max_invalid_moves, example=3)
    if not 1 <= max_guesses <= 20:
        raise ValueError(f"max_guesses must be between 1 and 20, not {max_guesses}")
    turns = max_turns if max_turns is not None else max_guesses + max_invalid_moves
    if turns < 1:
        raise ValueError(f"max_turns must be at least 1, not {turns}")
    tier = DIFFICULTIES[difficulty]
    make = lambda rng, i: generate_item(rng, tier, max_guesses)  # noqa: E731
    return WordleEnv(
        dataset=game_rows("wordle", make, num_examples, seed),
        eval_dataset=game_rows("wordle", make, num_examples, seed, offset=EVAL_OFFSET),
        system_prompt=SYSTEM_PROMPT,
        max_turns=turns,
        max_invalid_moves=max_invalid_moves,
    )
