"""Numbers in a move that no board could hold are invalid moves, not crashes.

A model can write a 5,000-digit number, or a digit that is not decimal ("²"), where a
game reads a position. `int()` refuses both (over 4,300 digits it raises ValueError),
which must end up as the game's invalid-move feedback: the episode goes on.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import vfgym.gym  # noqa: F401  (registers the ids)

HUGE = "9" * 5000

CASES = [
    ("vfgym/ConnectFour-v0", HUGE),
    ("vfgym/ConnectFour-v0", "²"),
    ("vfgym/Minesweeper-v0", f"reveal A{HUGE}"),
    ("vfgym/Nim-v0", f"1 {HUGE}"),
    ("vfgym/Nim-v0", f"{HUGE} 1"),
    ("vfgym/Sudoku-v0", f"r1c1={HUGE}"),
    ("vfgym/Sudoku-v0", f"r{HUGE}c1=5"),
    ("vfgym/GuessTheNumber-v0", HUGE),
    ("vfgym/GuessTheNumber-v0", f"-{HUGE}"),
]


@pytest.mark.parametrize(("gym_id", "move"), CASES, ids=lambda v: v if len(v) < 30 else v[:12])
def test_an_unreadable_number_is_an_invalid_move(gym_id: str, move: str) -> None:
    env = gym.make(gym_id)
    try:
        env.reset(seed=0)
        observation, reward, terminated, truncated, info = env.step(f"<move>{move}</move>")
        assert observation.startswith("Invalid move:"), observation
        assert len(observation) < 400  # the number is not echoed back whole
        assert (reward, terminated, truncated) == (0.0, False, False)
        assert info["state"]["invalid_moves"] == 1
        assert "error" not in info["state"]
    finally:
        env.close()


def test_a_huge_guess_is_named_out_of_range() -> None:
    env = gym.make("vfgym/GuessTheNumber-v0")
    try:
        env.reset(seed=0)
        observation, *_ = env.step(f"<move>{HUGE}</move>")
        assert "outside the range 1 to 100" in observation, observation
    finally:
        env.close()
