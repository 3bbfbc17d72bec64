"""Play N guess-the-number steps in one framework, for counting instructions per step.

Wall-clock figures on a shared machine move by a third between runs; an instruction
count does not. Run this under callgrind twice, with 20,000 and with 140,000 steps,
and divide the difference of the two counts by 120,000: start-up and the first
episodes cancel out, and a run's count moves by about 14 million instructions, so
the figure is good to about ±150 (the same loop, making a random move each step, for
both frameworks):

    for n in 20000 140000; do
        PYTHONHASHSEED=0 setarch -R valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
            .venv/bin/python benchmarks/step_instructions.py vfgym $n 2>&1 | grep Collected
    done

(`~/.cache/vfgym-bench/gem/bin/python benchmarks/step_instructions.py gem $n` for GEM;
GEM's venv is the one `gym_bench.py` makes.) `loop` plays against a do-nothing env:
the cost of the loop and its moves alone. Stdlib only besides the framework, so it
runs in the peers' venvs.
"""

from __future__ import annotations

import random
import sys
from typing import Any


class _NothingEnv:
    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return "", 0.0, False, False, {}

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        return "", {}


def main(framework: str, steps: int) -> None:
    rng = random.Random(0)
    if framework == "gem":
        import gem

        env: Any = gem.make("game:GuessTheNumber-v0-hard")
        tags = "\\boxed{", "}"
    elif framework == "vfgym":
        import gymnasium as gym

        import vfgym.gym  # noqa: F401  (registers the ids)

        # GEM's version of the game (see gym_bench.PEER_SETTINGS): the same episodes.
        env = gym.make("vfgym/GuessTheNumber-v0", low=1, high=50, max_turns=7)
        tags = "<move>", "</move>"
    elif framework == "loop":
        env = _NothingEnv()
        tags = "<move>", "</move>"
    else:
        raise SystemExit(f"framework must be vfgym, gem or loop, not {framework!r}")
    env.reset(seed=0)
    opening, closing = tags
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(f"{opening}{rng.randint(1, 10)}{closing}")
        if terminated or truncated:
            env.reset()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: step_instructions.py vfgym|gem|loop STEPS")
    main(sys.argv[1], int(sys.argv[2]))
