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
code, so even their quirks (and errors) stay the same; so is any batch the fast path
fails on.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from itertools import chain, repeat
from operator import itemgetter
from typing import Any

import numpy as np
from gymnasium.vector import VectorEnv

#: Value types Gymnasium batches into a numeric array of that type.
_NUMBER_TYPES = (int, float, bool)

#: `map(isinstance, values, _DICTS)`: which values are dicts (as `_add_info` asks).
_DICTS = repeat(dict)


def batch_infos(infos: Sequence[Mapping[str, Any] | None], num_envs: int) -> dict[str, Any]:
    """The batched info of `infos[i]` for each sub-env i (None: that sub-env has none).

    Equal to folding them in order with `VectorEnv._add_info`.
    """
    try:
        batched = _batch(infos, num_envs)
    except Exception:  # a value _add_info may convert differently, or fail on its own way
        batched = None
    if batched is None:
        return _folded(infos, num_envs)
    return batched


def _batch(infos: Sequence[Mapping[str, Any] | None], n: int) -> dict[str, Any] | None:
    """The fast path; None when the batch needs `_add_info`'s own handling."""
    gaps = None in infos  # sub-envs without an info (a partial reset, a nested batch)
    first = infos[0] if infos else None
    # Every info as long as the first, and (checked as the values are read) holding its
    # keys: all have the same keys, in the first one's order. The usual step, told
    # apart without working out the layout.
    if not gaps and first and sum(map(len, infos)) == len(first) * n:  # type: ignore[arg-type]
        columns = _shared_layout(tuple(first), n)  # type: ignore[arg-type]
        if columns is None:
            return None
        batched = _columns(infos, n, columns)
        if batched is not _MISSING:
            return batched  # type: ignore[return-value]
    if gaps:
        signature = tuple([tuple(info) if info else () for info in infos])
    else:
        signature = tuple(map(tuple, infos))  # each info's keys, in order
    columns = _layout(signature, n)
    if columns is None:
        return None
    return _columns(infos, n, columns)  # type: ignore[return-value]


#: What `_columns` returns when an info lacks a key it was told every info has.
_MISSING = object()


#: One column of a batch: its key, its mask's key, the sub-envs that have it (None: all;
#: an int: that one alone), the (read-only) mask of those, which the batch gets a copy
#: of, and `itemgetter(key)`, which reads every info's value in one C call.
Column = tuple[str, str, tuple[int, ...] | int | None, np.ndarray, Callable[[Any], Any]]


def _columns(
    infos: Sequence[Mapping[str, Any] | None], n: int, columns: Sequence[Column]
) -> dict[str, Any] | object | None:
    """The batch of `columns` (from `_layout` or `_shared_layout`, so plain keys)."""
    out: dict[str, Any] = {}
    for key, mask_key, where, mask, get in columns:
        if type(where) is int:  # one sub-env has the key: the usual end of an episode
            array = _one(infos[where][key], where, n, key)  # type: ignore[index]
            if array is None:
                return None
            out[key] = array
            out[mask_key] = mask.copy()
            continue
        if where is None:  # every sub-env has the key (the usual case)
            try:
                values = list(map(get, infos))
            except KeyError:
                return _MISSING
        else:
            values = [infos[i][key] for i in where]  # type: ignore[index]
        kind = type(values[0])
        if key == "final_obs":
            array: Any = _objects(where, values, n)
        elif any(map(isinstance, values, _DICTS)):  # (all in C: the cheapest check)
            if not all(map(isinstance, values, _DICTS)):
                return None  # dicts and non-dicts under one key: _add_info's own quirks
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
            # An array of the first value's type, the others converted to it as
            # _add_info's assignments convert them. (numpy calls take positional
            # arguments: parsing keywords costs more than the call here.)
            if where is None:
                array = np.array(values, kind)
            else:
                array = np.zeros(n, kind)
                for i, value in zip(where, values, strict=False):  # (equal lengths)
                    array[i] = value
        elif isinstance(values[0], np.ndarray):
            array = np.zeros((n, *values[0].shape), values[0].dtype)
            for i, value in zip(range(n) if where is None else where, values, strict=False):
                array[i] = value
        else:  # objects, each kept as it is
            array = _objects(where, values, n)
        out[key] = array
        out[mask_key] = mask.copy()  # (a copy costs a fraction of np.ones)
    return out


def _one(value: Any, i: int, n: int, key: str) -> Any:
    """The column of a key only sub-env i has: `_columns`' cases for a single value,
    without the lists and checks that several values need."""
    kind = type(value)
    if key == "final_obs":
        array = np.empty(n, object)
    elif isinstance(value, dict):
        nested: list[Any] = [None] * n
        nested[i] = value
        keys = tuple(value)
        columns = _layout_of_one(keys, i, n) if keys else None
        return None if columns is None else _columns(nested, n, columns)
    elif kind in _NUMBER_TYPES or issubclass(kind, np.number):
        array = np.zeros(n, kind)
    elif isinstance(value, np.ndarray):
        array = np.zeros((n, *value.shape), value.dtype)
    else:
        array = np.empty(n, object)  # every element None
    array[i] = value
    return array


@functools.lru_cache(maxsize=1024)
def _layout_of_one(keys: tuple[Any, ...], i: int, n: int) -> tuple[Column, ...] | None:
    """The columns of a (nested) batch where sub-env i alone has an info, with `keys`."""
    return _layout(tuple(keys if j == i else () for j in range(n)), n)


def _plain_key(key: Any) -> bool:
    """A key `_add_info` batches as the fast path does: a string that cannot collide with
    a mask's key (which begins with "_")."""
    return type(key) is str and not key.startswith("_")


@functools.lru_cache(maxsize=256)
def _shared_layout(keys: tuple[Any, ...], n: int) -> tuple[Column, ...] | None:
    """The columns of a batch whose infos all have `keys`, in that order; None when a
    key is not plain (`_add_info` then decides)."""
    if not all(map(_plain_key, keys)):
        return None
    every = _all_true(n)
    return tuple((key, "_" + key, None, every, itemgetter(key)) for key in keys)


@functools.lru_cache(maxsize=256)
def _layout(signature: tuple[tuple[Any, ...], ...], n: int) -> tuple[Column, ...] | None:
    """The batch's keys in the order `_add_info` adds them (first appearance, sub-env by
    sub-env), each with the sub-envs that have it (None: all n) and their mask; None
    when a key is not a plain string or starts with "_" (it could collide with a mask).
    Batches of one vector env repeat a few layouts, so each is worked out once."""
    keys = dict.fromkeys(chain.from_iterable(signature))
    columns = []
    for key in keys:
        if not _plain_key(key):
            return None
        where = tuple(i for i, info_keys in enumerate(signature) if key in info_keys)
        mask = np.zeros(n, dtype=np.bool_)
        mask[list(where)] = True
        mask.flags.writeable = False
        column_where = None if len(where) == n else where[0] if len(where) == 1 else where
        columns.append((key, "_" + key, column_where, mask, itemgetter(key)))
    return tuple(columns)


def _objects(where: tuple[int, ...] | None, values: list[Any], n: int) -> np.ndarray:
    """An object array holding each value as it is (a list stays one element)."""
    if where is None:
        return np.fromiter(values, object, n)
    array = np.empty(n, object)  # every element None
    for i, value in zip(where, values, strict=False):  # (equal lengths)
        array[i] = value
    return array


@functools.lru_cache(maxsize=64)
def _all_true(n: int) -> np.ndarray:
    """A read-only mask of n Trues to copy; never handed out."""
    mask = np.ones(n, dtype=np.bool_)
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
