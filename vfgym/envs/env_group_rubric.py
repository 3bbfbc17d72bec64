"""The rubric of an `EnvGroup`: each rollout scored by the rubric of its task's environment.

Split from `env_group.py`: routing a score by task is the rubric's job, and the
group's rubric answers for its members (their group hooks, whether they can
score without an event loop).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vfgym.envs.environment import Environment
from vfgym.errors import UnknownTaskError
from vfgym.rubrics import Rubric
from vfgym.rubrics.scores import NO_VALUE
from vfgym.types import Info, Messages, RolloutScore, State


class EnvGroupRubric(Rubric):
    """Scores each rollout with the rubric of the environment its task names."""

    def __init__(self, env_map: Mapping[str, Environment]):
        super().__init__()
        self.env_map = dict(env_map)

    def _rubric_for(self, task: str) -> Rubric:
        env = self.env_map.get(task)
        if env is None:
            raise UnknownTaskError(
                f"no environment for task {task!r}; tasks are {sorted(self.env_map)}"
            )
        return env.rubric

    def get_reward_func_names(self) -> list[str]:
        names: dict[str, None] = {}
        for env in self.env_map.values():
            names.update(dict.fromkeys(env.rubric.get_reward_func_names()))
        return list(names)

    async def score_rollout(
        self,
        prompt: Messages,
        completion: Messages,
        answer: str,
        state: State,
        task: str = "default",
        info: Info | None = None,
        example_id: int | None = None,
        **kwargs: Any,
    ) -> RolloutScore:
        """The member's score, with every other member's metric present as NaN (no
        value): a batch then has a column for each metric of the group, as verifiers
        0.1.x gave, even when no rollout of a task was drawn."""
        score = await self._rubric_for(task).score_rollout(
            prompt, completion, answer, state, task=task, info=info, example_id=example_id, **kwargs
        )
        for name in self.get_reward_func_names():
            score.metrics.setdefault(name, NO_VALUE)
        return score

    async def score_group(self, states: list[State], **kwargs: Any) -> None:
        """Each member's `score_group` over the rollouts of its own task.

        A member's group hook compares the rollouts it scores (ranks them, votes), so
        it sees its own task's, never another task's; the per-rollout columns
        (`completions`, `answers`, ...) are cut to the same rollouts. Rollouts of a task
        that names no member are left to `score_rollout`, which says so.
        """
        tasks = kwargs.get("tasks")
        if not isinstance(tasks, list) or len(tasks) != len(states):
            tasks = [state.get("task", "default") for state in states]
        by_task: dict[str, list[int]] = {}
        for i, task in enumerate(tasks):
            by_task.setdefault(task, []).append(i)
        for task, rows in by_task.items():
            env = self.env_map.get(task)
            if env is None:
                continue
            columns = {
                key: [value[i] for i in rows]
                if isinstance(value, list) and len(value) == len(states)
                else value
                for key, value in kwargs.items()
            }
            rubric = env.rubric  # (a plain-method hook runs through the member's offloader)
            await rubric.offloader.call(rubric.score_group, [states[i] for i in rows], **columns)

    def has_group_hook(self) -> bool:
        """True when any member's rubric has a `score_group` hook (or this class
        overrides it): `generate` then scores each example's rollouts together."""
        if type(self).score_group is not EnvGroupRubric.score_group:
            return True
        return any(env.rubric.has_group_hook() for env in self.env_map.values())

    def can_score_sync(self) -> bool:
        """True when every member's rubric can score without an event loop."""
        return all(env.rubric.can_score_sync() for env in self.env_map.values())

    def score_values_sync(
        self,
        prompt: Messages,
        completion: Messages,
        answer: Any,
        state: State,
        task: str = "default",
        info: Info | None = None,
        example_id: int | None = None,
        *,
        apply_weights: bool = True,
        **kwargs: Any,
    ) -> tuple[float, dict[str, float]]:
        """The member rubric's `score_values_sync` (it raises `SyncScoringUnavailable`
        when it needs an event loop, as `Rubric`'s does)."""
        return self._rubric_for(task).score_values_sync(
            prompt,
            completion,
            answer,
            state,
            task,
            info,
            example_id,
            apply_weights=apply_weights,
            **kwargs,
        )

    def score_state_sync(self, state: State) -> tuple[float, dict[str, float]]:
        """The member rubric's `score_state_sync`: how the Gym adapter scores an
        episode's end, in its thread when the member's reward functions are sync."""
        return self._rubric_for(state.get("task", "default")).score_state_sync(state)
