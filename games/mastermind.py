"""Mastermind: deduce a hidden code of coloured pegs from black and white peg scores.

Colours are letters (A, B, C, ...). After each guess: one black peg per peg of the
right colour in the right place, one white peg per further peg of a right colour in
the wrong place (each hidden peg answers at most one guess peg).

Knobs: `pegs` (code length, 2-6), `colours` (2-10), `repeats` (may a colour occur
twice), `difficulty` presets "easy" 3 pegs / 4 colours, "medium" 4 / 6 (the classic
game), "hard" 5 / 8; `max_guesses` (default 10), `max_invalid_moves`. The reference
policy keeps the codes consistent with the board and plays Knuth's rule (the guess
whose worst score leaves the fewest codes, preferring consistent ones) while the code
space is small, else the most splitting consistent code; on the classic game it never
needs more than five guesses.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from functools import cache
from typing import Any

import numpy as np
from vfgym.games._base import (
    EVAL_OFFSET,
    TextGame,
    check_choice,
    check_flag,
    check_whole,
    counted,
    game_rows,
    move_message,
)

from vfgym.errors import InvalidMove
from vfgym.types import ChatMessage, Messages

GYM_ID = "vfgym/Mastermind-v0"
KIND = "game"
NEEDS_SANDBOX = False

ALPHABET = "ABCDEFGHIJ"
DIFFICULTIES = {"easy": (3, 4), "medium": (4, 6), "hard": (5, 8)}
#: The largest code space offered (5 pegs of 10 colours), so every move stays quick.
MAX_SPACE = 100_000
#: Spaces up to this many codes get Knuth's full minimax over every code.
KNUTH_LIMIT = 1300
#: Larger spaces score at most this many consistent codes as guesses, fewer while many
#: codes remain (about PAIR_BUDGET guess-secret pairs a move).
PROBE_LIMIT = 400
PAIR_BUDGET = 60_000

_SETTINGS = re.compile(r"code of (\d) pegs.*?colours ([A-J](?:, [A-J])*)\. (Colours may|No colour)")
_ROW = re.compile(r"^\s*\d+\.\s+([A-J]+)\s+black (\d) white (\d)\s*$", re.MULTILINE)

SYSTEM_PROMPT = """You are playing Mastermind. Deduce the hidden code of coloured pegs.
Colours are letters. Each turn, guess a full code (one letter per peg, for example ABCD).
I score every guess with:
  black: pegs of the right colour in the right place
  white: further pegs of a right colour in the wrong place
Each hidden peg is counted at most once. After each guess I show the board of all your
guesses and scores. You win when all pegs are black.
Reply with your guess inside move tags, for example: <move>ABCD</move>"""


# ------------------------------------------------------------------- the rules


def score_guess(guess: str, secret: str) -> tuple[int, int]:
    """(black, white) pegs of `guess` against `secret`."""
    black = sum(g == s for g, s in zip(guess, secret, strict=True))
    common = sum(min(guess.count(c), secret.count(c)) for c in set(guess))
    return black, common - black


@cache
def code_space(pegs: int, colours: int, repeats: bool) -> tuple[str, ...]:
    """Every possible code, in alphabetical order."""
    letters = ALPHABET[:colours]
    if repeats:
        return tuple("".join(p) for p in itertools.product(letters, repeat=pegs))
    return tuple("".join(p) for p in itertools.permutations(letters, pegs))


@cache
def code_index(space: tuple[int, int, bool]) -> dict[str, int]:
    return {code: i for i, code in enumerate(code_space(*space))}


@cache
def code_arrays(pegs: int, colours: int, repeats: bool) -> tuple[np.ndarray, np.ndarray]:
    """The code space as (codes, pegs) colour numbers and (codes, colours) counts."""
    codes = np.array(
        [[ALPHABET.index(c) for c in code] for code in code_space(pegs, colours, repeats)]
    )
    counts = np.stack([(codes == c).sum(axis=1) for c in range(colours)], axis=1)
    return codes.astype(np.int8), counts.astype(np.int8)


def score_codes(
    space: tuple[int, int, bool], guesses: np.ndarray, secrets: np.ndarray
) -> np.ndarray:
    """Scores as numbers black * 10 + white, (guesses, secrets) given as indices."""
    codes, counts = code_arrays(*space)
    black = (codes[guesses][:, None, :] == codes[secrets][None, :, :]).sum(axis=2, dtype=np.int16)
    common = np.minimum(counts[guesses][:, None, :], counts[secrets][None, :, :])
    return black * 9 + common.sum(axis=2, dtype=np.int16)  # black * 10 + white


@cache
def score_matrix(space: tuple[int, int, bool]) -> np.ndarray:
    """Every code scored against every code; only built for spaces of Knuth's size."""
    everything = np.arange(len(code_space(*space)))
    return score_codes(space, everything, everything)


# ------------------------------------------------------------------ the solver


def best_guess(space: tuple[int, int, bool], cands: np.ndarray) -> int:
    """Knuth's rule on small spaces, the most splitting consistent code on large ones."""
    if len(cands) <= 2:
        return int(cands[0])
    size = len(code_space(*space))
    if size <= KNUTH_LIMIT:
        probes = np.arange(size)
        scores = score_matrix(space)[:, cands].astype(np.int32)
    else:
        probes = cands[: max(1, min(PROBE_LIMIT, PAIR_BUDGET // len(cands)))]
        scores = score_codes(space, probes, cands).astype(np.int32)
    flat = scores + (np.arange(len(probes), dtype=np.int32) * 100)[:, None]
    worst = np.bincount(flat.ravel(), minlength=len(probes) * 100).reshape(-1, 100).max(axis=1)
    outside = ~np.isin(probes, cands)
    return int(probes[np.lexsort((probes, outside, worst))[0]])


def consistent(space: tuple[int, int, bool], history: list[tuple[str, int, int]]) -> np.ndarray:
    """Indices of the codes that would have scored every guess of `history` as shown."""
    index = code_index(space)
    cands = np.arange(len(index))
    small = len(index) <= KNUTH_LIMIT
    for guess, black, white in history:
        if guess not in index:
            continue
        if small:
            scores = score_matrix(space)[index[guess], cands]
        else:
            scores = score_codes(space, np.array([index[guess]]), cands)[0]
        cands = cands[scores == black * 10 + white]
    return cands


@cache
def opening(space: tuple[int, int, bool]) -> str:
    """The first guess: the same rule over the whole space, worked out once per setting;
    on large spaces a code of colour pairs (AABBC), which the rule favours on small ones."""
    pegs, _, repeats = space
    codes = code_space(*space)
    if len(codes) <= KNUTH_LIMIT:
        return codes[best_guess(space, np.arange(len(codes)))]
    return "".join(ALPHABET[i // 2] for i in range(pegs)) if repeats else ALPHABET[:pegs]


def read_game(messages: Messages) -> tuple[tuple[int, int, bool], list[tuple[str, int, int]]]:
    """The settings and the scored guesses so far, read from the conversation alone."""
    texts = [m.get("content") or "" for m in messages if m.get("role") == "user"]
    match = _SETTINGS.search(texts[0]) if texts else None
    if not match:
        raise ValueError("no Mastermind game found in the conversation")
    pegs, letters, rule = match.groups()
    space = (int(pegs), len(letters.split(", ")), rule == "Colours may")
    # The latest board: a refused move's reply shows none, and must not erase the history.
    rows = next((found for text in reversed(texts) if (found := _ROW.findall(text))), [])
    history = [(g, int(b), int(w)) for g, b, w in rows]
    return space, history


# ------------------------------------------------------------------- the game


def render_board(guesses: list[str], scores: list[list[int]]) -> str:
    pairs = zip(guesses, scores, strict=True)
    rows = [f"{n}. {g}  black {b} white {w}" for n, (g, (b, w)) in enumerate(pairs, 1)]
    return "\n".join(rows) if rows else "(no guesses yet)"


class MastermindEnv(TextGame):
    """Mastermind; the hidden code is in the dataset row's info."""

    game_name = "mastermind"

    def new_game(self, info: dict[str, Any]) -> dict[str, Any]:
        return {
            "secret": info["secret"],
            "pegs": info["pegs"],
            "colours": info["colours"],
            "repeats": info["repeats"],
            "max_guesses": info["max_guesses"],
            "guesses": [],
            "scores": [],
            "won": False,
        }

    def apply_move(self, game: dict[str, Any], move: str) -> str:
        # A full stop after the code ends a sentence, as in every game of the catalogue.
        guess = re.sub(r"[\s,;\-]", "", move.rstrip().removesuffix(".")).upper()
        letters = ALPHABET[: game["colours"]]
        example = (letters * game["pegs"])[: game["pegs"]]
        if len(guess) != game["pegs"] or any(c not in letters for c in guess):
            raise InvalidMove(
                f"{move[:40]!r} is not a code: give {game['pegs']} letters from "
                f"{', '.join(letters)}, like <move>{example}</move>."
            )
        if not game["repeats"] and len(set(guess)) < len(guess):
            raise InvalidMove(f"{guess} repeats a colour, and no colour repeats in this game.")
        black, white = score_guess(guess, game["secret"])
        game["guesses"].append(guess)
        game["scores"].append([black, white])
        used, total = len(game["guesses"]), game["max_guesses"]
        if black == game["pegs"]:
            game["won"] = True
            guesses = "1 guess" if used == 1 else f"{used} guesses"
            head = f"{guess}: black {black} white {white}. Cracked in {guesses}!"
        elif used >= total:
            head = f"{guess}: black {black} white {white}. Out of guesses: it was {game['secret']}."
        else:
            left = counted(total - used, "guess", "guesses")
            head = f"{guess}: black {black} white {white}. {left} left."
        return f"{head}\n\n{render_board(game['guesses'], game['scores'])}"

    def is_over(self, game: dict[str, Any]) -> bool:
        return game["won"] or len(game["guesses"]) >= game["max_guesses"]

    def score(self, game: dict[str, Any]) -> float:
        return 1.0 if game["won"] else 0.0

    def efficiency(self, game: dict[str, Any], state: dict[str, Any]) -> float:
        total = game["max_guesses"]
        return (total + 1 - len(game["guesses"])) / total

    def render(self, game: dict[str, Any]) -> str:
        status = "cracked" if game["won"] else ("lost" if self.is_over(game) else "playing")
        return f"{render_board(game['guesses'], game['scores'])}\n({status})"

    def reference_policy(self, messages: Messages) -> ChatMessage:
        space, history = read_game(messages)
        codes = code_space(*space)
        if not history:
            return move_message(opening(space))
        cands = consistent(space, history)
        if len(cands) == 0:
            raise ValueError("no code is consistent with the scores shown")
        return move_message(codes[best_guess(space, cands)])

    def random_move(self, messages: Messages, rng: random.Random) -> str:
        """Any code of the game, ignoring the scores: the floor a policy must beat."""
        try:
            space, _ = read_game(messages)
        except ValueError:
            return "".join(rng.choice(ALPHABET[:6]) for _ in range(4))
        return rng.choice(code_space(*space))


# ------------------------------------------------------------------- items


def generate_item(
    rng: random.Random, pegs: int, colours: int, repeats: bool, max_guesses: int
) -> tuple[str, dict[str, Any], str]:
    letters = ALPHABET[:colours]
    secret = (
        "".join(rng.choice(letters) for _ in range(pegs))
        if repeats
        else "".join(rng.sample(letters, pegs))
    )
    rule = "Colours may repeat." if repeats else "No colour repeats."
    question = (
        f"I hid a code of {pegs} pegs in the colours {', '.join(letters)}. {rule} "
        f"You have {counted(max_guesses, 'guess', 'guesses')}. Make your first guess."
    )
    info = {
        "secret": secret,
        "pegs": pegs,
        "colours": colours,
        "repeats": repeats,
        "max_guesses": max_guesses,
    }
    return question, info, secret


def load_environment(
    num_examples: int = 100,
    seed: int = 0,
    difficulty: str = "medium",
    pegs: int | None = None,
    colours: int | None = None,
    repeats: bool = True,
    max_guesses: int = 10,
    max_turns: int | None = None,
    max_invalid_moves: int = 3,
) -> MastermindEnv:
    """Build the environment; `pegs`/`colours` override the difficulty's setting."""
    check_choice("difficulty", difficulty, DIFFICULTIES)
    default_pegs, default_colours = DIFFICULTIES[difficulty]
    pegs = default_pegs if pegs is None else pegs
    colours = default_colours if colours is None else colours
    check_whole("pegs", pegs, example=default_pegs)
    check_whole("colours", colours, example=default_colours)
    check_flag("repeats", repeats)
    check_whole("max_guesses", max_guesses, example=10)
    check_whole("max_invalid_moves", max_invalid_moves, example=3)
    if not 2 <= pegs <= 6:
        raise ValueError(f"pegs must be between 2 and 6, not {pegs}")
    if not 2 <= colours <= len(ALPHABET):
        raise ValueError(f"colours must be between 2 and {len(ALPHABET)}, not {colours}")
    if not repeats and colours < pegs:
        raise ValueError(
            f"without repeats a code of {pegs} pegs needs at least {pegs} colours, not {colours}"
        )
    space = colours**pegs if repeats else math.perm(colours, pegs)
    if space > MAX_SPACE:
        raise ValueError(
            f"{colours} colours on {pegs} pegs make {space:,} codes, more than the "
            f"{MAX_SPACE:,} this game supports; use fewer pegs or colours"
        )
    if not 1 <= max_guesses <= 30:
        raise ValueError(f"max_guesses must be between 1 and 30, not {max_guesses}")
    turns = max_turns if max_turns is not None else max_guesses + max_invalid_moves
    if turns < 1:
        raise ValueError(f"max_turns must be at least 1, not {turns}")
    make = lambda rng, i: generate_item(rng, pegs, colours, repeats, max_guesses)  # noqa: E731
    return MastermindEnv(
        dataset=game_rows("mastermind", make, num_examples, seed),
        eval_dataset=game_rows("mastermind", make, num_examples, seed, offset=EVAL_OFFSET),
        system_prompt=SYSTEM_PROMPT,
        max_turns=turns,
        max_invalid_moves=max_invalid_moves,
    )
