"""`GymVectorEnv`: several `GymEnv`s as one Gymnasium vector env, all in this process.

    vec = gym.make_vec("vfgym/Wordle-v0", num_envs=8)                # mode="sync"
    vec = gym.make_vec("vfgym/CodeTests-v0", num_envs=8, mode="async")

(`gym.make_vec` picks it by default — every vfgym id has it as `vector_entry_point`;
`vectorization_mode="sync"` / `"async"` still give Gymnasium's own vector envs.)

Why not Gymnasium's vector envs: `SyncVectorEnv` batches the infos of every step
key by key with new numpy arrays per key *and sub-env* (`VectorEnv._add_info`), which
costs more than a game's move, and deep-copies the observations; `AsyncVectorEnv`
runs one process per sub-env and pays a pipe round trip and pickling on every step
(about 12k steps/s on a 2-core machine even for envs that do nothing). What an LLM
environment waits on — a sandbox, an HTTP judge, a model — is I/O, and one event loop
overlaps I/O without any process.

Modes:

- "sync": the sub-envs step one after another in the caller's thread.
- "async": the sub-envs step concurrently on one asyncio event loop (their `astep`s
  gathered). Sub-envs that never wait (`GymEnv.needs_loop` false: sync hooks, sync
  scoring — every built-in game) have nothing to overlap, so they step inline exactly
  as in "sync"; a loop would only add its own cost. Sync `step`/`reset` run a private
  loop (from a helper thread when called inside a running loop, as in a notebook);
  asyncio code should `await vec.astep(...)` / `await vec.areset(...)`, which use the
  caller's loop.

Switching between the two: an episode whose environment has an async `cleanup_state`
(a sandbox lease, a client) holds what its hooks opened on the loop it started on, and
only that loop can release it. So before `reset`/`areset` (and `close`/`aclose`) start
(or close) sub-envs on another loop, the vector env ends their running episodes on the
loop that owns them (the caller's thread waits for that): `play_vector` after
`await aplay_vector(...)`, or `vec.reset()` then `await vec.areset()` on a new loop,
just work. A loop that can no longer be
reached — closed (as `asyncio.run` closes its loop), running in another thread, or the
caller's own loop under a sync call — is refused before anything changes, with what to
do. `end_episodes()` / `await aend_episodes()` end every running episode on its own
loop without starting new ones, e.g. before leaving a loop that is about to close
(`play_vector` and `aplay_vector` do it when they return).

Results are those of Gymnasium's vector envs over the same sub-envs, seeds and
actions: observations as a tuple, rewards/terminations/truncations as numpy arrays,
infos batched as `_add_info` does (see `vfgym.gym.batching`), the three autoreset
modes (`metadata["autoreset_mode"]`, NEXT_STEP by default), `reset(seed=s)` seeding
sub-env i with s + i, and `options={"reset_mask": mask}` resetting some sub-envs.
Observations are not copied: every step's are new objects already.

A sub-env that raises does not stop the others: every sub-env does its part of the
call (in both modes), then `vfgym.errors.SubEnvError` is raised with the batch of
results (each failed slot carrying `info["error"]`), so no other sub-env's step —
an episode's end among them — goes unreported. The failed sub-envs need a reset
(`options={"reset_mask": mask}`) before the next step.

This module holds the vector env's calls and its batching of results; the checks of
its arguments live in `vfgym.gym.vector_args`, and the bookkeeping of failed sub-envs
and of the loops their episodes run on in `vfgym.gym.vector_upkeep` (a base class).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from vfgym.gym.batching import batch_infos
from vfgym.gym.env import GymEnv
from vfgym.gym.vector_args import (
    build_sub_envs,
    check_reset_options,
    checked_autoreset_mode,
    checked_reset_mask,
    sub_env_seeds,
)
from vfgym.gym.vector_autoreset import Autoresetting
from vfgym.gym.vector_upkeep import (
    StepResult,
    SubEnvFailure,
    VectorMode,
    end_on_running_loop,
    every_sub_env,
    raise_first,
    sub_env_error,
)

MODES = ("sync", "async")


class GymVectorEnv(Autoresetting):
    """A `gymnasium.vector.VectorEnv` over `GymEnv`s, stepped in this process.

    Args:
        envs: the sub-envs, as `GymEnv`s or functions that build one (each its own
            object: one env plays one episode at a time). They are closed with the
            vector env.
        mode: "sync" (one after another) or "async" (concurrently on one event loop;
            see the module docstring).
        autoreset_mode: what follows the end of a sub-env's episode, as in Gymnasium
            (`AutoresetMode` or its value: "NextStep", "SameStep", "Disabled").
        max_episode_steps: truncate episodes after this many steps, as Gymnasium's
            `TimeLimit` wrapper does (`gym.make_vec` passes the id's own limit).
    """

    def __init__(
        self,
        envs: Sequence[GymEnv | Callable[[], GymEnv]],
        *,
        mode: VectorMode = "sync",
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        max_episode_steps: int | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(
                f"mode must be 'sync' (sub-envs step one after another) or 'async' (they "
                f"step concurrently on one event loop), not {mode!r}"
            )
        self.autoreset_mode = checked_autoreset_mode(autoreset_mode)
        if max_episode_steps is not None and (
            isinstance(max_episode_steps, bool)
            or not isinstance(max_episode_steps, int)
            or max_episode_steps < 1
        ):
            raise ValueError(
                f"max_episode_steps must be None or an int >= 1, not {max_episode_steps!r}"
            )
        if isinstance(envs, GymEnv | str) or not isinstance(envs, Sequence):
            raise TypeError(
                "envs must be a sequence of GymEnvs (or of functions that build one), "
                f"not {type(envs).__name__}"
            )
        if not envs:
            raise ValueError("a vector env needs at least one sub-env (num_envs >= 1)")
        self.envs = build_sub_envs(envs)
        self.num_envs = len(self.envs)
        self.mode: VectorMode = mode
        self.max_episode_steps = max_episode_steps
        first = self.envs[0]
        self.metadata = {**first.metadata, "autoreset_mode": self.autoreset_mode}
        self.render_mode = first.render_mode
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        for i, env in enumerate(self.envs):
            if (
                env.observation_space != self.single_observation_space
                or env.action_space != self.single_action_space
            ):
                for built, item in zip(self.envs, envs, strict=True):
                    if built is not item:  # made here from a function: ours to close
                        built.close()
                raise ValueError(
                    f"sub-env {i} has spaces {env.observation_space} / {env.action_space}, "
                    f"sub-env 0 {self.single_observation_space} / {self.single_action_space}; "
                    "the sub-envs of a vector env share one observation_mode and max_text_length"
                )
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

        # Sub-envs that never wait step inline even in async mode (nothing to overlap).
        self._concurrent = mode == "async" and any(env.needs_loop for env in self.envs)
        self._observations: list[Any] = [None] * self.num_envs
        self._ended = [False] * self.num_envs  # the last step ended the episode
        self._started = [False] * self.num_envs
        self._ready = False  # every sub-env has been reset at least once
        self._elapsed = [0] * self.num_envs
        self._failed: dict[int, str] = {}  # sub-env -> the error that broke the last step
        self._loop: asyncio.AbstractEventLoop | None = None

    # ----------------------------------------------------------------- public

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Reset every sub-env (or those in `options["reset_mask"]`); an int seed s
        seeds sub-env i with s + i, a list gives one seed per sub-env."""
        plan, options = self._reset_plan(seed, options)
        if self._concurrent:
            # The new episodes start on the private loop: the ones they replace end first
            # on the loop that holds them.
            self._end_held(self._held_elsewhere(plan, self._private_loop()), "reset")
            return self._run(self._areset(plan, options))
        envs = self.envs
        results: list[Any] = []
        for i, single_seed in plan:
            try:
                results.append(envs[i].reset(seed=single_seed, options=options))
            except Exception as exc:  # the others still reset (as in async mode)
                results.append(exc)
            except BaseException:
                self._interrupted()
                raise
        return self._after_reset(plan, results)

    async def areset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """`reset` for asyncio code: in async mode the sub-envs reset concurrently on the
        caller's loop."""
        if not self._concurrent:
            return self.reset(seed=seed, options=options)
        plan, options = self._reset_plan(seed, options)
        here = asyncio.get_running_loop()
        self._end_held(self._held_elsewhere(plan, here), "areset")
        return await self._areset(plan, options)

    def end_episodes(self) -> None:
        """End every sub-env's running episode without starting another: each one's
        cleanup runs on the event loop it started on; nothing is scored.

        Why: what an episode's hooks opened on a loop (a sandbox, a client) can only be
        released there, so end the episodes before leaving a loop that will close or
        that other code will not run again. Call `reset()` before stepping again."""
        self._end_running(None, "end_episodes")

    async def aend_episodes(self) -> None:
        """`end_episodes` for asyncio code: the episodes the caller's loop holds end on
        it (concurrently); any other loop's are ended there first."""
        here = asyncio.get_running_loop()
        rest = self._end_running(here, "aend_episodes")
        try:
            await end_on_running_loop([self.envs[i] for i in rest])
        except BaseException:
            self._interrupted()
            raise

    def step(
        self, actions: Sequence[Any]
    ) -> tuple[tuple[Any, ...], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Give every sub-env its action (a sub-env that is autoresetting ignores it)."""
        if self._concurrent:
            return self._run(self.astep(actions))
        actions = self._check_step(actions)
        envs = self.envs
        ended = self._ended
        limit = self.max_episode_steps
        results: list[Any] = [None] * self.num_envs
        result: StepResult | SubEnvFailure
        failed = False
        for i in range(self.num_envs):
            env = envs[i]
            ending = None
            try:
                if ended[i]:  # NEXT_STEP (_check_step refused the others): reset instead
                    observation, info = env.reset()
                    ended[i] = False
                    self._elapsed[i] = 0
                    results[i] = (observation, 0.0, False, False, info)
                    continue
                result = env.step(actions[i])
                if limit is not None or result[2] or result[3]:  # a limit to count, or an end
                    result, reset_now = self._ending(i, result)
                    if reset_now:
                        ending = result
                        result = self._reset_within(i, result, env.reset())
            except Exception as exc:  # the others still step (as in async mode)
                result, failed = SubEnvFailure(exc, ending), True
            except BaseException:
                self._interrupted()
                raise
            results[i] = result
        if failed:
            self._raise_failed_step(results)
        observations, rewards, terminations, truncations, infos = zip(*results, strict=True)
        self._observations[:] = observations
        return self._batch(rewards, terminations, truncations, infos)

    async def astep(
        self, actions: Sequence[Any]
    ) -> tuple[tuple[Any, ...], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """`step` for asyncio code: in async mode the sub-envs step concurrently on the
        caller's loop."""
        if not self._concurrent:
            return self.step(actions)
        actions = self._check_step(actions)
        self._check_step_loop(asyncio.get_running_loop())
        results = await self._gather(
            [self._astep_one(i, action) for i, action in enumerate(actions)]
        )
        if any(isinstance(result, Exception | SubEnvFailure) for result in results):
            self._raise_failed_step(results)
        observations, rewards, terminations, truncations, infos = (
            list(column) for column in zip(*results, strict=True)
        )
        self._observations[:] = observations
        return self._batch(rewards, terminations, truncations, infos)

    def render(self) -> tuple[Any, ...]:
        """Each sub-env's `render()` (text in "ansi" mode)."""
        return tuple(env.render() for env in self.envs)

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Each sub-env's attribute `name`, called with the arguments when callable."""
        results = []
        for env in self.envs:
            attribute = getattr(env, name)
            results.append(attribute(*args, **kwargs) if callable(attribute) else attribute)
        return tuple(results)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Each sub-env's attribute `name`."""
        return tuple(getattr(env, name) for env in self.envs)

    def set_attr(self, name: str, values: Any) -> None:
        """Set attribute `name` of every sub-env: one value each (a list or tuple of
        num_envs values), or the same value for all."""
        if not isinstance(values, list | tuple):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(
                f"set_attr got {len(values)} values for {self.num_envs} sub-envs; pass one "
                "per sub-env, or a single value (not a list or tuple) for all"
            )
        for env, value in zip(self.envs, values, strict=True):
            setattr(env, name, value)

    async def aclose(self) -> None:
        """`close` for asyncio code: each running episode's cleanup runs on the caller's
        loop (concurrently, in async mode), or first on the loop it started on when
        another open loop holds it."""
        if self.closed:
            return
        if self._concurrent:  # what another loop holds is released there first
            here = asyncio.get_running_loop()
            self._end_held(
                self._held_elsewhere(every_sub_env(self), here), "aclose", closed_ok=True
            )
        try:
            if self._concurrent:
                errors = await asyncio.gather(
                    *(env.aclose() for env in self.envs), return_exceptions=True
                )
                raise_first(errors)
            else:
                self._close_all()
        finally:
            self._close_loop()
        self.closed = True  # only now, as in close(): an interrupted close can be retried

    def close_extras(self, **kwargs: Any) -> None:
        """Close every sub-env: each running episode's cleanup runs (on the loop it
        started on, when that loop is still open)."""
        if self._concurrent:
            held = self._held_elsewhere(every_sub_env(self), self._loop)
            self._end_held(held, "close", closed_ok=True)
        try:
            if self._concurrent:
                self._run(self._aclose_envs())
            else:
                self._close_all()
        finally:
            self._close_loop()

    @property
    def np_random_seed(self) -> tuple[int | None, ...]:  # type: ignore[override]
        """Each sub-env's seed (one per sub-env, as in Gymnasium's `SyncVectorEnv`, where
        `VectorEnv` declares one seed)."""
        return tuple(env.np_random_seed for env in self.envs)

    @property  # type: ignore[override]
    def np_random(self) -> tuple[np.random.Generator, ...]:
        """Each sub-env's random generator (one per sub-env, as `np_random_seed`)."""
        return tuple(env.np_random for env in self.envs)

    @np_random.setter
    def np_random(self, value: Any) -> None:
        """Refused: there is no one generator to set (`VectorEnv` would take one)."""
        raise AttributeError(
            "a GymVectorEnv has one random generator per sub-env: seed them with "
            "reset(seed=...), or set one with vec.envs[i].np_random = generator"
        )

    def __deepcopy__(self, memo: dict[int, Any]) -> GymVectorEnv:
        """A copy of the vector env and its sub-envs' episodes (each sub-env copied as
        `GymEnv` copies one), for a policy that searches ahead.

        Why: the private event loop cannot be copied (a loop holds a selector and a
        thread's context), so the copy makes its own when it first needs one, as a
        copied `GymEnv` does."""
        copied = type(self).__new__(type(self))
        memo[id(self)] = copied
        for key, value in vars(self).items():
            setattr(copied, key, None if key == "_loop" else copy.deepcopy(value, memo))
        return copied

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Refused, naming the vector env and what builds one elsewhere.

        Why: otherwise pickling reaches a sub-env first, and its error speaks of a
        single GymEnv and `gym.make`, not of what was being pickled."""
        raise TypeError(
            "a GymVectorEnv cannot be pickled: its sub-envs hold functions and live "
            "resources. To build one in another process, send a function that makes it, "
            "e.g. functools.partial(gym.make_vec, 'vfgym/Wordle-v0', num_envs=8); "
            "copy.deepcopy(vec) copies one in this process"
        )

    def __repr__(self) -> str:
        name = f"{self.spec.id}, " if self.spec is not None else ""
        return f"GymVectorEnv({name}num_envs={self.num_envs}, mode={self.mode!r})"

    # -------------------------------------------------------------- helpers

    async def _areset(
        self, plan: list[tuple[int, int | None]], options: dict[str, Any] | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Reset the planned sub-envs concurrently on the running loop."""
        envs = self.envs
        results = await self._gather([envs[i].areset(seed=s, options=options) for i, s in plan])
        return self._after_reset(plan, results)

    def _batch(
        self,
        rewards: Sequence[float],
        terminations: Sequence[bool],
        truncations: Sequence[bool],
        infos: Sequence[Any],
    ) -> tuple[tuple[Any, ...], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        n = self.num_envs
        # (`fromiter` with positional arguments: a fifth cheaper than `np.array(values,
        # dtype=...)` for a batch's few values, and the same arrays.)
        return (
            tuple(self._observations),
            np.fromiter(rewards, np.float64, n),
            np.fromiter(terminations, np.bool_, n),
            np.fromiter(truncations, np.bool_, n),
            batch_infos(infos, n),
        )

    def _reset_plan(
        self, seed: Any, options: dict[str, Any] | None
    ) -> tuple[list[tuple[int, int | None]], dict[str, Any] | None]:
        """Which sub-envs to reset with which seed, and the options they get."""
        if self.closed:
            raise RuntimeError("reset() on a closed vector env; make a new one")
        n = self.num_envs
        seeds = sub_env_seeds(seed, n)
        mask = None
        if options is not None and not isinstance(options, Mapping):
            raise TypeError(
                "reset() options must be a dict such as {'index': 3} or "
                f"{{'reset_mask': mask}} (or None), not {type(options).__name__}"
            )
        if options is not None and "reset_mask" in options:
            options = dict(options)  # the caller's dict stays as it was
            mask = checked_reset_mask(options.pop("reset_mask"), n)
        plan = [(i, seeds[i]) for i in range(n) if mask is None or mask[i]]
        if options:
            check_reset_options(options, [self.envs[i] for i, _ in plan])
        return plan, options

    def _after_reset(
        self,
        plan: list[tuple[int, int | None]],
        results: list[tuple[Any, dict[str, Any]] | BaseException],
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """What `reset` returns, once each planned sub-env has reset or failed to."""
        infos: list[Any] = [None] * self.num_envs
        errors: dict[int, BaseException] = {}
        for (i, _), result in zip(plan, results, strict=True):
            if isinstance(result, BaseException):
                errors[i] = result
                infos[i] = {"error": self._mark_failed(i, result)}
                continue
            observation, info = result
            self._observations[i] = observation
            infos[i] = info
            self._ended[i] = False
            self._started[i] = True
            self._elapsed[i] = 0
            self._failed.pop(i, None)
        self._ready = all(self._started)
        batch = tuple(self._observations), batch_infos(infos, self.num_envs)
        if errors:
            raise sub_env_error("reset", errors, batch)
        return batch

    def _raise_failed_step(self, results: list[Any]) -> NoReturn:
        """Raise `SubEnvError` for a step in which some sub-envs failed, with the batch
        of the others' results: each failed sub-env's episode ended with its error."""
        errors: dict[int, BaseException] = {}
        for i, result in enumerate(results):
            if isinstance(result, Exception):
                result = SubEnvFailure(result, None)
            if isinstance(result, SubEnvFailure):
                errors[i] = result.error
                why = self._mark_failed(i, result.error)
                if result.ending is None:
                    info = {"stop_reason": "error", "error": why}
                    results[i] = (self._observations[i], 0.0, False, True, info)
                    continue
                # The episode ended in this step and the reset after it failed (SAME_STEP).
                observation, reward, terminated, truncated, info = result.ending
                result = observation, reward, terminated, truncated, {**info, "error": why}
                results[i] = result
            self._observations[i] = result[0]
        _, rewards, terminations, truncations, infos = zip(*results, strict=True)
        raise sub_env_error("step", errors, self._batch(rewards, terminations, truncations, infos))


__all__ = ["MODES", "GymVectorEnv", "VectorMode"]
