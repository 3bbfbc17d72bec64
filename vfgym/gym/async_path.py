"""A `GymEnv` episode driven as coroutines: for environments whose hooks may wait.

A layer of `GymEnv` (see `vfgym.gym.env`). Each piece of an episode comes twice: as
a coroutine here, run on an event loop (the env's private one for sync calls, the
caller's for `areset`/`astep`), and as plain sync code in `vfgym.gym.sync_path` for
environments whose hooks never wait (`env.hooks_are_sync`), where a loop, or even
driving a coroutine, would cost more than a game's move. The two differ only in how
they call the hooks; what happens around them lives in the shared layers below
(`_row_args`, `_started`, `_failed`, `_cleanup`, `_last_step`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from vfgym.engine._async import maybe_await
from vfgym.gym.episode import Observation, with_state_defaults
from vfgym.gym.loops import LoopKeeping
from vfgym.gym.scoring import score_sync, scoring_failed
from vfgym.rubrics.rubric import rollout_args
from vfgym.types import ChatMessage, Messages, State


class AsyncEpisodes(LoopKeeping):
    """Reset, step, truncate and score as coroutines."""

    __slots__ = ()

    async def _reset(self, index: int) -> tuple[Observation, dict[str, Any]]:
        self._closed = False
        if self._state is not None and not self._cleaned:  # reset in mid-episode
            self._done = True
            await self._cleanup(self._state)
        env = self.environment
        prompt, answer, task, info, example_id = self._row_args(index)
        # What the hooks open (a sandbox session, a client) belongs to this loop.
        self._episode_loop = asyncio.get_running_loop()
        completion: Messages = await maybe_await(env.init_completion)
        args = (prompt, completion, answer, task, info, example_id)
        state: State = await maybe_await(env.init_state, *args)
        state = with_state_defaults(state, prompt, completion, answer, task, info, example_id)
        self._state, self._done, self._cleaned = state, False, False
        try:
            # (a sync setup through the environment's offloader, as in its rollouts)
            ready = await env.call_hook(env.setup_state, (state,), {})
        except BaseException as exc:
            self._failed(state, exc)
            await self._cleanup(state)
            raise
        return self._started(state, ready)

    async def _step(
        self, message: ChatMessage | str, *, sync_scoring: bool
    ) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        state = self._require_running()
        self._check_episode_loop()
        env = self.environment
        try:
            if self._count_tokens is not None:
                self._count_turn(state, message)
        except BaseException as exc:
            self._failed(state, exc)
            await self._cleanup(state)
            raise
        env.record_model_turn(state, message)
        try:
            env_messages, stop = await env.advance(state)
            reward = 0.0
            if self._step_reward is not None:
                reward = self._step_reward_value(await maybe_await(self._step_reward, state))
        except BaseException as exc:
            self._failed(state, exc)
            await self._cleanup(state)
            raise
        observation = self._observe(env_messages)
        info = self._info(state)
        if stop is None:
            if self._human:
                self._show_turn(message, env_messages)
            return observation, reward, False, False, info
        env.finish(state, stop)
        self._done = True
        await self._cleanup(state)
        score = await self._ascore(state, sync_scoring=sync_scoring)
        if self._human:
            self._show_turn(message, env_messages)
        return self._last_step(observation, reward, info, stop, score)

    async def _truncate(
        self, stop_reason: str, *, sync_scoring: bool
    ) -> tuple[float, dict[str, float]]:
        if self._state is not None and not self._done:
            self._check_episode_loop("truncate")
        state = self._truncating(stop_reason)
        await self._cleanup(state)
        reward, metrics = await self._ascore(state, sync_scoring=sync_scoring)
        return reward, dict(metrics)

    async def _ascore(self, state: State, *, sync_scoring: bool) -> tuple[float, dict[str, float]]:
        """The finished episode's (reward, metrics) on the running loop; in this thread
        first when `sync_scoring` (a sync caller, whose loop has nothing else to run)."""
        rubric = self.environment.rubric
        try:
            score = score_sync(rubric, state) if sync_scoring else None
            if score is None:
                verdict = await rubric.score_rollout(*rollout_args(state))
                score = verdict.reward, verdict.metrics
        except Exception as exc:
            scoring_failed(state, exc)
            raise
        return score
