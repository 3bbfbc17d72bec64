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

#: Value types that always go into an object array (checked first: the common ones).
_OBJECT_TYPES = frozenset({str, list, tuple, type(None)})


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
    try:
        signature = tuple(map(tuple, infos))  # each info's keys, in order
    except TypeError:  # a None among them
        signature = tuple([tuple(info) if info else () for info in infos])
    columns = _layout(signature, n)
    if columns is None:
        return None
    out: dict[str, Any] = {}
    for key, where in columns:
        if where is None:  # every sub-env has the key (the usual case)
            values = [info[key] for info in infos]  # type: ignore[index]
        else:
            values = [infos[i][key] for i in where]  # type: ignore[index]
        kind = type(values[0])
        kinds = set(map(type, values)) if len(values) > 1 else {kind}
        if key == "final_obs":
            array: Any = _objects(where, values, n)
        elif len(kinds) == 1 and kind in _OBJECT_TYPES:  # (a shortcut for the usual kinds)
            array = _objects(where, values, n)
        elif len(kinds) > 1 and any(issubclass(k, dict) for k in kinds):
            return None  # dicts and non-dicts under one key: _add_info's own quirks
        elif issubclass(kind, dict):
            if where is None:
                nested: list[Any] = values
            else:
                nested = [None] * n
                for i, value in zip(where, values, strict=False):  # (equal lengths)
                    nested[i] = value
            array = _batch(nested, n)
            if array is None:
                return None
        elif kind in _NUMBER_TYPES or issubclass(kind, np.number):
            # (numpy calls take positional arguments: parsing keywords costs more here)
            if where is None and len(kinds) == 1:
                array = np.array(values, kind)
            else:  # element by element, converting as _add_info's assignments do
                array = np.zeros(n, kind)
                for i, value in zip(range(n) if where is None else where, values, strict=False):
                    array[i] = value
        elif isinstance(values[0], np.ndarray):
            array = np.zeros((n, *values[0].shape), values[0].dtype)
            for i, value in zip(range(n) if where is None else where, values, strict=False):
                array[i] = value
        else:  # objects, each kept as it is
            array = _objects(where, values, n)
        out[key] = array
        out["_" + key] = _mask(where, n)
    return out


@functools.lru_cache(maxsize=256)
def _layout(
    signature: tuple[tuple[Any, ...], ...], n: int
) -> tuple[tuple[str, tuple[int, ...] | None], ...] | None:
    """The batch's keys in the order `_add_info` adds them (first appearance, sub-env by
    sub-env), each with the sub-envs that have it (None: all n); None when a key is not
    a plain string or starts with "_" (it could collide with a mask). Batches of one
    vector env repeat a few layouts, so each is worked out once."""
    keys = dict.fromkeys(chain.from_iterable(signature))
    columns = []
    for key in keys:
        if type(key) is not str or key.startswith("_"):
            return None
        where = tuple(i for i, info_keys in enumerate(signature) if key in info_keys)
        columns.append((key, None if len(where) == n else where))
    return tuple(columns)


def _objects(where: tuple[int, ...] | None, values: list[Any], n: int) -> np.ndarray:
    """An object array holding each value as it is (a list stays one element)."""
    if where is None:
        return np.fromiter(values, object, n)
    array = np.empty(n, object)  # every element None
    for i, value in zip(where, values, strict=False):  # (equal lengths)
        array[i] = value
    return array


def _mask(where: tuple[int, ...] | None, n: int) -> np.ndarray:
    """The boolean mask of the sub-envs in `where` (None: all), as a new array."""
    if where is None:
        return _constant_mask(n, -1).copy()  # a copy costs a fraction of np.ones
    if len(where) == 1:
        return _constant_mask(n, where[0]).copy()
    mask = np.zeros(n, np.bool_)
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
