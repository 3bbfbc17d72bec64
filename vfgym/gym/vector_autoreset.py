"""The autoreset of a `GymVectorEnv`: what follows the end of a sub-env's episode.

A layer of `GymVectorEnv` (see `vfgym.gym.vector`), as Gymnasium 1.x defines the
modes: NEXT_STEP (the default) marks the ended sub-env and resets it on the next
step, ignoring that step's action; SAME_STEP resets it within the step, the ended
episode's observation and info moving into `final_obs`/`final_info`; DISABLED leaves
the reset to the caller. The vector env's own step limit (`max_episode_steps`, as
Gymnasium's `TimeLimit`) truncates here too.
"""

from __future__ import annotations

from typing import Any

from gymnasium.vector import AutoresetMode

from vfgym.gym.vector_upkeep import StepResult, SubEnvFailure, SubEnvUpkeep

_SAME_STEP = AutoresetMode.SAME_STEP


class Autoresetting(SubEnvUpkeep):
    """Step limits and autoreset, per sub-env."""

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
                return SubEnvFailure(exc, result)  # type: ignore[return-value]
        return result
