"""Copying a `GymEnv` (`copy.deepcopy`, for a policy that searches ahead) and
refusing to pickle one.

A layer of `GymEnv` (see `vfgym.gym.env`) of its own because copying must know every
attribute the other layers keep — in slots, a subclass's slots and the instance dict —
and which of them (the event loops) cannot be copied at all.
"""

from __future__ import annotations

import copy
from typing import Any, Self

from vfgym.gym.episode import EpisodeCore


class Copying(EpisodeCore):
    """`copy.deepcopy` support, and a clear refusal to pickle."""

    __slots__ = ()

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        """A copy of the env and its episode, for a policy that searches ahead from the
        current position. The private event loop is not copied (no loop can be): the
        copy makes its own when it needs one."""
        if self._busy:
            raise RuntimeError(
                "cannot copy an env while a reset/step of it is running (the copy would "
                "hold a half-played turn); copy it between steps"
            )
        copied = type(self).__new__(type(self))
        memo[id(self)] = copied
        # The dataset is shared, not copied: no episode writes to it (a reset copies the
        # row it starts from), and copying 100 rows took longer than the rest.
        env = self.environment
        for shared in (self.rows, env.dataset, env.eval_dataset, *self._row_cache.values()):
            if shared is not None:
                memo[id(shared)] = shared
        try:
            for key, value in _fields(self):
                if key not in _LOOPS:
                    object.__setattr__(copied, key, copy.deepcopy(value, memo))
        except Exception as exc:  # e.g. a sandbox's connection: live resources do not copy
            raise TypeError(
                f"this env cannot be copied: its {type(self.environment).__name__} holds "
                f"something that cannot be ({type(exc).__name__}: {exc}). Games copy; an "
                "env with live resources (sandboxes, connections) does not — replay the "
                "episode's actions on a new env instead"
            ) from exc
        copied._loop = copied._episode_loop = None
        copied._busy = False
        return copied

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError(
            "a GymEnv cannot be pickled: its environment holds functions and live "
            "resources. To build envs in other processes, send a function that makes one, "
            "e.g. functools.partial(gym.make, 'vfgym/Wordle-v0'); copy.deepcopy(env) "
            "copies one in this process"
        )


#: GymEnv attributes holding event loops, which `copy.deepcopy` leaves out.
_LOOPS = frozenset({"_loop", "_episode_loop"})


def _fields(env: EpisodeCore) -> list[tuple[str, Any]]:
    """Every attribute `env` has, in its slots (a subclass's too) and in its dict."""
    fields = [
        (name, getattr(env, name))
        for cls in type(env).__mro__
        for name in cls.__dict__.get("__slots__", ())
        if hasattr(env, name)
    ]
    return fields + list(env.__dict__.items())
