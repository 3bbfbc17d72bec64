"""The rollout engine's environments, and finding them by name (`registry`).

Names load on first use, as `vfgym`'s own do: `vfgym.envs.registry` (which the `vfgym`
command needs before it knows what it will run) must not pull in the environments and
the openai client with them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: Each public name and the module that defines it.
_EXPORTS: dict[str, str] = {
    "EnvGroup": "vfgym.envs.env_group",
    "EnvGroupRubric": "vfgym.envs.env_group",
    "Environment": "vfgym.envs.environment",
    "STOP_REASONS": "vfgym.envs.multiturn_env",
    "MultiTurnEnv": "vfgym.envs.multiturn_env",
    "SingleTurnEnv": "vfgym.envs.singleturn_env",
    "StatefulToolEnv": "vfgym.envs.stateful_tool_env",
    "ToolEnv": "vfgym.envs.tool_env",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'vfgym.envs' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:
    from vfgym.envs.env_group import EnvGroup, EnvGroupRubric
    from vfgym.envs.environment import Environment
    from vfgym.envs.multiturn_env import STOP_REASONS, MultiTurnEnv
    from vfgym.envs.singleturn_env import SingleTurnEnv
    from vfgym.envs.stateful_tool_env import StatefulToolEnv
    from vfgym.envs.tool_env import ToolEnv
