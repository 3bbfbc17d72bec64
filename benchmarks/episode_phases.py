"""Where a guess-the-number episode's time goes, phase by phase, in one framework.

    .venv/bin/python benchmarks/episode_phases.py vfgym [--no-scoring]
    ~/.cache/vfgym-bench/gem/bin/python benchmarks/episode_phases.py gem

It plays `gym_bench.py`'s single-env loop (GEM's version of the game: 1-50 in 7
turns, a random guess from 1 to 10 each step) and times each call on its own: the
reset, the first step of an episode, the steps in the middle, and the step that ends
it. Each figure is the best of `--rounds` rounds. The first step is set apart because
it pays for freeing what the previous episode left (in vfgym, its conversation: the
State's message dicts, dropped when the caller lets go of the last step's info).

`--no-scoring` replaces the rubric's scoring of a finished episode with a constant,
to show what scoring costs (vfgym only). Stdlib only besides the framework, so it
runs in the peers' venvs (GEM's is the one `gym_bench.py` makes).
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from typing import Any

PHASES = ("reset", "first step", "middle steps", "last step")


def make_env(framework: str, scoring: bool) -> tuple[Any, Callable[[int], str]]:
    """The env and how a guess is written for it."""
    if framework == "gem":
        import gem

        return gem.make("game:GuessTheNumber-v0-hard"), lambda guess: f"\\boxed{{{guess}}}"
    if framework != "vfgym":
        raise SystemExit(f"framework must be vfgym or gem, not {framework!r}")
    import gymnasium as gym

    import vfgym.gym  # noqa: F401  (registers the ids)

    env = gym.make("vfgym/GuessTheNumber-v0", low=1, high=50, max_turns=7)
    if not scoring:
        env.unwrapped.environment.rubric.score_state_sync = lambda state: (0.0, {})
    return env, lambda guess: f"<move>{guess}</move>"


def one_round(env: Any, move: Callable[[int], str], steps: int) -> dict[str, float]:
    """Mean seconds per call of each phase over `steps` steps."""
    rng = random.Random(0)
    clock = time.perf_counter
    total = dict.fromkeys(PHASES, 0.0)
    count = dict.fromkeys(PHASES, 0)
    turn = 0
    for _ in range(steps):
        action = move(rng.randint(1, 10))
        started = clock()
        result = env.step(action)
        elapsed = clock() - started
        turn += 1
        ended = result[2] or result[3]
        phase = "last step" if ended else "first step" if turn == 1 else "middle steps"
        total[phase] += elapsed
        count[phase] += 1
        if ended:
            started = clock()
            env.reset()
            total["reset"] += clock() - started
            count["reset"] += 1
            turn = 0
    return {phase: total[phase] / max(1, count[phase]) for phase in PHASES} | {
        "steps per episode": steps / max(1, count["reset"])
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("framework", choices=("vfgym", "gem"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=150_000)
    parser.add_argument("--no-scoring", action="store_true", help="vfgym only: score nothing")
    args = parser.parse_args()
    if args.no_scoring and args.framework != "vfgym":
        raise SystemExit("--no-scoring applies to vfgym only")
    env, move = make_env(args.framework, scoring=not args.no_scoring)
    env.reset(seed=0)
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for phase, value in one_round(env, move, args.steps).items():
            best[phase] = min(best.get(phase, value), value)
    per_episode = best["steps per episode"]
    # An episode: a reset, a first step, a last step, and the middle steps between.
    episode = (
        best["reset"]
        + best["first step"]
        + best["last step"]
        + (per_episode - 2) * best["middle steps"]
    )
    label = args.framework + (" (no scoring)" if args.no_scoring else "")
    print(f"{label}: " + ", ".join(f"{p} {best[p] * 1e6:.2f} µs" for p in PHASES))
    print(f"{label}: {per_episode:.2f} steps an episode, {episode * 1e6:.2f} µs an episode")


if __name__ == "__main__":
    main()
