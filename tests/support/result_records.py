"""A result line of a finished guessing rollout, for tests of what is made from
results files (summaries, reports)."""

from __future__ import annotations

from typing import Any


def guess_record(index: Any, reward: float | None, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "index": index,
        "example_id": 0,
        "task": "default",
        "prompt": [{"role": "user", "content": "guess"}],
        "completion": [{"role": "assistant", "content": "42"}],
        "answer": "42",
        "reward": reward,
        "metrics": {"win": reward},
        "stop_reason": "completed",
        "timing": {"total_ms": 5.0},
    }
    return {**base, **fields}
