"""The bookkeeping every `GymEnv` episode shares, whichever way its hooks run.

`GymEnv` is assembled from layers, each a module with one job (see `vfgym.gym.env`);
this is the bottom one. It holds the adapter's attributes (in slots, declared once
here) and what both the sync path (`vfgym.gym.sync_path`) and the async path
(`vfgym.gym.async_path`) do around the environment's hooks: one reset/step at a
time (`_claim`), refusing a step with no running episode, ending an episode that
failed, running its cleanup at most once, counting a turn's tokens and checking a
`step_reward`. Keeping it apart lets the two paths differ only in how they call the
hooks.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import gymnasium as gym
import numpy as np

from vfgym.engine._async import call_inline, is_async_callable
from vfgym.engine.state import fill_state_defaults, new_state
from vfgym.envs.multiturn_env import TRUNCATING, MultiTurnEnv
from vfgym.errors import error_record
from vfgym.gym.actions import model_turn
from vfgym.gym.shipping import Outbox
from vfgym.gym.spaces import MessagesSpace, ModelTurnSpace, UnicodeText
from vfgym.gym.state_view import StateView
from vfgym.gym.text import content_text
from vfgym.rubrics.reward_call import to_reward
from vfgym.types import ChatMessage, Messages, State

if TYPE_CHECKING:
    from vfgym.gym.rows import Row

ObservationMode = Literal["text", "messages"]
Observation = str | list[ChatMessage]
Action = str | ChatMessage
#: What `step` returns: observation, reward, terminated, truncated, info.
StepResult = tuple[Observation, float, bool, bool, dict[str, Any]]


class EpisodeCore(gym.Env[Observation, Action]):
    """The adapter's attributes and the episode bookkeeping both step paths share."""

    # Slots rather than the instance dict: from 30 keys on, CPython stops sharing an
    # instance dict's keys and every attribute read takes a slower path, and a step
    # reads a dozen of these. (`gym.Env`'s own attributes, `spec` and the random
    # generator, stay in the dict, as does anything a subclass adds.)
    __slots__ = (
        "_async_cleanup",
        "_busy",
        "_chat",
        "_cleaned",
        "_closed",
        "_count_tokens",
        "_default_cleanup",
        "_default_finish",
        "_default_init",
        "_default_setup",
        "_done",
        "_episode_loop",
        "_episodes",
        "_human",
        "_inline",
        "_loop",
        "_max_text_length",
        "_observation_mode",
        "_outbox",
        "_per_step_reward",
        "_plain_reset",
        "_plain_text",
        "_prompt_texts",
        "_render_mode",
        "_row_cache",
        "_row_rng",
        "_row_rng_source",
        "_ship",
        "_state",
        "_step_reward",
        "_text_turn",
        "_view",
        "action_space",
        "environment",
        "observation_space",
        "owns_environment",
        "rows",
    )

    environment: MultiTurnEnv
    owns_environment: bool
    rows: list[dict[str, Any]]
    observation_space: UnicodeText | MessagesSpace
    action_space: ModelTurnSpace
    _observation_mode: ObservationMode
    _per_step_reward: bool
    _render_mode: str | None
    _max_text_length: int
    _count_tokens: Callable[[str], int] | None
    _chat: bool
    _step_reward: Callable[[State], Any] | None
    _inline: bool
    _text_turn: Callable[[State, str], tuple[Messages, str | None]]
    _default_setup: bool
    _default_cleanup: bool
    _default_finish: bool
    _async_cleanup: bool
    _default_init: bool
    _human: bool
    _episode_loop: asyncio.AbstractEventLoop | None
    _state: State | None
    _view: StateView | None
    _done: bool
    _cleaned: bool
    _busy: bool
    _closed: bool
    _loop: asyncio.AbstractEventLoop | None
    _ship: bool
    _plain_text: bool
    _plain_reset: bool
    _outbox: Outbox | None
    _prompt_texts: dict[tuple[Any, ...], Observation]
    _row_cache: dict[int, Row]
    _row_rng: random.Random | None
    _row_rng_source: np.random.Generator | None
    _episodes: int

    def _claim(self, what: str) -> None:
        """Refuse a second reset/step on this env while one is running."""
        if self._busy:
            if what in _ENDING_CALLS:
                raise RuntimeError(
                    f"{what}() was called while a reset/step of this env is still running; "
                    f"let it finish (await it; a cancelled one first unwinds), then call "
                    f"{what}() again"
                )
            raise RuntimeError(
                f"{what}() was called while another reset/step of this env is still "
                "running (or, cancelled, still unwinding: await its task first); one env "
                "plays one episode at a time — use a vector env or one GymEnv per "
                "concurrent episode"
            )
        self._busy = True

    def _require_running(self, call: str = "step") -> State:
        """The running episode's State; raises, naming `call`, when none runs."""
        if self._state is None:
            raise gym.error.ResetNeeded(f"call reset() before {call}()")
        if self._closed:
            raise gym.error.ResetNeeded(
                "this env was closed; call reset() to start a new episode (or make a new env)"
            )
        if self._done:
            raise gym.error.ResetNeeded(
                f"the episode has ended (stop reason: {self._state.get('stop_reason')}"
                f"{_error_told(self._state)}); call reset() to start a new one"
            )
        return self._state

    def _refuse_step(self) -> None:
        """Raise why a step cannot run now: another reset/step of this env is running,
        or no episode is (`_require_running` says which)."""
        if self._busy:
            self._claim("step")
        self._require_running()

    def _episode_running(self) -> bool:
        """True while an episode's cleanup has not run."""
        return self._state is not None and not self._cleaned

    def _truncating(self, stop_reason: str) -> State:
        """The running episode, marked as ended by `stop_reason`; raises before anything
        changes when there is no running episode or the reason is not a truncation."""
        if stop_reason not in TRUNCATING:
            raise ValueError(
                f"truncate() ends an episode cut short; stop_reason must be one of "
                f"{sorted(TRUNCATING)}, not {stop_reason!r}"
            )
        state = self._require_running("truncate")
        self.environment.finish(state, stop_reason)
        self._done = True
        return state

    def _failed(self, state: State, exc: BaseException) -> None:
        """A hook raised: the episode ends as an error (its cleanup follows)."""
        state["error"] = error_record(exc)
        self.environment.finish(state, "error")
        self._done = True

    async def _cleanup(self, state: State) -> None:
        """`cleanup_state`, at most once per episode; a failure is recorded, not raised."""
        if self._cleaned:
            return
        self._cleaned = True
        env = self.environment
        try:
            await env.call_hook(env.cleanup_state, (state,), {})
        except Exception as exc:
            self._cleanup_failed(state, exc)
        except asyncio.CancelledError:
            # An async cleanup was interrupted: a later close() runs it again. A sync
            # one ran to its end (the cancellation waited for its thread).
            if is_async_callable(env.cleanup_state):
                self._cleaned = False
            raise
        except BaseException:  # interrupted: a later close() runs it again
            self._cleaned = False
            raise

    def _cleanup_sync(self, state: State) -> None:
        if self._cleaned:
            return
        self._cleaned = True
        try:
            if not self._default_cleanup:
                cleanup: Callable[[State], Awaitable[None] | None] = self.environment.cleanup_state
                call_inline(cleanup, state)
        except Exception as exc:
            self._cleanup_failed(state, exc)
        except BaseException:  # interrupted: a later close() runs it again
            self._cleaned = False
            raise

    def _cleanup_failed(self, state: State, exc: Exception) -> None:
        state["cleanup_error"] = error_record(exc)
        self.environment.logger.warning("cleanup of a Gym episode failed: %s", exc)

    async def _abandon(self) -> None:
        """End the running episode as a reset in mid-episode ends it: over and cleaned
        up on the running loop (a failed cleanup recorded in the State), not scored,
        since no one asked for its result. A vector env does this before it starts
        episodes on another loop."""
        if not self._episode_running():
            return
        self._claim("end_episodes")
        try:
            self._done = True
            await self._cleanup(self._state)  # type: ignore[arg-type]
        finally:
            self._busy = False

    def _abandon_sync(self) -> None:
        """`_abandon` for an episode whose cleanup needs no event loop."""
        if not self._episode_running():
            return
        self._claim("end_episodes")
        try:
            self._done = True
            self._cleanup_sync(self._state)  # type: ignore[arg-type]
        finally:
            self._busy = False

    def _model_turn(self, action: Any) -> ChatMessage | str:
        """The action as the message to record; raises before anything changes."""
        if isinstance(action, str):
            return {"role": "assistant", "content": action} if self._chat else action
        return model_turn(action, chat=self._chat)

    def _count_turn(self, state: State, turn: ChatMessage | str) -> None:
        """Add the model's turn to `state["completion_tokens"]`, as a rollout adds the
        server's count: its text and, for tool calls, each call's name and arguments."""
        if isinstance(turn, str):
            text = turn
        else:
            parts = [content_text(turn.get("content"))]
            for call in turn.get("tool_calls") or ():
                function = call.get("function") or {}
                parts += [function.get("name") or "", function.get("arguments") or ""]
            text = "".join(parts)
        count = self._count_tokens(text)  # type: ignore[misc]
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
            raise TypeError(f"count_tokens must return a token count (an int >= 0), not {count!r}")
        state["completion_tokens"] += int(count)

    def _step_reward_value(self, value: Any) -> float:
        """`step_reward`'s result as the step's reward: what a reward function may
        return (a number, a numpy scalar or bool, a Fraction...), anything else refused."""
        try:
            return to_reward("step_reward", value)
        except TypeError:
            raise TypeError(
                f"{type(self.environment).__name__}.step_reward(state) must return a "
                f"number (the reward of the step just made), not {value!r}"
            ) from None

    def _last_step(
        self,
        observation: Observation,
        reward: float,
        info: dict[str, Any],
        stop: str,
        score: tuple[float, dict[str, float]],
    ) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        """What the episode's last step returns, given the rubric's (reward, metrics)."""
        episode_reward, metrics = score
        info["stop_reason"] = stop
        info["episode_reward"] = episode_reward
        info["metrics"] = dict(metrics)
        truncated = stop in TRUNCATING
        return observation, reward + episode_reward, not truncated, truncated, info


#: Calls that end the episode, told to wait for a running reset/step (see `_claim`).
_ENDING_CALLS = frozenset({"close", "aclose", "truncate", "atruncate", "end_episodes"})


def _error_told(state: State) -> str:
    """What ended an episode that ended in an error, for the error a later step raises:
    "stop reason: error" alone does not say that a step was cancelled, or what failed."""
    if state.get("stop_reason") != "error":
        return ""
    error = state.get("error")
    if not isinstance(error, Mapping):
        return ""
    kind, message = error.get("type"), error.get("message")
    if kind == "CancelledError":
        return ": a reset/step of it was cancelled (e.g. by asyncio.wait_for), which ends it"
    return f": {kind}: {str(message)[:200]}" if message else f": {kind}"


def with_state_defaults(
    state: State,
    prompt: Messages,
    completion: Messages,
    answer: str,
    task: str,
    info: dict[str, Any],
    example_id: int,
) -> State:
    """An `init_state` override's State with the keys the turn loop keeps that it left
    out (a State shaped like the type reference's example has no `completion_tokens`),
    as a rollout completes it."""
    defaults = new_state(prompt, completion, answer, task, info, example_id)
    return fill_state_defaults(state, defaults)
