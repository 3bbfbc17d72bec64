"""Tools with arguments the model never sees, filled in per rollout."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from vfgym.envs.tool_env import ToolEnv
from vfgym.tools.schema import Tool, tool_name
from vfgym.types import Messages, State


class StatefulToolEnv(ToolEnv):
    """A ToolEnv whose tools take hidden arguments (a sandbox id, a session).

    `add_tool(tool, args_to_skip=[...])` removes those parameters from the schema
    the model sees (and refuses them if the model sends them anyway);
    `update_tool_args` injects them from the rollout's State before each call.
    """

    def __init__(
        self,
        tools: list[Callable[..., Any]] | None = None,
        max_turns: int = 10,
        **kwargs: Any,
    ):
        self.skipped_args: dict[str, list[str]] = {}
        super().__init__(tools=tools, max_turns=max_turns, **kwargs)

    def add_tool(self, tool: Callable[..., Any], args_to_skip: Iterable[str] = ()) -> None:
        spec = Tool.from_function(tool, hidden_args=args_to_skip)
        self._register(spec)
        self.skipped_args[spec.name] = sorted(spec.hidden_args)

    def remove_tool(self, tool: Callable[..., Any]) -> None:
        super().remove_tool(tool)
        self.skipped_args.pop(tool_name(tool), None)

    @abstractmethod
    def update_tool_args(
        self,
        tool_name: str,
        tool_args: dict[str, Any],
        messages: Messages,
        state: State,
        **kwargs: Any,
    ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
        """Return the arguments with the hidden ones filled in from `state`.

        Sync as in verifiers, or `async def` when filling them in must wait
        (acquiring a sandbox on first use, for example).
        """

    def prepare_tool_args(
        self,
        tool_name: str,
        tool_args: dict[str, Any],
        messages: Messages,
        state: State,
        **kwargs: Any,
    ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
        return self.update_tool_args(tool_name, tool_args, messages, state, **kwargs)
