"""The Gym adapter's core (GymEnv, GymVectorEnv, batched infos) as a Gymnasium user
meets it: defects found by probing its edges, each pinned by a test that failed
before the fix."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gym_test_envs import GuessEnv
from gymnasium.vector import VectorEnv

from vfgym.gym import GymEnv
from vfgym.gym.batching import batch_infos


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


# ------------------------------------------ a batch keeps what the caller changed


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


# ------------------------------------------- close releases a sync aclose() too


class _SyncReleaseGuess(GuessEnv):
    """An environment whose `aclose()` releases what it holds without waiting."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.released = 0

    def aclose(self) -> None:
        self.released += 1


def test_close_releases_an_environment_whose_aclose_is_sync():
    """`GymEnv.aclose()` accepts an environment's sync `aclose()`; `close()` failed on
    it ("a coroutine was expected") after releasing, and so released again on every
    retry without ever closing."""
    environment = _SyncReleaseGuess()
    env = GymEnv(environment, owns_environment=True)
    env.reset(seed=0)
    env.step("3")
    env.close()
    assert environment.released == 1 and env.episode_over
    assert environment.events[-1][0] == "cleanup"
    env.close()  # closed: nothing runs again
    assert environment.released == 1


# ----------------------------------------- a refused reset leaves the seed alone


def _rows_drawn(env: GymEnv, resets: int) -> list[int]:
    return [env.reset()[1]["state"]["example_id"] for _ in range(resets)]


def test_a_reset_refused_for_its_options_leaves_the_seed_and_the_episode_alone():
    """A typo in `options` is refused before anything changes, as a refused seed or a
    busy env is: the generator is not reseeded (the rows drawn next are those the
    earlier seed gives) and the running episode goes on."""
    want_env = GymEnv(GuessEnv())
    env = GymEnv(GuessEnv())
    try:
        want_env.reset(seed=7)
        want = _rows_drawn(want_env, 6)
        env.reset(seed=7)
        for options in ({"indx": 0}, {"index": 99}, {"index": "0"}, "index"):
            with pytest.raises((ValueError, IndexError, TypeError)):
                env.reset(seed=123, options=options)  # type: ignore[arg-type]
        assert env.np_random_seed == 7
        assert env.step("3")[4]["turn"] == 1  # the episode still runs
        assert _rows_drawn(env, 6) == want
    finally:
        env.close()
        want_env.close()


async def test_an_areset_refused_for_its_options_leaves_the_seed_alone():
    env = GymEnv(GuessEnv())
    try:
        await env.areset(seed=7)
        with pytest.raises(ValueError, match="unknown option"):
            await env.areset(seed=123, options={"indx": 0})
        assert env.np_random_seed == 7
    finally:
        await env.aclose()
