"""Batched infos: the same dict as Gymnasium's own `VectorEnv._add_info` builds, each
value built when first read."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import VectorEnv
from hypothesis import given, settings
from hypothesis import strategies as st

from vfgym.gym.batching import batch_infos

KEYS = ["turn", "state", "messages", "metrics", "stop_reason", "final_obs", "x"]


leaves = st.one_of(
    st.integers(-5, 5),
    st.floats(-2, 2, allow_nan=False),
    st.booleans(),
    st.text(max_size=3),
    st.none(),
    st.lists(st.integers(0, 3), max_size=3),
    st.integers(0, 3).map(np.float32),
    st.integers(0, 3).map(lambda k: np.arange(2) + k),
)


values = st.recursive(
    leaves, lambda inner: st.dictionaries(st.sampled_from(KEYS), inner, max_size=3), max_leaves=6
)


infos = st.dictionaries(st.sampled_from(KEYS), values, max_size=5)


class Reference(VectorEnv):
    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs


def reference(batch: list[dict[str, Any] | None], n: int) -> dict[str, Any]:
    """Gymnasium's fold, one sub-env at a time (what SyncVectorEnv does)."""
    folder = Reference(n)
    out: dict[str, Any] = {}
    for i, info in enumerate(batch):
        if info:
            out = folder._add_info(out, info, i)
    return out


def assert_same(got: Any, want: Any) -> None:
    if type(want) is dict:  # a BatchedInfo, or a plain dict where Gymnasium folded
        assert isinstance(got, dict)
    else:
        assert type(got) is type(want)
    if isinstance(want, dict):
        assert list(got) == list(want)  # the same keys, in the same order
        for key in want:
            assert_same(got[key], want[key])
    elif isinstance(want, np.ndarray):
        assert got.dtype == want.dtype and got.shape == want.shape
        for a, b in zip(got.ravel(), want.ravel(), strict=True):
            if isinstance(b, np.ndarray):
                assert np.array_equal(a, b)
            else:
                assert type(a) is type(b) and (a == b or (a != a and b != b))
    else:
        assert got == want


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(st.none(), infos), min_size=1, max_size=5))
def test_batches_exactly_as_gymnasium_does(batch):
    try:
        want = reference(batch, len(batch))
    except Exception as exc:  # e.g. a dict after a number: reading fails the same way
        with pytest.raises(type(exc)):
            read_all(batch_infos(batch, len(batch)))
        return
    assert_same(batch_infos(batch, len(batch)), want)


def read_all(batch: Any) -> None:
    """Read every value of a batch, nested ones too."""
    for value in dict(batch).values():
        if isinstance(value, dict):
            read_all(value)


def test_the_adapters_infos_batch_as_in_gymnasium():
    step = {"state": object(), "messages": [{"role": "user", "content": "hi"}], "turn": 2}
    end = {
        **step,
        "stop_reason": "completed",
        "episode_reward": 1.0,
        "metrics": {"win": 1.0, "turns": 3.0},
    }
    final = {"final_obs": "bye", "final_info": end, **step}
    for batch in ([step] * 4, [step, end, None, step], [final, step, step, end], [None] * 3):
        assert_same(batch_infos(batch, len(batch)), reference(batch, len(batch)))
    batched = batch_infos([step, end, None, step], 4)
    assert batched["_stop_reason"].tolist() == [False, True, False, False]
    assert batched["metrics"]["win"].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert batched["messages"][0] is step["messages"]  # a list stays one element


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), infos), min_size=1, max_size=5), st.randoms())
def test_reading_some_values_first_changes_nothing(batch, rng):
    """Values are built in whatever order they are read, a few or all, and the batch
    then equals Gymnasium's fold (whose own quirks a quirky column brings in)."""
    try:
        want = reference(batch, len(batch))
    except Exception:
        return  # covered above
    got = batch_infos(batch, len(batch))
    keys = list(got)
    for key in rng.sample(keys, rng.randrange(len(keys) + 1)):
        if key in got:  # (a quirky column folds the batch: keys may change)
            got[key]
    assert_same(got, want)


STEP = {"state": ("a", "State"), "messages": [{"role": "user", "content": "hi"}], "turn": 2}


END = {
    **STEP,
    "stop_reason": "completed",
    "episode_reward": 1.0,
    "metrics": {"win": 1.0, "turns": 3.0},
}


FINAL = {"final_obs": "bye", "final_info": END, **STEP}


def step_batch() -> dict[str, Any]:
    return batch_infos([FINAL, STEP, STEP, END], 4)


def test_a_batch_is_a_dict_to_every_reader():
    want = reference([FINAL, STEP, STEP, END], 4)
    for read in (
        dict,
        lambda b: {**b},
        lambda b: (lambda **kw: kw)(**b),
        lambda b: {}.__or__(b),
        lambda b: {} | b,
        lambda b: b | {},
        lambda b: dict(b.items()),
        lambda b: dict(zip(b.keys(), b.values(), strict=True)),
        lambda b: {k: b.get(k) for k in b},
        lambda b: copy.copy(b),
        lambda b: copy.deepcopy(b),
        lambda b: pickle.loads(pickle.dumps(b)),
        lambda b: b.copy(),
    ):
        assert_same(read(step_batch()), want)
    batch = step_batch()
    assert batch == batch.copy() and step_batch() != {}
    with pytest.raises(ValueError, match="ambiguous"):  # arrays, as in Gymnasium's dict
        step_batch() == want  # noqa: B015
    assert repr(step_batch()) == repr(want)
    assert len(step_batch()) == len(want) and list(step_batch()) == list(want)
    assert step_batch().get("missing", 7) == 7
    with pytest.raises(KeyError):
        step_batch()["missing"]


def test_a_batch_changes_as_a_dict_does():
    batch = step_batch()
    assert batch.pop("turn").tolist() == [2, 2, 2, 2]
    assert "turn" not in batch and batch.pop("turn", None) is None
    assert batch.setdefault("_turn", 5) is not None  # (still there: only "turn" went)
    assert batch.setdefault("extra", 5) == 5
    batch["state"] = "mine"
    del batch["messages"]
    key, value = batch.popitem()
    assert key == "extra" and value == 5
    assert batch["state"] == "mine" and "messages" not in batch
    assert batch["final_info"]["metrics"]["win"].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert batch["metrics"]["win"].tolist() == [0.0, 0.0, 0.0, 1.0]
    empty = type(batch)()
    assert empty == {} and type(batch)(a=1)["a"] == 1


def test_a_quirky_column_folds_the_batch_keeping_the_callers_keys():
    """A key holding a dict in one sub-env and a number in another is folded by
    Gymnasium's own code when read; keys the caller set stay."""
    batch = [{"a": 1, "b": {"x": 1}}, {"a": 2, "b": 3}]
    got = batch_infos(batch, 2)
    assert got["a"].tolist() == [1, 2]
    got["mine"] = "kept"
    got["b"]
    want = reference(batch, 2)
    assert got.pop("mine") == "kept"
    assert_same(got, want)


def test_gymnasiums_dict_info_to_list_reads_a_batch():
    from gymnasium.wrappers.vector import DictInfoToList

    class Batches(VectorEnv):
        num_envs = 4

        def step(self, actions: Any) -> Any:
            return None, None, None, None, step_batch()

    want = DictInfoToList(Batches())._convert_info_to_list(reference([FINAL, STEP, STEP, END], 4))
    got = DictInfoToList(Batches()).step(None)[4]
    assert [list(info) for info in got] == [list(info) for info in want]
    assert got[0]["final_info"]["metrics"]["win"] == 1.0
    assert got[3]["episode_reward"] == 1.0 and "episode_reward" not in got[1]


class _Reference(VectorEnv):
    """Just enough of a vector env to run Gymnasium's own `_add_info` on."""

    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs


def _gymnasium_fold(infos: list[dict[str, Any]]) -> dict[str, Any]:
    folder = _Reference(len(infos))
    out: dict[str, Any] = {}
    for i, info in enumerate(infos):
        out = folder._add_info(out, info, i)
    return out


def test_a_quirky_column_read_later_keeps_the_callers_edits_deletions_and_values():
    """A plain dict keeps whatever its reader did to it; reading a column that only
    Gymnasium's fold builds (a dict in one sub-env, a number in another) must not
    bring back deleted keys, undo in-place edits or replace values the caller set."""
    infos = [{"turn": 1, "quirky": {"x": 1}, "gone": 5, "mine": 7}, {"turn": 2, "quirky": 3}]
    want = _gymnasium_fold(infos)
    batch = batch_infos(infos, 2)
    turn = batch["turn"]
    turn[0] = 99  # in place, as `infos["turn"] += 1` would
    del batch["gone"]
    batch["mine"] = "replaced"
    batch["added"] = "kept"

    quirky = batch["quirky"]  # built by Gymnasium's own fold
    assert batch["turn"] is turn and batch["turn"].tolist() == [99, 2]
    assert "gone" not in batch and "_gone" in batch
    assert batch["mine"] == "replaced" and batch["added"] == "kept"
    assert list(batch) == [k for k in want if k != "gone"] + ["added"]
    assert batch["_mine"].tolist() == [True, False]
    assert list(quirky) == list(want["quirky"]) and quirky[1] == 3
    assert np.array_equal(quirky["x"], want["quirky"]["x"])
