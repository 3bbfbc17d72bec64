"""An environment's dataset rows: columns renamed, a slice taken, an empty dataset refused.

Split from `environment.py`, which keeps the dataset methods themselves
(`format_dataset`, `get_dataset`, `get_eval_dataset`); these are the row-level
steps they share.
"""

from __future__ import annotations

import random
from typing import Any

from vfgym.engine.data import row_count


def renamed_columns(
    row: dict[str, Any], index: int, question_key: str, answer_key: str
) -> dict[str, Any]:
    """A row whose question and answer columns carry the standard names."""
    out = dict(row)
    for key, standard in ((question_key, "question"), (answer_key, "answer")):
        if key == standard or ("prompt" in out and standard == "question"):
            continue
        if key not in out:
            raise ValueError(
                f"dataset row {index} has no {key!r} column (its columns: {sorted(out)})"
            )
        out[standard] = out.pop(key)
    return out


def no_rows_message(env_name: str, name: str) -> str:
    """The error for an environment whose `name` ("dataset", "eval_dataset") is empty."""
    return (
        f"{env_name}'s {name} has no rows; give it at least one row (a dict with a "
        "'question' or a 'prompt')"
    )


def take_rows(rows: list[dict[str, Any]], n: Any, seed: int | None) -> list[dict[str, Any]]:
    """The first `n` of `rows` (shuffled by `seed` first) as a new list."""
    count = row_count(n)
    if seed is not None:
        rows = list(rows)
        random.Random(seed).shuffle(rows)
        return rows if count is None else rows[:count]
    return list(rows) if count is None else rows[:count]
