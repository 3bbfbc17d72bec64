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
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Literal, NoReturn, TypeVar

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from vfgym.engine._async import close_loop, new_private_loop, run_on
from vfgym.errors import SubEnvError
from vfgym.gym.batching import batch_infos
from vfgym.gym.env import RESET_OPTIONS, GymEnv

T = TypeVar("T")
VectorMode = Literal["sync", "async"]
MODES = ("sync", "async")

_NEXT_STEP = AutoresetMode.NEXT_STEP
_SAME_STEP = AutoresetMode.SAME_STEP
_DISABLED = AutoresetMode.DISABLED

StepResult = tuple[Any, float, bool, bool, dict[str, Any]]


class GymVectorEnv(VectorEnv):
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
        self.autoreset_mode = _autoreset_mode(autoreset_mode)
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
        self.envs = _build(envs)
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
            await _end_episodes([self.envs[i] for i in rest])
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
                result, failed = _Failure(exc, ending), True
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
        if any(isinstance(result, Exception | _Failure) for result in results):
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
            self._end_held(self._held_elsewhere(_all(self), here), "aclose", closed_ok=True)
        try:
            if self._concurrent:
                errors = await asyncio.gather(
                    *(env.aclose() for env in self.envs), return_exceptions=True
                )
                _raise_first(errors)
            else:
                self._close_all()
        finally:
            self._close_loop()
        self.closed = True  # only now, as in close(): an interrupted close can be retried

    def close_extras(self, **kwargs: Any) -> None:
        """Close every sub-env: each running episode's cleanup runs (on the loop it
        started on, when that loop is still open)."""
        if self._concurrent:
            held = self._held_elsewhere(_all(self), self._loop)
            self._end_held(held, "close", closed_ok=True)
        try:
            if self._concurrent:
                self._run(self._aclose_envs())
            else:
                self._close_all()
        finally:
            self._close_loop()

    @property
    def np_random_seed(self) -> tuple[int | None, ...]:
        """Each sub-env's seed."""
        return tuple(env.np_random_seed for env in self.envs)

    @property
    def np_random(self) -> tuple[np.random.Generator, ...]:  # type: ignore[override]
        """Each sub-env's random generator."""
        return tuple(env.np_random for env in self.envs)

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

    def _check_step(self, actions: Any) -> list[Any]:
        """The actions as a list, once they and the vector env are fit to step."""
        if self.closed:
            raise RuntimeError("step() on a closed vector env; make a new one")
        if isinstance(actions, str | Mapping) or not hasattr(actions, "__len__"):
            raise TypeError(
                f"step() takes one action per sub-env: a sequence of {self.num_envs} actions "
                f"(e.g. a tuple of strings), not a single {type(actions).__name__}"
            )
        if len(actions) != self.num_envs:
            raise ValueError(
                f"step() got {len(actions)} actions for {self.num_envs} sub-envs; pass one "
                "per sub-env (a sub-env that is autoresetting ignores its action, so any "
                "placeholder such as '' will do)"
            )
        if not self._ready:
            waiting = [i for i, started in enumerate(self._started) if not started]
            raise gym.error.ResetNeeded(
                f"call reset() before step() (sub-envs {waiting} have no episode: not "
                "reset yet, or ended by end_episodes())"
            )
        if self._failed:
            broken = ", ".join(f"{i}: {why}" for i, why in sorted(self._failed.items()))
            raise gym.error.ResetNeeded(
                f"the last step or reset failed in sub-env(s) {broken}; call reset() (or "
                "reset(options={'reset_mask': mask}) for those sub-envs) before stepping again"
            )
        if self.autoreset_mode is _DISABLED and any(self._ended):
            ended = [i for i, e in enumerate(self._ended) if e]
            raise gym.error.ResetNeeded(
                f"sub-env(s) {ended} ended on the last step and autoreset_mode is DISABLED: "
                "reset them with reset(options={'reset_mask': mask}) before stepping again"
            )
        actions = list(actions)
        ended = self._ended
        for i, action in enumerate(actions):
            if type(action) is not str and not ended[i]:
                self.envs[i]._model_turn(action)  # a bad action raises before any step
        return actions

    def _check_step_loop(self, here: asyncio.AbstractEventLoop) -> None:
        """Refuse a concurrent step on `here` when a sub-env's episode started on another
        open loop, before any sub-env moves.

        Why: each sub-env refuses such a step itself (its hooks may hold what they opened
        on the other loop), but refusing in every sub-env would mark them all failed and
        lose the episodes to the reset a failed sub-env needs; refused here, nothing
        changes and the caller can step them where they belong."""
        elsewhere = [
            i
            for i, env in enumerate(self.envs)
            if not self._ended[i]  # (a sub-env autoresetting starts a new episode here)
            and (loop := env._episode_loop) is not None
            and loop is not here
            and not loop.is_closed()
        ]
        if not elsewhere:
            return
        if here is self._loop:  # step(): the private loop
            raise RuntimeError(
                f"step(): sub-env(s) {elsewhere} run episodes that started with areset() on "
                "another event loop, where their hooks hold what they opened: step them "
                "there with `await vec.astep(actions)`, or start new episodes with reset()"
            )
        raise RuntimeError(
            f"astep(): sub-env(s) {elsewhere} run episodes that started on another event loop "
            "(with reset(), on the vector env's own loop, or with areset() on another one), "
            "where their hooks hold what they opened: step them with step() (or astep() on "
            "that loop), or start new episodes here with `await vec.areset()`"
        )

    async def _areset(
        self, plan: list[tuple[int, int | None]], options: dict[str, Any] | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Reset the planned sub-envs concurrently on the running loop."""
        envs = self.envs
        results = await self._gather([envs[i].areset(seed=s, options=options) for i, s in plan])
        return self._after_reset(plan, results)

    # ---------------------------------------------- episodes held by a loop

    def _held_elsewhere(
        self, plan: Sequence[tuple[int, Any]], here: asyncio.AbstractEventLoop | None
    ) -> dict[asyncio.AbstractEventLoop, list[int]]:
        """The planned sub-envs whose running episode must end on a loop other than
        `here` (where they are about to reset or close), grouped by that loop."""
        held: dict[asyncio.AbstractEventLoop, list[int]] = {}
        for i, _ in plan:
            loop = self.envs[i]._holding_loop()
            if loop is not None and loop is not here:
                held.setdefault(loop, []).append(i)
        return held

    def _end_held(
        self,
        held: dict[asyncio.AbstractEventLoop, list[int]],
        call: str,
        *,
        closed_ok: bool = False,
    ) -> None:
        """End the episodes `held` by other loops, each group on its own loop (this
        thread waits). Every loop is checked first, so a refusal changes nothing.
        `closed_ok` (closing): a closed loop's episodes are left to the sub-env's own
        close, since nothing can run on that loop any more and a close must finish."""
        for loop, indices in held.items():
            if not (closed_ok and loop.is_closed()):
                _check_reachable(loop, indices, call)
        try:
            for loop, indices in held.items():
                if not loop.is_closed():
                    run_on(loop, _end_episodes([self.envs[i] for i in indices]))
        except BaseException:
            self._interrupted()
            raise

    def _end_running(self, here: asyncio.AbstractEventLoop | None, call: str) -> list[int]:
        """`end_episodes`: end what other loops than `here` hold, and with no loop
        `here` the episodes whose cleanup needs none; returns the sub-envs whose
        episodes are left to end on `here`. The vector env wants a reset after this."""
        self._end_held(self._held_elsewhere(_all(self), here), call)
        rest = [i for i, env in enumerate(self.envs) if env._episode_running()]
        self._started = [False] * self.num_envs
        self._ready = False
        self._ended = [False] * self.num_envs
        self._elapsed = [0] * self.num_envs
        if here is not None:
            return rest
        try:
            for i in rest:
                self.envs[i]._abandon_sync()
        except BaseException:
            self._interrupted()
            raise
        return []

    async def _astep_one(self, i: int, action: Any) -> StepResult:
        env = self.envs[i]
        if self._ended[i]:  # NEXT_STEP
            observation, info = await env.areset()
            self._ended[i] = False
            self._elapsed[i] = 0
            return observation, 0.0, False, False, info
        result, reset_now = self._ending(i, await env.astep(action))
        if reset_now:
            try:
                result = self._reset_within(i, result, await env.areset())
            except Exception as exc:
                return _Failure(exc, result)  # type: ignore[return-value]
        return result

    def _ending(self, i: int, result: StepResult) -> tuple[StepResult, bool]:
        """Sub-env i's step `result` with the vector env's step limit applied, and
        whether its episode ended and resets within this step (SAME_STEP); an end
        under NEXT_STEP is marked for the next step."""
        observation, reward, terminated, truncated, info = result
        limit = self.max_episode_steps
        if limit is not None:
            self._elapsed[i] += 1
            if self._elapsed[i] >= limit:
                truncated = True
        result = observation, reward, terminated, truncated, info
        if not (terminated or truncated):
            return result, False
        if self.autoreset_mode is _SAME_STEP:
            return result, True
        self._ended[i] = True
        return result, False

    def _reset_within(
        self, i: int, result: StepResult, reset: tuple[Any, dict[str, Any]]
    ) -> StepResult:
        """The step `result` of an episode that ended, once sub-env i has `reset`
        (SAME_STEP): the new episode's observation, with the last one's in the info."""
        observation, reward, terminated, truncated, info = result
        new_observation, new_info = reset
        self._elapsed[i] = 0
        final = {"final_obs": observation, "final_info": info, **new_info}
        return new_observation, reward, terminated, truncated, final

    def _batch(
        self,
        rewards: list[float],
        terminations: list[bool],
        truncations: list[bool],
        infos: list[Any],
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
        seeds = _seeds(seed, n)
        mask = None
        if options is not None and not isinstance(options, Mapping):
            raise TypeError(
                "reset() options must be a dict such as {'index': 3} or "
                f"{{'reset_mask': mask}} (or None), not {type(options).__name__}"
            )
        if options is not None and "reset_mask" in options:
            options = dict(options)  # the caller's dict stays as it was
            mask = _check_mask(options.pop("reset_mask"), n)
        plan = [(i, seeds[i]) for i in range(n) if mask is None or mask[i]]
        if options:
            _check_options(options, [self.envs[i] for i, _ in plan])
        return plan, options

    def _after_reset(
        self,
        plan: list[tuple[int, int | None]],
        results: list[tuple[Any, dict[str, Any]] | Exception],
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
            raise _sub_env_error("reset", errors, batch)
        return batch

    def _raise_failed_step(self, results: list[Any]) -> NoReturn:
        """Raise `SubEnvError` for a step in which some sub-envs failed, with the batch
        of the others' results: each failed sub-env's episode ended with its error."""
        errors: dict[int, BaseException] = {}
        for i, result in enumerate(results):
            if isinstance(result, Exception):
                result = _Failure(result, None)
            if isinstance(result, _Failure):
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
        raise _sub_env_error("step", errors, self._batch(rewards, terminations, truncations, infos))

    async def _gather(self, calls: list[Coroutine[Any, Any, T]]) -> list[T | Exception]:
        """Run the sub-envs' calls concurrently; a call that raised gives its exception."""
        try:
            results = await asyncio.gather(*calls, return_exceptions=True)
        except BaseException:  # cancelled while the calls ran
            self._interrupted()
            raise
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                self._interrupted()
                raise result
        return results

    def _mark_failed(self, i: int, exc: BaseException) -> str:
        """Sub-env i raised: it needs a reset before the vector env steps again."""
        why = self._failed[i] = f"{type(exc).__name__}: {exc}"
        self._ended[i] = False
        return why

    def _interrupted(self) -> None:
        """A step or reset stopped part way (KeyboardInterrupt, cancellation): which
        sub-envs moved is unknown, so every one needs a reset."""
        for i in range(self.num_envs):
            self._failed.setdefault(i, "interrupted")

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the private loop (see `vfgym.engine._async.run_on`): always the same
        loop, so what the sub-envs open on it stays usable."""
        return run_on(self._private_loop(), coro)

    def _private_loop(self) -> asyncio.AbstractEventLoop:
        """The loop sync calls run the sub-envs on (made on first use)."""
        if self._loop is None or self._loop.is_closed():
            self._loop = new_private_loop(self)
        return self._loop

    async def _aclose_envs(self) -> None:
        errors = await asyncio.gather(*(env.aclose() for env in self.envs), return_exceptions=True)
        _raise_first(errors)

    def _close_all(self) -> None:
        errors: list[Any] = []
        for env in self.envs:
            try:
                env.close()
            except Exception as exc:  # the others still close
                errors.append(exc)
        _raise_first(errors)

    def _close_loop(self) -> None:
        loop, self._loop = self._loop, None
        close_loop(loop)


class _Failure:
    """A sub-env's step that raised `error`; `ending` is the step's own result when the
    episode ended and only the reset after it failed."""

    __slots__ = ("ending", "error")

    def __init__(self, error: Exception, ending: StepResult | None) -> None:
        self.error = error
        self.ending = ending


async def _end_episodes(envs: Sequence[GymEnv]) -> None:
    """End the running episodes of `envs` concurrently on the running loop."""
    _raise_first(await asyncio.gather(*(env._abandon() for env in envs), return_exceptions=True))


def _all(vec: GymVectorEnv) -> list[tuple[int, None]]:
    """A plan that takes in every sub-env (see `_held_elsewhere`)."""
    return [(i, None) for i in range(vec.num_envs)]


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _check_reachable(loop: asyncio.AbstractEventLoop, indices: list[int], call: str) -> None:
    """Refuse `call` when `loop`, which holds the running episodes of sub-envs
    `indices`, cannot run their cleanup now; say what to do instead."""
    which = f"sub-env(s) {indices}"
    if loop.is_closed():
        raise RuntimeError(
            f"{call}(): {which} still run episodes that started on an event loop that has "
            "since been closed (asyncio.run closes its loop when it returns), and their async "
            "cleanup can only release what they opened on that loop. Close this vector env "
            "(close() releases what the environments it owns hold) and make a new one; next "
            "time end the episodes before their loop closes, with `await vec.aend_episodes()` "
            "or `await vec.aclose()` in it (aplay_vector ends its own)"
        )
    if not loop.is_running():
        return  # idle: this thread can run it
    if loop is _running_loop():
        instead = f"`await vec.a{call}()`"
        if call == "reset":
            instead += " (`await aplay_vector(...)` for play_vector)"
        if call != "end_episodes":
            instead += ", or end them first with `await vec.aend_episodes()`"
        raise RuntimeError(
            f"{call}(): {which} run episodes that started on the event loop running in this "
            "thread (with areset()/astep() or aplay_vector), and their async cleanup must run "
            f"there, which a sync call made from that loop cannot do: use {instead}"
        )
    raise RuntimeError(
        f"{call}(): {which} run episodes that started on an event loop running in another "
        "thread, and their async cleanup must run there: end them on that loop first "
        f"(`await vec.aend_episodes()` or `await vec.aclose()` there), then call {call}() here"
    )


def _sub_env_error(
    call: str, errors: dict[int, BaseException], results: tuple[Any, ...]
) -> SubEnvError:
    """The error of a `call` ("step" or "reset") that failed in the sub-envs `errors`."""
    listing = "; ".join(f"sub-env {i}: {type(e).__name__}: {e}" for i, e in errors.items())
    mask = f"np.isin(np.arange({len(results[0])}), {sorted(errors)})"
    error = SubEnvError(
        f"{call}() failed in {listing}. The other sub-envs' results are in this error's "
        f"`results`; reset the failed sub-env(s) before stepping again: "
        f"reset(options={{'reset_mask': {mask}}})",
        errors=errors,
        results=results,
    )
    error.__cause__ = next(iter(errors.values()))  # as `raise error from ...` would
    error.__suppress_context__ = True
    return error


def _build(envs: Sequence[GymEnv | Callable[[], GymEnv]]) -> list[GymEnv]:
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


def _autoreset_mode(value: AutoresetMode | str) -> AutoresetMode:
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


def _seeds(seed: Any, n: int) -> list[int | None]:
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


def _check_options(options: Mapping[str, Any], envs: Sequence[GymEnv]) -> None:
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


def _check_mask(mask: Any, n: int) -> np.ndarray:
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


def _raise_first(errors: Sequence[Any]) -> None:
    for error in errors:
        if isinstance(error, BaseException):
            raise error


__all__ = ["MODES", "GymVectorEnv", "VectorMode"]
