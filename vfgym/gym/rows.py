"""Which dataset row a `GymEnv` reset starts from, and a fresh copy of it.

A layer of `GymEnv` (see `vfgym.gym.env`). A reset either takes the row
`options["index"]` names (checked before anything changes) or draws one from the
env's `np_random`, so the rows an agent sees are a function of the seed; each row's
fields are read once and kept (`Row`), since a reset copies them every time.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import numpy as np

from vfgym.engine.data import fresh_copy
from vfgym.gym.copying import Copying
from vfgym.gym.episode import Observation
from vfgym.types import Messages

#: How many dataset rows a GymEnv keeps read (see `_row_args`).
ROWS_KEPT = 4096


#: Keys `reset(options=...)` understands.
RESET_OPTIONS = frozenset({"index"})


class RowDrawing(Copying):
    """Picking, drawing and copying the dataset row a reset starts from."""

    __slots__ = ()

    def _row_args(self, index: int) -> tuple[Messages, Any, str, dict[str, Any], int]:
        """A fresh copy of dataset row `index`'s prompt, answer, task, info and example id."""
        row = self._row_cache.get(index) or self._cached_row(index)
        prompt = row.prompt
        if row.chat:
            prompt = list(map(dict, prompt))
        info = dict(row.info) if row.flat_info else fresh_copy(row.info)
        return prompt, row.answer, row.task, info, row.example_id

    def _cached_row(self, index: int) -> Row:
        """Dataset row `index` as a reset reads it, kept for the next reset that draws it."""
        if len(self._row_cache) >= ROWS_KEPT:
            self._row_cache.clear()
        row = self._row_cache[index] = Row(self.rows[index])
        return row

    def _chosen_row(self, options: Any) -> int | None:
        """The dataset row `reset(options=...)` picks (None: draw one), or an error
        saying what is wrong with the options; checked before a reset changes anything
        (the seed, the running episode), so a typo loses nothing."""
        if not isinstance(options, Mapping):
            raise TypeError(
                f"reset() options must be a dict such as {{'index': 3}} (or None), not "
                f"{type(options).__name__}"
            )
        unknown = set(options) - RESET_OPTIONS
        if unknown:
            raise ValueError(
                f"reset() got unknown option(s) {sorted(unknown)}; it understands "
                f"{sorted(RESET_OPTIONS)} (options={{'index': i}} picks dataset row i)"
            )
        if "index" not in options:
            return None
        index = options["index"]
        if isinstance(index, bool) or not isinstance(index, int | np.integer):
            raise TypeError(f"options['index'] must be an int, not {index!r}")
        if not -len(self.rows) <= index < len(self.rows):
            raise IndexError(
                f"options['index']={index} is outside the {len(self.rows)} dataset rows"
            )
        return int(index) % len(self.rows)

    def _drawn_row(self) -> int:
        """A dataset row drawn for a reset that picks none."""
        # The draw comes from a Python generator seeded by one draw of `np_random`, made
        # again whenever `np_random` is another generator (reseeded by `reset(seed=...)`,
        # or set by the user): the rows stay a function of the seed, and a draw costs a
        # tenth of numpy's. A uniform float scaled to the row count: the bias (below
        # 2**-30 for up to 2**23 rows) is far beyond anything a dataset could show.
        source = self._np_random
        if source is None or source is not self._row_rng_source:
            source = self.np_random  # made (randomly seeded) on first use
            self._row_rng = random.Random(int(source.integers(2**63)))
            self._row_rng_source = source
        return int(self._row_rng.random() * len(self.rows))  # type: ignore[union-attr]


class Row:
    """A dataset row's fields as a reset copies them, read from the row once."""

    __slots__ = (
        "answer",
        "chat",
        "example_id",
        "flat_info",
        "info",
        "prompt",
        "shown",
        "task",
    )

    def __init__(self, row: Mapping[str, Any]) -> None:
        #: The prompt the last reset of this row showed (a copy) and its observation.
        self.shown: tuple[Messages, Observation] | None = None
        self.prompt = row["prompt"]
        self.chat = isinstance(self.prompt, list)
        self.answer = row["answer"]
        self.task = row["task"]
        self.info = row["info"]
        self.example_id = row["example_id"]
        # Only scalars inside: a shallow copy is a fresh copy.
        self.flat_info = type(self.info) is dict and all(
            type(v) in _FLAT for v in self.info.values()
        )


#: Value types a flat `info` holds (immutable, so `dict(info)` copies it fully).
_FLAT = frozenset({str, int, float, bool, type(None)})
