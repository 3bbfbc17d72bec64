"""Batching the sub-envs' infos the way Gymnasium's vector envs do, at a fraction of the cost.

Gymnasium's `VectorEnv._add_info` folds one sub-env's info at a time into the batch:
every key becomes an array over the sub-envs (numbers as a numeric array of the first
value's type, dicts recursively as nested batches, anything else as an object array)
next to a boolean mask `_key` saying which sub-envs have it. It does so with a new
numpy array per key *per sub-env* (the mask's default is built on every call), which
for a game costs more than the game's move. `batch_infos` builds the same dict —
same keys in the same order, same dtypes, values and masks — from all the infos at
once, with one array per key. Unusual batches (a key beginning with "_", which could
collide with a mask; dicts and non-dicts under one key) are folded by Gymnasium's own
code, so even their quirks (and errors) stay the same.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np
from gymnasium.vector import VectorEnv

#: Value types Gymnasium batches into a numeric array of that type.
_NUMBER_TYPES = (int, float, bool)


def batch_infos(infos: Sequence[Mapping[str, Any] | None], num_envs: int) -> dict[str, Any]:
    """The batched info of `infos[i]` for each sub-env i (None: that sub-env has none).

    Equal to folding them in order with `VectorEnv._add_info`.
    """
    batched = _batch(infos, num_envs)
    if batched is None:
        return _folded(infos, num_envs)
    return batched


def _batch(infos: Sequence[Mapping[str, Any] | None], n: int) -> dict[str, Any] | None:
    """The fast path; None when the batch needs `_add_info`'s own handling."""
    indices = [i for i, info in enumerate(infos) if info]
    present: list[Mapping[str, Any]] = [infos[i] for i in indices]  # type: ignore[misc]
    if not present:
        return {}
    # Keys in order of first appearance, sub-env by sub-env: the order _add_info adds them.
    # When every info has the first one's keys (the usual step), those are the keys.
    keys: Any = present[0]
    dense = set(keys).issuperset(chain.from_iterable(present[1:]))
    if dense:
        dense = sum(map(len, present)) == len(keys) * len(present)
    if not dense:
        keys = dict.fromkeys(chain.from_iterable(present))
    full = len(indices) == n
    out: dict[str, Any] = {}
    for key in keys:
        if type(key) is not str or key.startswith("_"):
            return None  # a key that may collide with a mask: let _add_info decide
        if dense:
            values = [info[key] for info in present]
            where = indices
        else:
            values = [info[key] for info in present if key in info]
            where = (
                indices
                if len(values) == len(present)
                else [i for i, info in zip(indices, present, strict=True) if key in info]
            )
        everywhere = full and len(where) == n
        first = values[0]
        kind = type(first)
        kinds = set(map(type, values))
        if key == "final_obs":
            array: Any = _objects(where, values, n, everywhere)
        elif len(kinds) > 1 and any(issubclass(k, dict) for k in kinds):
            return None  # dicts and non-dicts under one key: _add_info's own quirks
        elif issubclass(kind, dict):
            nested: list[Any] = [None] * n
            for i, value in zip(where, values, strict=True):
                nested[i] = value
            array = _batch(nested, n)
            if array is None:
                return None
        elif kind in _NUMBER_TYPES or issubclass(kind, np.number):
            if everywhere and len(kinds) == 1:
                array = np.array(values, dtype=kind)
            else:  # element by element, converting as _add_info's assignments do
                array = np.zeros(n, dtype=kind)
                for i, value in zip(where, values, strict=True):
                    array[i] = value
        elif isinstance(first, np.ndarray):
            array = np.zeros((n, *first.shape), dtype=first.dtype)
            for i, value in zip(where, values, strict=True):
                array[i] = value
        else:
            # Objects, each kept as it is.
            array = _objects(where, values, n, everywhere)
        out[key] = array
        out["_" + key] = _mask(where, n, everywhere)
    return out


def _objects(indices: list[int], values: list[Any], n: int, everywhere: bool) -> np.ndarray:
    """An object array holding each value as it is (a list stays one element)."""
    if everywhere:
        return np.fromiter(values, dtype=object, count=n)
    array = np.empty(n, dtype=object)  # every element None
    for i, value in zip(indices, values, strict=True):
        array[i] = value
    return array


def _mask(where: list[int], n: int, everywhere: bool) -> np.ndarray:
    """The boolean mask of the sub-envs in `where`, as a new array."""
    if everywhere:
        return _constant_mask(n, -1).copy()  # a copy costs a fraction of np.ones
    if len(where) == 1:
        return _constant_mask(n, where[0]).copy()
    mask = np.zeros(n, dtype=np.bool_)
    for i in where:  # (indexing with the list costs more, for a few sub-envs)
        mask[i] = True
    return mask


@functools.lru_cache(maxsize=1024)
def _constant_mask(n: int, index: int) -> np.ndarray:
    """A read-only mask to copy: all n True (index -1), or only `index`; never handed out."""
    mask = np.ones(n, dtype=np.bool_) if index < 0 else np.zeros(n, dtype=np.bool_)
    mask[index] = True
    mask.flags.writeable = False
    return mask


class _Folder(VectorEnv):
    """Just enough of a vector env to run Gymnasium's `_add_info` on."""

    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs


def _folded(infos: Sequence[Mapping[str, Any] | None], n: int) -> dict[str, Any]:
    folder = _Folder(n)
    batched: dict[str, Any] = {}
    for i, info in enumerate(infos):
        if info:
            batched = folder._add_info(batched, dict(info), i)
    return batched


__all__ = ["batch_infos"]
