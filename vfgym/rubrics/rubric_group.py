"""RubricGroup: several rubrics scored as one.

Useful when rewards come from independent sources (a correctness rubric, a
judge, a tool-use counter): each keeps its own parser and functions. Rewards
add up; metrics of the same name are summed, so `reward_errors` is the total
count of failed functions across the group.

A batch (`score_rollouts`) is scored as any rubric's: the group's `score_group`
hook runs once (by default, each member's hook in turn), then each rollout is
scored by every member (`score_rollout`); an errored rollout gets NaN throughout.
`generate` runs the hook over each example's group when any member has one
(`has_group_hook`).

Reward functions given to the group itself join its first member and use that
member's parser and class_objects; a group given its own parser or class_objects
refuses them rather than score them with settings that are not the ones given.
"""

from __future__ import annotations

from typing import Any

from vfgym.rubrics.rubric import Rubric
from vfgym.rubrics.scores import REWARD_ERRORS, add_scoring_time
from vfgym.types import Info, Messages, RewardFunc, RolloutScore, State


def _total_ms(state: State | None) -> float:
    """The rollout's total time so far; 0 for a rollout given without a State."""
    timing = state.get("timing") if isinstance(state, dict) else None
    return timing.get("total_ms", 0.0) if isinstance(timing, dict) else 0.0


def _settle_timing(state: State, total_before: float) -> None:
    """Make `scoring_ms` the whole group's time: the members each added their own to the total."""
    spent = _total_ms(state) - total_before
    add_scoring_time(state, 0.0)
    state["timing"]["scoring_ms"] = spent


def _own_settings(kwargs: dict[str, Any]) -> list[str]:
    """The settings given to a group that only its own reward functions could use."""
    given = []
    if kwargs.get("parser") is not None:
        given.append("parser")
    if kwargs.get("class_objects"):
        given.append("class_objects")
    return given


def _own_settings_message(settings: list[str]) -> str:
    names = " and ".join(settings)
    return (
        f"RubricGroup was given its own {names} and reward functions, but a group's "
        "functions join its first member rubric and are scored with that member's parser "
        f"and class_objects, not the group's. Put them in a member of their own: "
        f"RubricGroup([..., Rubric(funcs=[...], {settings[0]}=...)])"
    )


class RubricGroup(Rubric):
    """Scores with every member rubric in turn and adds the results up."""

    def __init__(self, rubrics: list[Rubric], **kwargs: Any) -> None:
        if not rubrics:
            raise ValueError("RubricGroup needs at least one rubric")
        bad = [type(r).__name__ for r in rubrics if not isinstance(r, Rubric)]
        if bad:
            raise TypeError(f"RubricGroup members must be Rubric instances, got {bad}")
        # Set first: `Rubric.__init__` hands `funcs=` to `add_reward_func`, which adds
        # them to the first member.
        self.rubrics = list(rubrics)
        members_only = sorted({"offload_sync", "parallelize_scoring"} & set(kwargs))
        if members_only:
            raise TypeError(
                f"RubricGroup does not take {' or '.join(members_only)}: each member scores "
                f"with its own; set it on the member rubrics, e.g. Rubric(..., "
                f"{members_only[0]}=...)"
            )
        self._own_settings = _own_settings(kwargs)
        super().__init__(**kwargs)

    def get_reward_func_names(self) -> list[str]:
        """Every member's function names, member by member."""
        return [name for r in self.rubrics for name in r.get_reward_func_names()]

    def get_reward_funcs(self) -> list[RewardFunc]:
        """Every member's functions, member by member."""
        return [func for r in self.rubrics for func in r.get_reward_funcs()]

    def get_reward_weights(self) -> list[float]:
        """Every member's weights, member by member."""
        return [weight for r in self.rubrics for weight in r.get_reward_weights()]

    def add_reward_func(self, func: RewardFunc, weight: float = 1.0) -> None:
        """Add the function to the first member rubric (the group itself holds none).

        Refused when the group was given a parser or class_objects of its own: the
        function would be scored with the first member's, silently not the group's.
        """
        if self._own_settings:
            raise TypeError(_own_settings_message(self._own_settings))
        self.rubrics[0].add_reward_func(func, weight)

    async def score_rollout(
        self,
        prompt: Messages,
        completion: Messages,
        answer: Any,
        state: State,
        task: str = "default",
        info: Info | None = None,
        example_id: int | None = None,
        **kwargs: Any,
    ) -> RolloutScore:
        """Score with each member in turn; rewards add up, same-named metrics are summed."""
        if state is None:
            state = {}
        total_before = _total_ms(state)
        reward = 0.0
        metrics: dict[str, float] = {}
        for rubric in self.rubrics:
            score = await rubric.score_rollout(
                prompt, completion, answer, state, task, info, example_id, **kwargs
            )
            reward += score.reward
            for key, value in score.metrics.items():
                metrics[key] = metrics.get(key, 0.0) + value
        # Last, as a single rubric has it, whichever member reported it first: the
        # columns of `score_rollouts` and of `generate` then come in the same order.
        metrics[REWARD_ERRORS] = metrics.pop(REWARD_ERRORS, 0.0)
        _settle_timing(state, total_before)
        return RolloutScore(reward=reward, metrics=metrics)

    async def score_group(self, states: list[State], **kwargs: Any) -> None:
        """Every member's `score_group` hook, member by member, each once.

        `score_rollouts` (a group's batch is scored as any rubric's) calls this
        before scoring a rollout, as does a caller that runs the hooks itself (an
        `EnvGroup`'s rubric). A subclass that overrides it and wants the members'
        hooks too calls `await super().score_group(states, **kwargs)`.
        """
        for rubric in self.rubrics:
            await rubric.offloader.call(rubric.score_group, states, **kwargs)

    def has_group_hook(self) -> bool:
        """True when this group's class overrides `score_group`, or any member has a hook."""
        if type(self).score_group is not RubricGroup.score_group:
            return True
        return any(rubric.has_group_hook() for rubric in self.rubrics)
