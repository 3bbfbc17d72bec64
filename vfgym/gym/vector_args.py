"""Checking what a `GymVectorEnv` is made and reset with, before anything changes.

The sub-envs (built from functions when given those), the autoreset mode, the seeds
of `reset(seed=...)` (one per sub-env, as Gymnasium spreads them), the options and a
`reset_mask`: each bad value is refused with what to pass instead, so a typo loses
no running episode.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from vfgym.gym.env import GymEnv
from vfgym.gym.rows import RESET_OPTIONS


def build_sub_envs(envs: Sequence[GymEnv | Callable[[], GymEnv]]) -> list[GymEnv]:
    """The sub-envs, built from their functions; the ones built are closed on a failure."""
    built: list[GymEnv] = []
    made: list[GymEnv] = []
    try:
        for i, item in enumerate(envs):
            env = item() if callable(item) and not isinstance(item, gym.Env) else item
            if env is not item:
                made.append(env)  # type: ignore[arg-type]
            if not isinstance(env, GymEnv):
                hint = (
                    " (gym.make wraps its env: use gym.make_vec(id, num_envs=...) or "
                    "vfgym.gym.make_env(name) instead)"
                    if isinstance(env, gym.Wrapper)
                    else ""
                )
                raise TypeError(f"sub-env {i} is a {type(env).__name__}, not a vfgym GymEnv{hint}")
            if any(env is other for other in built):
                raise ValueError(
                    f"sub-env {i} is the same GymEnv object as an earlier one; one env plays "
                    "one episode at a time, so give each sub-env its own"
                )
            built.append(env)
    except BaseException:
        for env in made:
            if isinstance(env, gym.Env):
                env.close()
        raise
    return built


def checked_autoreset_mode(value: AutoresetMode | str) -> AutoresetMode:
    if isinstance(value, AutoresetMode):
        return value
    try:
        return AutoresetMode(value)
    except ValueError:
        valid = ", ".join(repr(m.value) for m in AutoresetMode)
        raise ValueError(
            f"autoreset_mode must be a gymnasium.vector.AutoresetMode or one of {valid}, "
            f"not {value!r}"
        ) from None


def sub_env_seeds(seed: Any, n: int) -> list[int | None]:
    """One seed per sub-env from `reset(seed=...)`, each checked as `gym.Env.reset`
    checks it (numpy ints taken as ints, as a single seed is).

    Why here: a seed a sub-env refuses would fail in that sub-env only after the ones
    before it reset, losing their episodes; checked first, a bad seed changes nothing."""
    if seed is None:
        return [None] * n
    if isinstance(seed, np.ndarray) and seed.ndim == 0:  # one seed, as a numpy int is
        seed = seed[()]
    if _is_int(seed):
        return [_checked_seed(int(seed) + i) for i in range(n)]
    if isinstance(seed, Sequence | np.ndarray) and not isinstance(seed, str | bytes):
        seeds = list(seed)
        if len(seeds) != n:
            raise ValueError(
                f"reset() got {len(seeds)} seeds for {n} sub-envs; pass one per sub-env, "
                "or a single int (sub-env i gets seed + i)"
            )
        return [None if s is None else _checked_seed(s) for s in seeds]
    raise TypeError(f"seed must be None, an int or a list of {n} ints, not {type(seed).__name__}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def _checked_seed(seed: Any) -> int:
    if not _is_int(seed):
        raise TypeError(f"a seed must be an int >= 0 or None, not {seed!r}")
    if seed < 0:
        raise ValueError(f"a seed must be an int >= 0 (or None), not {seed}")
    return int(seed)


def check_reset_options(options: Mapping[str, Any], envs: Sequence[GymEnv]) -> None:
    """Refuse reset options that the sub-envs `envs` would refuse, before any resets.

    Why: every sub-env refuses them itself, but only once the ones before it have
    reset, and the vector env would then count every sub-env failed: the running
    episodes would be lost to a typo."""
    unknown = set(options) - RESET_OPTIONS
    if unknown:
        raise ValueError(
            f"reset() got unknown option(s) {sorted(unknown)}; a vector env understands "
            f"{sorted(RESET_OPTIONS | {'reset_mask'})} (options={{'index': i}} starts every "
            "reset sub-env on dataset row i; {'reset_mask': mask} picks the sub-envs)"
        )
    if "index" not in options:
        return
    index = options["index"]
    if not _is_int(index):
        raise TypeError(
            f"options['index'] must be an int, not {index!r}: the same options go to every "
            "sub-env it resets, which all start on that dataset row. To start sub-envs on "
            "different rows, reset them one at a time: reset(options={'index': row, "
            "'reset_mask': mask}) with mask selecting one sub-env"
        )
    for i, env in enumerate(envs):
        if not -len(env.rows) <= index < len(env.rows):
            raise IndexError(
                f"options['index']={index} is outside the {len(env.rows)} dataset rows of a "
                f"sub-env (the {i}th to reset)"
            )


def checked_reset_mask(mask: Any, n: int) -> np.ndarray:
    """`options["reset_mask"]`, checked as Gymnasium's vector envs check it."""
    if not isinstance(mask, np.ndarray):
        raise TypeError(f"options['reset_mask'] must be a numpy array, not {type(mask).__name__}")
    if mask.shape != (n,):
        raise ValueError(f"options['reset_mask'] must have shape ({n},), not {mask.shape}")
    if mask.dtype != np.bool_:
        raise TypeError(f"options['reset_mask'] must have dtype bool, not {mask.dtype}")
    if not mask.any():
        raise ValueError("options['reset_mask'] must select at least one sub-env")
    return mask
