"""A `GymEnv` episode as plain sync code: for environments whose hooks never wait.

A layer of `GymEnv` (see `vfgym.gym.env`), the one every built-in game takes: no
event loop and no coroutine. `_reset_plain` and `_end_sync` inline the shared helpers
for the usual case (a game's), since a call costs a game's reset or episode end a
noticeable share of its time; the fastest step of all, a text action with nothing
else asked for, is inlined into `GymEnv.step` itself. `_step_sync` is the step with
every option, and hands environments that need a loop to `vfgym.gym.async_path`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from vfgym.engine._async import call_inline, settle_inline
from vfgym.engine.data import fresh_copy
from vfgym.engine.state import new_state
from vfgym.envs.multiturn_env import TRUNCATING
from vfgym.errors import SyncScoringUnavailable
from vfgym.gym.async_path import AsyncEpisodes
from vfgym.gym.episode import Action, Observation, with_state_defaults
from vfgym.gym.scoring import score_sync, scoring_failed
from vfgym.gym.state_view import StateView
from vfgym.rubrics.rubric import Rubric, rollout_args
from vfgym.types import ChatMessage, Messages, State

#: A fresh copy of a prompt message: `dict`, typed as the message it copies.
_copy_message = cast("Callable[[ChatMessage], ChatMessage]", dict)


class SyncEpisodes(AsyncEpisodes):
    """Reset, step and score in the caller's thread."""

    __slots__ = ()

    def _reset_sync(self, index: int) -> tuple[Observation, dict[str, Any]]:
        self._closed = False
        if self._state is not None and not self._cleaned:  # reset in mid-episode
            self._done = True
            self._cleanup_sync(self._state)
        env = self.environment
        prompt, answer, task, info, example_id = self._row_args(index)
        self._episode_loop = None  # plain sync hooks: no loop holds anything of it
        if self._default_init:
            state = new_state(prompt, [], answer, task, info, example_id)
        else:
            # (typed and cast: mypy cannot solve `call_inline`'s `T | Awaitable[T]` for a
            # union T such as `Messages`)
            init_completion: Callable[[], Awaitable[Any]] = env.init_completion
            completion = cast(Messages, call_inline(init_completion))
            state = call_inline(env.init_state, prompt, completion, answer, task, info, example_id)
            state = with_state_defaults(state, prompt, completion, answer, task, info, example_id)
        self._state, self._done, self._cleaned = state, False, False
        # (a sync override returns the State or None, an async one an awaitable of it)
        ready: Any = None
        if not self._default_setup:
            try:
                ready = env.setup_state(state)
                if hasattr(ready, "__await__"):  # an async hook that never suspends
                    ready = settle_inline(ready)
            except BaseException as exc:
                self._failed(state, exc)
                self._cleanup_sync(state)
                raise
        return self._started(state, ready)

    def _reset_plain(self, index: int) -> tuple[Observation, dict[str, Any]]:
        """`_reset_sync` for the usual env, a game's (see `_plain_reset`), with
        `_row_args`, `_started`, `_observe_prompt` and `_info` inlined: their calls cost
        a game's reset a fifth of its time. The same State and the same result."""
        self._closed = False
        if self._state is not None and not self._cleaned:  # reset in mid-episode
            self._done = True
            self._cleanup_sync(self._state)
        row = self._row_cache.get(index) or self._cached_row(index)
        prompt = list(map(_copy_message, row.prompt)) if row.chat else row.prompt
        info = dict(row.info) if row.flat_info else fresh_copy(row.info)
        state = new_state(prompt, [], row.answer, row.task, info, row.example_id)
        self._episode_loop = None
        self._state, self._done, self._cleaned = state, False, False
        if not self._default_setup:
            try:
                ready: Any = self.environment.setup_state(state)
                if ready is not state and hasattr(ready, "__await__"):
                    ready = settle_inline(ready)
            except BaseException as exc:
                self._failed(state, exc)
                self._cleanup_sync(state)
                raise
            if ready is not None and ready is not state:
                state.update(ready)
        view = self._view = StateView(state)
        prompt = state["prompt"]
        # The observation of the prompt this row showed before, while the episode's is
        # the same (a `setup_state` may rewrite it): comparing the two costs a fifth of
        # looking the texts up.
        shown = row.shown
        if shown is not None and prompt == shown[0]:
            observation = shown[1]
        else:
            observation = self._observe_prompt(prompt)
            if shown is None:  # (a setup that rewrites every prompt: the first stays)
                row.shown = fresh_copy(prompt), observation
        messages = prompt + state["completion"]
        return observation, {"state": view, "messages": messages, "turn": state["turn"]}

    def _step_sync(self, action: Action) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        """`step` with every option: message actions, a token counter, per-step rewards,
        human rendering, a vector worker's views, hooks that need the event loop."""
        # (`text_turn_sync` takes only text, `_record_and_advance` any checked turn)
        turn: Callable[[State, Any], tuple[Messages, str | None]]
        move: Any  # text for `text_turn_sync`, a checked turn for `_record_and_advance`
        if self._inline and type(action) is str:
            turn, move = self._text_turn, action
        else:
            move = self._model_turn(action)  # raises before anything changes
            if not self._inline:
                return self._drive(self._step(move, sync_scoring=True), "step")
            turn = self._record_and_advance
        if self._busy or self._done:
            self._refuse_step()
        state: State = self._state  # type: ignore[assignment]
        self._busy = True
        try:
            try:
                if self._count_tokens is not None:
                    self._count_turn(state, move)
                env_messages, stop = turn(state, move)
                reward = 0.0
                if self._step_reward is not None:
                    reward = self._step_reward_value(call_inline(self._step_reward, state))
            except BaseException as exc:
                self._failed(state, exc)
                self._cleanup_sync(state)
                raise
            observation = self._observe(env_messages)
            info = self._info(state)
            if stop is None:
                result = observation, reward, False, False, info
            else:
                result = self._end_sync(state, stop, observation, reward, info)
            if self._human:
                self._show_turn(move, env_messages)
            return result
        finally:
            self._busy = False

    def _end_sync(
        self, state: State, stop: str, observation: Observation, reward: float, info: dict[str, Any]
    ) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        """The end of a sync step that ended the episode: finish, clean up, score.

        Every episode ends here, so the default `finish` and an absent cleanup are
        inlined, and the metrics, a dict made for this call, are not copied."""
        if self._default_finish:
            state["stop_reason"] = stop
            state["is_truncated"] = truncated = stop in TRUNCATING
        else:
            self.environment.finish(state, stop)
            truncated = stop in TRUNCATING
        self._done = True
        if self._default_cleanup:
            self._cleaned = True
        else:
            self._cleanup_sync(state)
        rubric = self.environment.rubric
        if type(rubric).score_rollout_sync is Rubric.score_rollout_sync:
            # `_score_here` and `score_sync`, inlined for the usual rubric (a game's):
            # two calls cost a game's episode end a tenth of its time.
            try:
                episode_reward, metrics = rubric.score_state_sync(state)
            except SyncScoringUnavailable:
                episode_reward, metrics = self._score_here(state)
            except Exception as exc:
                scoring_failed(state, exc)
                raise
        else:
            episode_reward, metrics = self._score_here(state)
        info["stop_reason"] = stop
        info["episode_reward"] = episode_reward
        info["metrics"] = metrics
        return observation, reward + episode_reward, not truncated, truncated, info

    def _score_here(self, state: State) -> tuple[float, dict[str, float]]:
        """The finished episode's (reward, metrics), scored in this thread, or on the
        private loop when the rubric has async reward functions."""
        rubric = self.environment.rubric
        try:
            score = score_sync(rubric, state)
            if score is None:
                verdict = self._drive_loop(rubric.score_rollout(*rollout_args(state)))
                score = verdict.reward, dict(verdict.metrics)
        except Exception as exc:
            scoring_failed(state, exc)
            raise
        return score

    def _steps_plain_text(self) -> bool:
        """Whether `step` may take its shortest way for a text action: sync hooks, text
        observations, and none of a token counter, per-step rewards, human rendering or
        a vector worker's views (`_step_sync` handles those)."""
        return (
            self._inline
            and self._observation_mode == "text"
            and self._count_tokens is None
            and self._step_reward is None
            and not self._human
            and not self._ship
        )

    def _record_and_advance(
        self, state: State, message: ChatMessage | str
    ) -> tuple[Messages, str | None]:
        """The turn of a checked message: what `text_turn_sync` is for text."""
        self.environment.record_model_turn(state, message)
        return self.environment.advance_sync(state)
