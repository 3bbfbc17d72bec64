"""Batching the sub-envs' infos the way Gymnasium's vector envs do, each column when first read.

Gymnasium's vector envs return one info dict for the batch: every key becomes an array over
the sub-envs (numbers as a numeric array of the first value's type, dicts recursively as
nested batches, anything else as an object array) next to a boolean mask `_key` saying which
sub-envs have it. `VectorEnv._add_info` builds it one sub-env at a time. For a text game
that costs more than the game's move: the last step of an episode alone carries some thirty
arrays (its State, messages, reward and each metric, each with a mask), and a training loop
reads a few of them, if any.

`batch_infos` returns a `BatchedInfo`: a dict with exactly the keys Gymnasium's fold gives,
in its order, whose values are built when first read — by indexing, `get`, `values`,
`items`, unpacking into another dict, `==`, `repr` (and `pprint`, which lays a batch out as
a dict), copying or pickling — and are then equal to the fold's (same dtypes, values and
masks; nested batches are `BatchedInfo`s too). A loop pays for the columns it reads; reading
them all costs what building them at once did. The sub-envs' infos it reads from are new
dicts each step, which nothing changes afterwards.

Unusual batches are folded by Gymnasium's own code, so even their quirks (and errors) stay
the same: at once when a key could collide with a mask (a key that is not a string, or
begins with "_"); when first read when a column is one the fast path does not build (dicts
and non-dicts under one key, or values numpy will not convert as Gymnasium's assignments
would).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import chain, repeat
from operator import itemgetter
from typing import Any, cast

import numpy as np
from gymnasium.vector import VectorEnv

#: Value types Gymnasium batches into a numeric array of that type.
_NUMBER_TYPES = (int, float, bool)

#: `map(isinstance, values, _DICTS)`: which values are dicts (as `_add_info` asks).
_DICTS = repeat(dict)

#: The value of a key whose column is not built yet.
#: Each info's keys, in order: `tuple`, typed for infos already checked to hold no None
#: (a name of the module's, so looking it up costs what looking up `tuple` did).
_keys_of = cast("Callable[[Mapping[str, Any] | None], tuple[str, ...]]", tuple)

_PENDING: Any = object()

#: What `_column` returns for a column only Gymnasium's fold builds faithfully.
_FOLD: Any = object()

Infos = Sequence[Mapping[str, Any] | None]

#: One column of a batch: its key, its mask's key, the sub-envs that have it (None: all;
#: an int: that one alone), the (read-only) mask of those, which the batch gets a copy
#: of, and `itemgetter(key)`, which reads every info's value in one C call.
Column = tuple[str, str, tuple[int, ...] | int | None, np.ndarray, Callable[[Any], Any]]


class _Layout:
    """A batch's columns, and what a `BatchedInfo` over them starts from: every key (the
    columns' and their masks', in Gymnasium's order) pending, and each key's column."""

    __slots__ = ("columns", "pending", "sources")

    def __init__(self, columns: Sequence[Column]) -> None:
        self.columns = tuple(columns)
        self.pending: dict[str, Any] = {}
        #: key -> (its column, whether the key is the column's mask)
        self.sources: dict[str, tuple[Column, bool]] = {}
        for column in self.columns:
            key, mask_key = column[0], column[1]
            self.pending[key] = self.pending[mask_key] = _PENDING
            self.sources[key] = (column, False)
            self.sources[mask_key] = (column, True)


def batch_infos(infos: Infos, num_envs: int) -> dict[str, Any]:
    """The batched info of `infos[i]` for each sub-env i (None: that sub-env has none).

    Equal to folding them in order with `VectorEnv._add_info`, each value built when
    first read (see the module docstring).
    """
    infos = tuple(infos)
    if None in infos:  # sub-envs without an info (a partial reset, a nested batch)
        signature = tuple([tuple(info) if info else () for info in infos])
    else:
        signature = tuple(map(_keys_of, infos))  # each info's keys, in order
    return _batch_over(infos, num_envs, _layout(signature, num_envs))


def _batch_over(infos: tuple[Any, ...], n: int, layout: _Layout | None) -> dict[str, Any]:
    """The batch of `infos` with `layout` (None: Gymnasium folds it, at once)."""
    if layout is None:
        return _folded(infos, n)
    if not layout.columns:
        return {}
    return BatchedInfo._over(infos, n, layout)


class _DictRepr:
    """`BatchedInfo.__repr__`: on a batch, the repr of its built values; on the class,
    `dict.__repr__` itself.

    Why: `pprint` lays a mapping out key by key, sorted, only when its type's
    `__repr__` is `dict.__repr__` (it reads the values through `items()`, which builds
    them); any other `__repr__` it prints whole, on one line, unsorted. A repr that
    were `dict.__repr__` on the batch too would print the values not built yet as
    placeholders, so `repr(batch)` (which looks `__repr__` up through this descriptor
    with the batch) gets the repr that builds them, and `pprint` (which looks it up on
    the class) the dict's layout. Nothing is built before something prints the batch.
    """

    def __init__(self, method: Callable[[BatchedInfo], str]) -> None:
        self.method = method

    def __get__(self, batch: BatchedInfo | None, owner: type | None = None) -> Any:
        if batch is None:
            return dict.__repr__
        return self.method.__get__(batch, owner)


class BatchedInfo(dict[str, Any]):
    """A vector env's batched info (see `batch_infos`): a dict whose values are built
    from the sub-envs' infos when first read. Setting and deleting keys work as on any
    dict; `copy()`, `copy.copy` and pickling give a plain dict with every value built."""

    __slots__ = ("_columns", "_infos", "_num_envs", "_sources")

    _columns: tuple[Column, ...]
    _infos: tuple[Mapping[str, Any] | None, ...]
    _num_envs: int
    _sources: dict[str, tuple[Column, bool]]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """A batch with every value given, as `dict(...)` takes them (for code that
        makes an empty one with `type(batch)()`); vector envs make theirs pending."""
        super().__init__(*args, **kwargs)
        self._columns = ()
        self._infos = ()
        self._num_envs = 0
        self._sources = {}

    @classmethod
    def _over(cls, infos: tuple[Any, ...], num_envs: int, layout: _Layout) -> BatchedInfo:
        batch = dict.__new__(cls)
        dict.update(batch, layout.pending)
        batch._columns = layout.columns
        batch._infos = infos
        batch._num_envs = num_envs
        batch._sources = layout.sources
        return batch

    # Reading one value builds it.

    def __getitem__(self, key: str) -> Any:
        value = dict.__getitem__(self, key)
        if value is _PENDING:
            value = self._build(key)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key in self:
            return self[key]
        dict.__setitem__(self, key, default)
        return default

    def pop(self, key: str, *default: Any) -> Any:
        if key in self:
            value = self[key]
            dict.__delitem__(self, key)
            return value
        return dict.pop(self, key, *default)

    # Reading them all builds them all.

    def __iter__(self) -> Iterator[str]:
        # Overridden (to the same keys) so that `dict(batch)`, `{**batch}`, `f(**batch)`
        # and `d.update(batch)` read the values through `__getitem__`, not the storage.
        return dict.__iter__(self)

    def values(self) -> Any:
        self._build_all()
        return dict.values(self)

    def items(self) -> Any:
        self._build_all()
        return dict.items(self)

    def popitem(self) -> tuple[str, Any]:
        self._build_all()
        return dict.popitem(self)

    def copy(self) -> dict[str, Any]:
        self._build_all()
        return dict(dict.items(self))

    def __copy__(self) -> dict[str, Any]:
        return self.copy()

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return copy.deepcopy(self.copy(), memo)

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return dict, (self.copy(),)

    def __eq__(self, other: object) -> bool:
        self._build_all()
        if isinstance(other, BatchedInfo):
            other._build_all()
        return dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __or__(self, other: Any) -> Any:
        self._build_all()
        return dict.__or__(self.copy(), other)

    def __ror__(self, other: Any) -> Any:
        self._build_all()
        return dict.__or__(other, self.copy()) if isinstance(other, dict) else NotImplemented

    def _built_repr(self) -> str:
        self._build_all()
        return dict.__repr__(self)

    __repr__ = _DictRepr(_built_repr)  # type: ignore[assignment]

    @classmethod
    def fromkeys(cls, keys: Any, value: Any = None) -> dict[str, Any]:  # type: ignore[override]
        return dict.fromkeys(keys, value)

    # Building.

    def _build(self, key: str) -> Any:
        column, is_mask = self._sources[key]
        if is_mask:
            value = column[3].copy()  # (a copy costs a fraction of np.zeros)
        else:
            try:
                value = _column(self._infos, self._num_envs, column)
            except Exception:  # a value _add_info converts its own way, or fails on
                value = _FOLD
            if value is _FOLD:
                self._fold()
                return dict.__getitem__(self, key)
        dict.__setitem__(self, key, value)
        return value

    def _build_all(self) -> None:
        """Build every value still pending, column by column (`_build`'s work without
        its lookups: reading a whole batch costs about what building it at once did)."""
        infos, n, get, put = self._infos, self._num_envs, dict.get, dict.__setitem__
        for column in self._columns:
            key, mask_key = column[0], column[1]
            if get(self, key) is _PENDING:
                try:
                    value = _column(infos, n, column)
                except Exception:  # as in `_build`
                    value = _FOLD
                if value is _FOLD:
                    self._fold()
                    return
                put(self, key, value)
            if get(self, mask_key) is _PENDING:
                put(self, mask_key, column[3].copy())
        self._columns = ()  # nothing is pending now

    def _fold(self) -> None:
        """Fill every value still pending from Gymnasium's own fold of the batch (which
        raises as Gymnasium does, leaving the batch as it was).

        Only the pending ones: as in a plain dict, what the caller did to the batch
        stays — values already read (and perhaps changed in place), keys set or
        deleted. (The fold's other values equal them: each column is built alone.)"""
        folded = _folded(self._infos, self._num_envs)
        pending = [key for key, value in dict.items(self) if value is _PENDING]
        for key in pending:
            dict.__setitem__(self, key, folded[key])
        self._sources = {}
        self._columns = ()


def _column(infos: Infos, n: int, column: Column) -> Any:
    """The array (or nested batch) of one column, or `_FOLD`."""
    key, _, where, _, get = column
    if isinstance(where, int):  # one sub-env has the key: the usual end of an episode
        return _one(infos[where][key], where, n, key)  # type: ignore[index]
    if where is None:  # every sub-env has the key (the usual case)
        values = list(map(get, infos))
    else:
        values = [infos[i][key] for i in where]  # type: ignore[index]
    kind = type(values[0])
    if key == "final_obs":
        return _objects(where, values, n)
    if any(map(isinstance, values, _DICTS)):  # (all in C: the cheapest check)
        if not all(map(isinstance, values, _DICTS)):
            return _FOLD  # dicts and non-dicts under one key: _add_info's own quirks
        return batch_infos(values if where is None else _spread(where, values, n), n)
    if kind in _NUMBER_TYPES or issubclass(kind, np.number):
        # An array of the first value's type, the others converted to it as
        # _add_info's assignments convert them. (numpy calls take positional
        # arguments: parsing keywords costs more than the call here.)
        if where is None:
            return np.array(values, kind)
        array = np.zeros(n, kind)
    elif isinstance(values[0], np.ndarray):
        array = np.zeros((n, *values[0].shape), values[0].dtype)
    else:  # objects, each kept as it is
        return _objects(where, values, n)
    for i, value in zip(range(n) if where is None else where, values, strict=False):
        array[i] = value
    return array


def _one(value: Any, i: int, n: int, key: str) -> Any:
    """The column of a key only sub-env i has: `_column`'s cases for a single value,
    without the lists and checks that several values need."""
    kind = type(value)
    if key == "final_obs":
        array = np.empty(n, object)
    elif isinstance(value, dict):
        spread = tuple(_spread((i,), (value,), n))
        return _batch_over(spread, n, _layout_of_one(tuple(value), i, n))
    elif kind in _NUMBER_TYPES or issubclass(kind, np.number):
        array = np.zeros(n, kind)
    elif isinstance(value, np.ndarray):
        array = np.zeros((n, *value.shape), value.dtype)
    else:
        array = np.empty(n, object)  # every element None
    array[i] = value
    return array


def _spread(where: Sequence[int], values: Sequence[Any], n: int) -> list[Any]:
    """n slots, `values[k]` at `where[k]` and None elsewhere."""
    spread: list[Any] = [None] * n
    for i, value in zip(where, values, strict=False):  # (equal lengths)
        spread[i] = value
    return spread


def _plain_key(key: Any) -> bool:
    """A key `_add_info` batches as the fast path does: a string that cannot collide with
    a mask's key (which begins with "_")."""
    return type(key) is str and not key.startswith("_")


@functools.lru_cache(maxsize=1024)
def _layout(signature: tuple[tuple[Any, ...], ...], n: int) -> _Layout | None:
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
    return _Layout(columns)


@functools.lru_cache(maxsize=1024)
def _layout_of_one(keys: tuple[Any, ...], i: int, n: int) -> _Layout | None:
    """`_layout` of a (nested) batch where sub-env i alone has an info, with `keys`: an
    episode's final info, its metrics. Cached by the keys, not the n-long signature."""
    return _layout(tuple(keys if j == i else () for j in range(n)), n)


def _objects(where: tuple[int, ...] | None, values: list[Any], n: int) -> np.ndarray:
    """An object array holding each value as it is (a list stays one element)."""
    if where is None:
        return np.fromiter(values, object, n)
    array = np.empty(n, object)  # every element None
    for i, value in zip(where, values, strict=False):  # (equal lengths)
        array[i] = value
    return array


class _Folder(VectorEnv):
    """Just enough of a vector env to run Gymnasium's `_add_info` on."""

    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs


def _folded(infos: Infos, n: int) -> dict[str, Any]:
    folder = _Folder(n)
    batched: dict[str, Any] = {}
    for i, info in enumerate(infos):
        if info:
            batched = folder._add_info(batched, dict(info), i)
    return batched


__all__ = ["BatchedInfo", "batch_infos"]
