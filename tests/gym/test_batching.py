"""Batched infos: the same dict as Gymnasium's own `VectorEnv._add_info` builds."""

from __future__ import annotations

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
    except Exception as exc:  # e.g. a dict after a number: fails the same way here
        with pytest.raises(type(exc)):
            batch_infos(batch, len(batch))
        return
    assert_same(batch_infos(batch, len(batch)), want)


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
