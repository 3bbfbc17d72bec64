"""The results side of a batch: its summary, metric columns, resumed groups and callback errors.

Split from `runner.py`: what a finished (or resumed) batch reports, built from the
per-rollout outputs `run_batch` keeps, apart from the scheduling that produced them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vfgym.errors import ResultCallbackError
from vfgym.results.jsonl import RESULTS_FILE
from vfgym.types import GenerateOutputs, State

NAN = float("nan")


def callback_error(
    errors: dict[int, BaseException],
    delivered: int,
    outputs: GenerateOutputs,
    results_path: str | Path | None,
) -> ResultCallbackError:
    """The error `run_batch` raises once every rollout is done when `on_result` raised."""
    first_index, first = next(iter(errors.items()))
    where = f" and written to {Path(results_path) / RESULTS_FILE}" if results_path else ""
    return ResultCallbackError(
        f"on_result raised for {len(errors)} of {delivered} results (first on rollout "
        f"{first_index}: {type(first).__name__}: {first}); every rollout still finished{where}, "
        "and this error's `outputs` holds what generate would have returned. "
        "Fix the callback, or catch exceptions inside it.",
        errors=errors,
        outputs=outputs,
    )


def metric_columns(scored: list[dict[str, float]]) -> dict[str, list[float]]:
    """One column per metric any rollout has, NaN where a rollout has none."""
    names: dict[str, None] = {}
    for metrics in scored:
        names.update(dict.fromkeys(metrics))
    return {name: [m.get(name, NAN) for m in scored] for name in names}


def summarize(rewards: list[float], states: list[State]) -> dict[str, Any]:
    """Counts and means for metadata and reports; errored rollouts counted apart."""
    ok = [
        r for r, s in zip(rewards, states, strict=True) if not s.get("error") and not math.isnan(r)
    ]
    return {
        "num_rollouts": len(states),
        "num_errored": sum(1 for s in states if s.get("error")),
        "num_truncated": sum(1 for s in states if s.get("is_truncated")),
        "avg_reward": (sum(ok) / len(ok)) if ok else None,
        "completion_tokens": sum(int(s.get("completion_tokens") or 0) for s in states),
    }


def incomplete_groups(finished: Mapping[int, Any], n: int, per: int) -> set[int]:
    """The rollouts of every group of `per` that `finished` (a resume's restored
    rows) does not hold whole: a group's rewards come from one `score_group` over
    the whole group, so such a group is played again in full."""
    replay: set[int] = set()
    if not finished:
        return replay
    for start in range(0, n, per):
        block = range(start, start + per)
        if any(i not in finished for i in block):
            replay.update(block)
    return replay
