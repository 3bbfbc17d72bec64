"""vfgym environments in TRL's `GRPOTrainer` (`pip install "vfgym[trl]"`).

`rollout_func(env)`: any vfgym environment (a game, a tool task, a sandboxed task,
an EnvGroup) runs its own multi-turn loop for the trainer, token-exact, with
`rubric_reward` as the reward function (see `vfgym.integrations.trl.rollout`).

Importing this package checks the installed TRL against the tested range and raises
`IntegrationVersionError` naming both when it is outside.
"""

from vfgym.integrations.trl.versions import TRL_TESTED, check_trl_version

check_trl_version()

from vfgym.integrations.trl.policy_server import PolicyServer  # noqa: E402
from vfgym.integrations.trl.rollout import (  # noqa: E402
    REWARD_KEY,
    VFGymRollout,
    rollout_func,
    rubric_reward,
)

__all__ = [
    "REWARD_KEY",
    "TRL_TESTED",
    "PolicyServer",
    "VFGymRollout",
    "check_trl_version",
    "rollout_func",
    "rubric_reward",
]
