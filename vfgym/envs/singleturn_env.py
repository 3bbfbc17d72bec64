"""One question, one answer."""

from __future__ import annotations

from typing import Any

from vfgym.engine._async import never_suspends
from vfgym.envs.multiturn_env import MultiTurnEnv
from vfgym.types import Messages, State


class SingleTurnEnv(MultiTurnEnv):
    """The model answers once and the episode is over."""

    @never_suspends
    async def is_completed(self, messages: Messages, state: State, **kwargs: Any) -> bool:
        return state["turn"] > 0

    @never_suspends
    async def env_response(
        self, messages: Messages, state: State, **kwargs: Any
    ) -> tuple[Messages, State]:
        return ([] if self.message_type == "chat" else ""), state
