"""Rubrics: turn a finished rollout into a reward and metrics."""

from vfgym.rubrics.judge_rubric import DEFAULT_JUDGE_PROMPT, JudgeRubric
from vfgym.rubrics.reward_call import RewardSpec, reward_func_name
from vfgym.rubrics.rubric import REWARD_ERRORS, Rubric
from vfgym.rubrics.rubric_group import RubricGroup
from vfgym.rubrics.tool_rubric import ToolCallCounter, ToolRubric

__all__ = [
    "DEFAULT_JUDGE_PROMPT",
    "REWARD_ERRORS",
    "JudgeRubric",
    "RewardSpec",
    "Rubric",
    "RubricGroup",
    "ToolCallCounter",
    "ToolRubric",
    "reward_func_name",
]
