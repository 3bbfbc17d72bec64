"""An environment that never ends on its own, so that only the rollout loop's limits stop it."""

from __future__ import annotations

from vfgym.envs import MultiTurnEnv
from vfgym.types import Messages, State

GO = [{"role": "user", "content": "go"}]


class Again(MultiTurnEnv):
    """Never ends on its own: only the loop's limits stop it."""

    def env_response(self, messages: Messages, state: State, **kwargs):
        return [{"role": "user", "content": "again"}], state
