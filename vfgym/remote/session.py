"""One client's session on the env server: a `GymEnv` of its own over the shared environment.

Every session gets its own `GymEnv`, so its episode (State, conversation, random
generator) is its own; the environment object (dataset, rubric, sandbox pool) is
shared, as the rollouts of one `generate` share it. A SandboxEnv hands each episode
its own sandbox from the pool, wiped before the next user gets it, so one session
never sees another's files or processes.

How a step runs: an environment whose hooks never wait (`GymEnv.needs_loop` is False,
every built-in game) steps inline on the server's event loop, with nothing to
overlap; one that waits on sandboxes or HTTP steps with `astep` on the same loop, so
sessions overlap their waits as the rollouts of a batch do.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from vfgym.envs.multiturn_env import MultiTurnEnv
from vfgym.gym.env import GymEnv
from vfgym.remote.protocol import (
    EXECUTION_ERROR,
    VALIDATION_ERROR,
    FrameError,
    action_of,
    observation_data,
    reset_arguments,
)


class Session:
    """A connection's episode: reset, step, state and close, as the protocol asks."""

    def __init__(self, number: int, environment: MultiTurnEnv, max_text_length: int) -> None:
        """`number` names the session in the server's logs and counters."""
        self.number = number
        self.gym = GymEnv(environment, max_text_length=max_text_length)
        self._async = self.gym.needs_loop
        self.episode_id: str | None = None
        self.step_count = 0
        self.last_active = time.monotonic()
        self.closed = False

    def touch(self) -> None:
        """Mark the session active now (the idle timeout counts from here)."""
        self.last_active = time.monotonic()

    async def reset(self, data: dict[str, Any]) -> dict[str, Any]:
        """Start an episode; the observation frame's data."""
        seed, options = reset_arguments(data)
        try:
            if self._async:
                text, info = await self.gym.areset(seed=seed, options=options)
            else:
                text, info = self.gym.reset(seed=seed, options=options)
        except (TypeError, ValueError, IndexError, KeyError) as exc:
            raise FrameError(f"reset refused: {exc}", VALIDATION_ERROR) from None
        episode_id = data.get("episode_id")
        self.episode_id = str(episode_id) if episode_id is not None else uuid.uuid4().hex
        self.step_count = 0
        return observation_data(str(text), None, False, False, info)

    async def step(self, data: dict[str, Any]) -> dict[str, Any]:
        """Play the model's turn; the observation frame's data."""
        if self.gym.state is None or self.gym.episode_over:
            raise FrameError(
                "no episode is running in this session: send a reset frame first (an "
                "episode ends when an observation frame says done, and a new connection is "
                "a new session)",
                VALIDATION_ERROR,
            )
        action: Any = action_of(data)
        try:
            if self._async:
                text, reward, terminated, truncated, info = await self.gym.astep(action)
            else:
                text, reward, terminated, truncated, info = self.gym.step(action)
        except (TypeError, ValueError) as exc:
            if self.gym.episode_over:  # the environment failed mid-step: the episode ended
                raise FrameError(f"the step failed: {exc}", EXECUTION_ERROR) from None
            raise FrameError(f"action refused: {exc}", VALIDATION_ERROR) from None
        except Exception as exc:
            raise FrameError(
                f"the step failed: {type(exc).__name__}: {exc}; reset to start again",
                EXECUTION_ERROR,
            ) from None
        self.step_count += 1
        return observation_data(str(text), float(reward), terminated, truncated, info)

    def state(self) -> dict[str, Any]:
        """The state frame's data: the episode so far (never the answer)."""
        state = self.gym.state
        messages: list[Any] = []
        stop_reason = None
        turn = 0
        if state is not None:
            messages = _conversation(state.get("prompt"), state.get("completion"))
            stop_reason = state.get("stop_reason")
            turn = int(state.get("turn") or 0)
        return {
            "episode_id": self.episode_id,
            "step_count": self.step_count,
            "done": self.gym.episode_over,
            "turn": turn,
            "messages": messages,
            "stop_reason": stop_reason,
        }

    async def close(self) -> None:
        """End the running episode (its cleanup returns its sandbox); idempotent."""
        if self.closed:
            return
        self.closed = True
        if self._async:
            await self.gym.aclose()
        else:
            self.gym.close()


def _conversation(prompt: Any, completion: Any) -> list[Any]:
    """The episode's messages; a completion-style episode's text as one user-less entry."""
    if isinstance(prompt, str) or isinstance(completion, str):
        return [{"role": "text", "content": f"{prompt or ''}{completion or ''}"}]
    return list(prompt or []) + list(completion or [])
