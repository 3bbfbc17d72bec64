"""The rollout engine's environments."""

from vfgym.envs.env_group import EnvGroup, EnvGroupRubric
from vfgym.envs.environment import Environment
from vfgym.envs.multiturn_env import STOP_REASONS, MultiTurnEnv
from vfgym.envs.singleturn_env import SingleTurnEnv
from vfgym.envs.stateful_tool_env import StatefulToolEnv
from vfgym.envs.tool_env import ToolEnv

__all__ = [
    "STOP_REASONS",
    "EnvGroup",
    "EnvGroupRubric",
    "Environment",
    "MultiTurnEnv",
    "SingleTurnEnv",
    "StatefulToolEnv",
    "ToolEnv",
]
