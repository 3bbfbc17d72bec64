"""`PythonEnv`: a tool environment whose one tool is a stateful Python session per
rollout, run in vfgym's own hardened Docker sandbox (`vfgym.sandbox`).

verifiers 0.1.x ran the same kind of session in a remote sandbox service that needs
an account and the network; here each rollout leases a local container from a warm
pool (no network, capped memory and processes, gVisor when available), so the
environment runs offline and rollouts never share variables, files or processes.
The tool's replies follow 0.1.x's layout: stdout, then `stderr:` and its text, then
the traceback of an error or `Out[n]: <value>` for a final expression.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, TypedDict

from vfgym.sandbox.config import SandboxConfig
from vfgym.sandbox.env import SandboxEnv
from vfgym.sandbox.sandbox import DockerSandbox
from vfgym.types import Messages, State

logger = logging.getLogger(__name__)

#: Keywords of 0.1.x's remote-sandbox PythonEnv that describe that service's machine;
#: vfgym sizes its sandbox with `sandbox_config`, so these are accepted and unused.
REMOTE_SANDBOX_KWARGS = frozenset(
    {
        "sandbox_name",
        "docker_image",
        "start_command",
        "cpu_cores",
        "memory_gb",
        "disk_size_gb",
        "gpu_count",
        "timeout_minutes",
        "environment_vars",
        "team_id",
        "advanced_configs",
    }
)


class PythonWorkerState(TypedDict):
    """What `state["python_env"]` holds: whether the session is up, and how many
    executions it has run (the `n` of `Out[n]`)."""

    ready: bool
    execution_count: int


class PythonEnv(SandboxEnv):
    """A `python` tool with variables and imports kept between calls of one rollout.

    Takes `sandbox_config` and `pool_size` as `vf.SandboxEnv` does, and any
    `ToolEnv` keyword (`tools=` adds more tools, `max_turns=`, `dataset=`, ...).
    """

    def __init__(
        self,
        sandbox_config: SandboxConfig | Mapping[str, Any] | None = None,
        pool_size: int = 4,
        max_turns: int = 10,
        **kwargs: Any,
    ) -> None:
        remote = sorted(set(kwargs) & REMOTE_SANDBOX_KWARGS)
        for name in remote:
            kwargs.pop(name)
        if remote:
            logger.warning(
                "PythonEnv ignores %s: they sized verifiers' remote sandbox; vfgym's local "
                "sandbox is set with sandbox_config=vf.SandboxConfig(...)",
                ", ".join(remote),
            )
        super().__init__(
            sandbox_config=sandbox_config,
            pool_size=pool_size,
            max_turns=max_turns,
            python_tool=False,
            bash_tool=False,
            **kwargs,
        )
        # (added here rather than by SandboxEnv, to hide the counter from the model too)
        self.add_tool(self.python, args_to_skip=["python_state"])

    async def setup_state(self, state: State, **kwargs: Any) -> State:
        """Lease the rollout's sandbox, and count its executions from zero."""
        state = await super().setup_state(state, **kwargs)
        state["python_env"] = {"ready": True, "execution_count": 0}
        return state

    async def update_tool_args(  # type: ignore[override]  # async, as SandboxEnv's
        self,
        tool_name: str,
        tool_args: dict[str, Any],
        messages: Messages,
        state: State,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Hand `python` the rollout's sandbox and its execution counter."""
        tool_args = await super().update_tool_args(tool_name, tool_args, messages, state, **kwargs)
        if tool_name == "python":
            tool_args = {**tool_args, "python_state": state.setdefault("python_env", {})}
        return tool_args

    async def python(
        self, code: str, sandbox: DockerSandbox, python_state: dict[str, Any] | None = None
    ) -> str:
        """Execute `code` inside a persistent Python REPL: variables and imports are kept
        between calls, and the value of a final expression is shown.

        Args:
            code: Python source to execute.
        """
        result = await sandbox.run_python(code)
        if result.timed_out or result.sandbox_lost or result.oom_killed:
            return result.summary()
        counter = python_state if python_state is not None else {}
        counts = counter.get("execution_count", 0) + 1
        counter["execution_count"] = counts
        stdout = result.stdout.rstrip()
        if result.value is not None and stdout.endswith(result.value):
            # the sandbox's session echoes a final value like a REPL; 0.1.x showed it
            # once, as `Out[n]`
            stdout = stdout[: -len(result.value)].rstrip()
        parts = []
        if stdout:
            parts.append(stdout)
        failed = result.exit_code not in (0, None)
        if result.stderr.rstrip():
            parts.append(result.stderr.rstrip() if failed else f"stderr:\n{result.stderr.rstrip()}")
        if not failed and result.value is not None:
            parts.append(f"Out[{counts}]: {result.value}")
        return "\n".join(parts) or "(no output)"
