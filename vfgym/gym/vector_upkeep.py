"""Sub-env bookkeeping in a `GymVectorEnv`: whether a step may run, failed sub-envs,
and the event loops their episodes live on.

A layer of `GymVectorEnv` (see `vfgym.gym.vector`). A sub-env that raises does not
stop the others: it is marked failed (it needs a reset before the next step) and the
call ends with `SubEnvError` carrying the whole batch. An interrupted call marks every
sub-env, since which of them moved is unknown. An episode whose async cleanup holds
what its hooks opened on one event loop must end on that loop: before the vector env
resets or closes sub-envs on another loop it ends those episodes where they belong,
or refuses, before anything changes, when that loop cannot be reached.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, Literal, TypeVar

import gymnasium as gym
from gymnasium.vector import AutoresetMode, VectorEnv

from vfgym.engine._async import close_loop, new_private_loop, run_on
from vfgym.errors import SubEnvError
from vfgym.gym.env import GymEnv

T = TypeVar("T")
_DISABLED = AutoresetMode.DISABLED
VectorMode = Literal["sync", "async"]
#: One sub-env's step: observation, reward, terminated, truncated, info.
StepResult = tuple[Any, float, bool, bool, dict[str, Any]]


class SubEnvUpkeep(VectorEnv):
    """The sub-envs' bookkeeping: whether they can step, failures, interruptions, and
    their event loops."""

    envs: list[GymEnv]
    mode: VectorMode
    autoreset_mode: AutoresetMode
    max_episode_steps: int | None
    _concurrent: bool
    _observations: list[Any]
    _ended: list[bool]
    _started: list[bool]
    _ready: bool
    _elapsed: list[int]
    _failed: dict[int, str]
    _loop: asyncio.AbstractEventLoop | None

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
        autoresetting = self._ended
        for i, action in enumerate(actions):
            if type(action) is not str and not autoresetting[i]:
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
                    run_on(loop, end_on_running_loop([self.envs[i] for i in indices]))
        except BaseException:
            self._interrupted()
            raise

    def _end_running(self, here: asyncio.AbstractEventLoop | None, call: str) -> list[int]:
        """`end_episodes`: end what other loops than `here` hold, and with no loop
        `here` the episodes whose cleanup needs none; returns the sub-envs whose
        episodes are left to end on `here`. The vector env wants a reset after this."""
        self._end_held(self._held_elsewhere(every_sub_env(self), here), call)
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

    async def _gather(self, calls: list[Coroutine[Any, Any, T]]) -> list[T | BaseException]:
        """Run the sub-envs' calls concurrently; a call that raised gives its exception
        (an `Exception`: any other, an interruption, is raised here)."""
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
        raise_first(errors)

    def _close_all(self) -> None:
        errors: list[Any] = []
        for env in self.envs:
            try:
                env.close()
            except Exception as exc:  # the others still close
                errors.append(exc)
        raise_first(errors)

    def _close_loop(self) -> None:
        loop, self._loop = self._loop, None
        close_loop(loop)


class SubEnvFailure:
    """A sub-env's step that raised `error`; `ending` is the step's own result when the
    episode ended and only the reset after it failed."""

    __slots__ = ("ending", "error")

    def __init__(self, error: Exception, ending: StepResult | None) -> None:
        self.error = error
        self.ending = ending


async def end_on_running_loop(envs: Sequence[GymEnv]) -> None:
    """End the running episodes of `envs` concurrently on the running loop."""
    raise_first(await asyncio.gather(*(env._abandon() for env in envs), return_exceptions=True))


def every_sub_env(vec: VectorEnv) -> list[tuple[int, None]]:
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


def sub_env_error(
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


def raise_first(errors: Sequence[Any]) -> None:
    for error in errors:
        if isinstance(error, BaseException):
            raise error
