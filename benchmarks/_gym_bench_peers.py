"""Steps per second of GEM and TextArena games; run by gym_bench.py inside their own venvs.

Usage: python _gym_bench_peers.py {gem|textarena} SECONDS WORDS_FILE
Prints one JSON object: {"<game>/<mode>": steps_per_second or null}. This file
imports neither vfgym nor anything outside the peer's own virtual environment.

Both peers' Wordle read NLTK's "words" corpus, which they try to download at run
time; gym_bench.py points NLTK_DATA at a corpus built from vfgym's own word list,
so all three Wordles draw from the same words. TextArena's Wordle also filters its
words with NLTK's part-of-speech tagger (a model download); here every word is
taken as a noun, which only changes its word list, not the step path measured.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Callable
from typing import Any

VECTOR_ENVS = 8


def timed(step: Callable[[], int], seconds: float, rounds: int = 10) -> float:
    """Steps per second of `step` (which returns how many env steps it made): the best of
    `rounds` rounds over `seconds` in all. On a shared machine the best round is the one
    least disturbed by other work; the same rule applies to every framework measured."""
    for _ in range(20):  # warm up
        step()
    best = 0.0
    for _ in range(rounds):
        steps = 0
        start = time.perf_counter()
        deadline = start + seconds / rounds
        while True:
            for _ in range(25):
                steps += step()
            now = time.perf_counter()
            if now >= deadline:
                break
        best = max(best, steps / (now - start))
    return best


# ---------------------------------------------------------------------- GEM


def gem_actions(game: str, words: list[str], rng: random.Random) -> Callable[[], str]:
    if game == "guess-the-number":
        return lambda: f"\\boxed{{{rng.randint(1, 10)}}}"
    return lambda: f"\\boxed{{{rng.choice(words)}}}"


GEM_IDS = {
    "guess-the-number": "game:GuessTheNumber-v0-hard",
    "wordle": "game:Wordle-v0-hard",
}


def bench_gem(seconds: float, words: list[str]) -> dict[str, float | None]:
    import gem

    results: dict[str, float | None] = {}
    for game in ("guess-the-number", "tictactoe", "wordle"):
        if game not in GEM_IDS:  # GEM ships no tic-tac-toe
            for mode in ("single", "sync8", "async8"):
                results[f"{game}/{mode}"] = None
            continue
        rng = random.Random(0)
        action = gem_actions(game, words, rng)
        try:
            env = gem.make(GEM_IDS[game])
            env.reset(seed=0)
        except Exception as exc:
            print(f"gem {GEM_IDS[game]}: {type(exc).__name__}: {exc}", file=sys.stderr)
            results.update({f"{game}/{mode}": None for mode in ("single", "sync8", "async8")})
            continue

        def single(env: Any = env, action: Callable[[], str] = action) -> int:
            _, _, terminated, truncated, _ = env.step(action())
            if terminated or truncated:
                env.reset()
            return 1

        results[f"{game}/single"] = timed(single, seconds)
        for mode, is_async in (("sync8", False), ("async8", True)):
            vec = gem.make_vec([GEM_IDS[game]] * VECTOR_ENVS, async_mode=is_async)
            vec.reset(seed=0)

            def vector(vec: Any = vec, action: Callable[[], str] = action) -> int:
                vec.step([action() for _ in range(VECTOR_ENVS)])  # autoresets by itself
                return VECTOR_ENVS

            results[f"{game}/{mode}"] = timed(vector, seconds)
            close = getattr(vec, "close", None)
            if callable(close):
                close()
    return results


# ---------------------------------------------------------------- TextArena

TEXTARENA_IDS = {
    "guess-the-number": "GuessTheNumber-v0-raw",
    "tictactoe": "TicTacToe-v0-raw",
    "wordle": "Wordle-v0-raw",
}


def textarena_actions(game: str, words: list[str], rng: random.Random) -> Callable[[], str]:
    if game == "guess-the-number":
        return lambda: f"[{rng.randint(1, 10)}]"
    if game == "tictactoe":
        return lambda: f"[{rng.randrange(9)}]"
    return lambda: f"[{rng.choice(words)}]"


def bench_textarena(seconds: float, words: list[str]) -> dict[str, float | None]:
    import nltk

    nltk.pos_tag = lambda tokens, *a, **k: [(t, "NN") for t in tokens]  # see module docstring
    import textarena as ta

    try:
        import textarena.envs.Wordle.env as wordle_module

        wordle_module.pos_tag = nltk.pos_tag
    except Exception as exc:  # Wordle then fails to build and is reported as missing
        print(f"textarena Wordle not patched: {exc}", file=sys.stderr)

    results: dict[str, float | None] = {}
    for game, env_id in TEXTARENA_IDS.items():
        players = 2 if game == "tictactoe" else 1
        rng = random.Random(0)
        action = textarena_actions(game, words, rng)
        seeds = iter(range(10**9))
        try:
            env = ta.make(env_id)
            env.reset(num_players=players, seed=next(seeds))
        except Exception as exc:
            print(f"textarena {env_id}: {type(exc).__name__}: {exc}", file=sys.stderr)
            results[f"{game}/single"] = None
            continue

        def single(
            env: Any = env,
            action: Callable[[], str] = action,
            players: int = players,
            seeds: Any = seeds,
        ) -> int:
            env.get_observation()
            done, _ = env.step(action=action())
            if done:
                env.close()
                env.reset(num_players=players, seed=next(seeds))
            return 1

        results[f"{game}/single"] = timed(single, seconds)
    for game in TEXTARENA_IDS:  # TextArena has no vector envs
        results[f"{game}/sync8"] = None
        results[f"{game}/async8"] = None
    return results


def main() -> None:
    peer, seconds, words_file = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    with open(words_file, encoding="utf-8") as handle:
        words = [w.strip() for w in handle if w.strip()]
    runner = {"gem": bench_gem, "textarena": bench_textarena}[peer]
    results = runner(seconds, words)
    print("RESULTS " + json.dumps(results))


if __name__ == "__main__":
    main()
