"""SandboxEnv: a tool environment whose tools run in one Docker sandbox per rollout."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any

from vfgym.envs.stateful_tool_env import StatefulToolEnv
from vfgym.envs.tool_env import checked_tools
from vfgym.errors import INFRASTRUCTURE_ERRORS, SandboxLostError, SandboxStartError
from vfgym.sandbox.config import SandboxConfig
from vfgym.sandbox.pool import SandboxPool
from vfgym.sandbox.sandbox import DockerSandbox
from vfgym.types import ChatMessage, Messages, State

#: The parameter name through which a tool receives its rollout's sandbox.
SANDBOX_ARG = "sandbox"
#: What the model reads when its sandbox died during its call and was replaced.
REPLACED_AFTER_NOTE = (
    "the environment replaced the crashed sandbox with a fresh one, set up as at the "
    "start of the task; earlier files, processes and Python variables are gone"
)
#: What the model reads when its sandbox was found dead before its call and replaced.
REPLACED_BEFORE_NOTE = (
    "the sandbox had crashed since your last call; this call ran in a fresh one, set up "
    "as at the start of the task; earlier files, processes and Python variables are gone"
)

#: A rollout's lease: the pool's context manager, the sandbox, and the pool it came
#: from (a replacement comes from the same pool, never from a new one).
_Lease = tuple[AbstractAsyncContextManager[DockerSandbox], DockerSandbox, SandboxPool]


def _as_sandbox_config(value: SandboxConfig | Mapping[str, Any] | None) -> SandboxConfig:
    """The config to run with; a plain dict (as from a YAML file) is turned into one
    here, so a wrong key or value fails now and not at the first rollout."""
    if value is None:
        return SandboxConfig()
    if isinstance(value, SandboxConfig):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(
            "sandbox_config must be a SandboxConfig (or a dict of its fields), "
            f"got {type(value).__name__}: {value!r}"
        )
    known = {field.name for field in dataclasses.fields(SandboxConfig)}
    unknown = sorted(str(key) for key in value if key not in known)
    if unknown:
        raise ValueError(
            f"sandbox_config has unknown field(s) {', '.join(unknown)}; "
            f"SandboxConfig's fields are {', '.join(sorted(known))}"
        )
    return SandboxConfig(**value)


def _refuse_misnamed_sandbox(
    tool: Callable[..., Any], parameters: Iterable[inspect.Parameter], skip: set[str]
) -> None:
    """Refuse a parameter annotated as a sandbox under another name than `sandbox`:
    only that name is filled in, and the model would be offered the sandbox as an
    argument of its own (which fails as a schema no one can send)."""
    for param in parameters:
        annotation = param.annotation
        named = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
        if param.name not in skip and named == DockerSandbox.__name__:
            raise TypeError(
                f"tool {getattr(tool, '__name__', tool)!r} takes the sandbox as "
                f"{param.name!r}: a SandboxEnv hands the rollout's sandbox only to a "
                f"parameter called `{SANDBOX_ARG}`, so name it `{SANDBOX_ARG}`"
            )


class SandboxEnv(StatefulToolEnv):
    """Offers `python` and `bash` tools (plus any tool an author adds) that run in a
    sandbox of their own for each rollout.

    A tool that takes a `sandbox: DockerSandbox` parameter gets the rollout's
    sandbox there; the model never sees that parameter. The sandbox comes from a
    warm pool in `setup_state` and goes back (wiped) in `cleanup_state`, which
    the turn loop runs however the episode ends, so concurrent rollouts never
    share processes, files or Python state. Every call lands in
    `state["tools_called"]` like any ToolEnv call. The pool belongs to this
    environment and to the event loop that first used it; release it with
    `await env.aclose()` or `async with env:`.

    A sandbox that dies in mid-episode (its code took it down, or its container
    was killed) is replaced by a fresh one, prepared again by `prepare_sandbox`,
    and the tool reply tells the model that everything from before is gone. When
    no replacement can be had, or a tool raises one of `INFRASTRUCTURE_ERRORS`
    (Docker unreachable, a sandbox that would not start, a lost sandbox), the
    rollout ends as an error (`state["error"]`): it is the infrastructure's
    failure, so it is never fed to the model or counted against it.
    """

    infrastructure_errors = INFRASTRUCTURE_ERRORS

    def __init__(
        self,
        sandbox_config: SandboxConfig | Mapping[str, Any] | None = None,
        pool_size: int = 4,
        tools: list[Callable[..., Any]] | None = None,
        max_turns: int = 10,
        python_tool: bool = True,
        bash_tool: bool = True,
        **kwargs: Any,
    ):
        if not isinstance(pool_size, int) or isinstance(pool_size, bool) or pool_size <= 0:
            raise ValueError(f"pool_size must be a positive number of sandboxes, got {pool_size!r}")
        self.sandbox_config = _as_sandbox_config(sandbox_config)
        self.pool_size = pool_size
        self._pools: dict[asyncio.AbstractEventLoop, SandboxPool] = {}
        self._pool_locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}
        # Keyed by the identity of the rollout's State dict, which lives exactly as
        # long as the episode: nothing run-specific is written into the State, so
        # two replays of one seed have equal States (Gymnasium's check_env).
        self._leases: dict[int, _Lease] = {}
        # Rollouts whose sandbox was replaced before a call: that call's reply says so.
        self._replaced: set[int] = set()
        # One lock per rollout replacing its sandbox, so two calls never both replace it.
        self._replacing: dict[int, asyncio.Lock] = {}
        super().__init__(tools=None, max_turns=max_turns, **kwargs)
        if python_tool:
            self.add_tool(self.python)
        if bash_tool:
            self.add_tool(self.bash)
        for tool in checked_tools(tools):
            self.add_tool(tool)

    # ------------------------------------------------------------- tools

    async def python(self, code: str, sandbox: DockerSandbox) -> str:
        """Run Python code in a persistent session: variables and imports are kept
        between calls, and the value of a last expression is shown.

        Args:
            code: Python source to execute.
        """
        return (await sandbox.run_python(code)).summary()

    async def bash(self, command: str, sandbox: DockerSandbox) -> str:
        """Run a bash command in the workspace directory and show its output. Files
        there cannot be executed directly: run a script with its interpreter
        (`bash run.sh`, `python3 main.py`).

        Args:
            command: The shell command line to run.
        """
        return (await sandbox.run_shell(command)).summary()

    def add_tool(self, tool: Callable[..., Any], args_to_skip: Iterable[str] = ()) -> None:
        """Offer `tool`; a `sandbox` parameter of it is always filled in by the env."""
        skip = set(args_to_skip)
        parameters = inspect.signature(tool).parameters
        if SANDBOX_ARG in parameters:
            skip.add(SANDBOX_ARG)
        _refuse_misnamed_sandbox(tool, parameters.values(), skip)
        super().add_tool(tool, args_to_skip=sorted(skip))

    async def update_tool_args(
        self,
        tool_name: str,
        tool_args: dict[str, Any],
        messages: Messages,
        state: State,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Hand the tool the rollout's sandbox, replaced first if it died since the last call."""
        if SANDBOX_ARG not in self.skipped_args.get(tool_name, []):
            return tool_args
        replacing = self._replacing.get(id(state))
        if replacing is not None and replacing.locked():
            async with replacing:  # another call of this turn is replacing it: take the new one
                pass
        sandbox = self.sandbox_for(state)
        if not sandbox.alive:
            sandbox = await self._replace_sandbox(state)
            self._replaced.add(id(state))
        return {**tool_args, SANDBOX_ARG: sandbox}

    async def call_tool(
        self, tool_name: str, tool_args: dict[str, Any], tool_call_id: str, **kwargs: Any
    ) -> ChatMessage:
        """Run the tool; if its sandbox died under the call, replace the sandbox now.

        The model then reads in this reply (or, for a replacement made before the
        call, at its head) that a fresh sandbox took over, so "all state is gone"
        is true when it is told so, and its next call runs in a working sandbox. A
        tool that raises because its own sandbox died under it (its program took the
        sandbox down) gets the same: the crash is the model's doing, so it is
        answered, not ended as an infrastructure failure.
        """
        state = kwargs.get("state")
        sandbox = tool_args.get(SANDBOX_ARG)
        replaced_before = state is not None and id(state) in self._replaced
        self._replaced.discard(id(state))  # this call is the one to tell, whatever happens
        try:
            reply = await super().call_tool(tool_name, tool_args, tool_call_id, **kwargs)
        except Exception as exc:
            dead = isinstance(exc, SandboxLostError) and self._died_under(state, sandbox)
            if isinstance(exc, self.infrastructure_errors) and not dead:
                raise  # not a crash of this rollout's sandbox: the infrastructure failed
            if not (dead or replaced_before):
                raise  # the tool's own error: ToolEnv answers it (and counts it)
            # Answered here, so the reply can say the sandbox is new (cut as ToolEnv cuts).
            reply = {"role": "tool", "content": self._error_text(self.error_formatter(exc))}
            reply["tool_call_id"] = tool_call_id
        if state is None:  # an override that passed no state: the next call replaces it
            return reply
        content = str(reply.get("content") or "")
        if replaced_before:
            content = f"[{REPLACED_BEFORE_NOTE}]\n{content}"
        if self._died_under(state, sandbox):
            await self._replace_sandbox(state)
            content = f"{content}\n[{REPLACED_AFTER_NOTE}]"
        return {**reply, "content": content}

    def _died_under(self, state: State | None, sandbox: Any) -> bool:
        """True when `sandbox`, the one the rollout of `state` still holds, is dead."""
        return (
            state is not None
            and isinstance(sandbox, DockerSandbox)
            and not sandbox.alive
            and self._holds(state, sandbox)
        )

    def _holds(self, state: State, sandbox: DockerSandbox) -> bool:
        """True when `sandbox` is the one the rollout of `state` holds now."""
        entry = self._leases.get(id(state))
        return entry is not None and entry[1] is sandbox

    def sandbox_for(self, state: State) -> DockerSandbox:
        """The sandbox of the rollout that `state` belongs to."""
        key = id(state)
        if key not in self._leases:
            name = type(self).__name__
            raise RuntimeError(
                "this rollout holds no sandbox: setup_state acquires one, cleanup_state "
                "releases it; call tools only in between. An override of setup_state (as "
                f"{name}.setup_state) must call `state = await super().setup_state(state, "
                "**kwargs)`"
            )
        return self._leases[key][1]

    # ------------------------------------------------------------- rollout hooks

    async def setup_state(self, state: State, **kwargs: Any) -> State:
        state = await super().setup_state(state, **kwargs)
        await self._lease_for(state)
        return state

    async def prepare_sandbox(self, sandbox: DockerSandbox, state: State) -> None:
        """Make a fresh sandbox ready for the rollout of `state` (write its files, say).

        Runs on the sandbox acquired at setup and again on any replacement after a
        crash, so a replacement starts as the episode did. The default does nothing.
        """

    async def cleanup_state(self, state: State, **kwargs: Any) -> None:
        try:
            self._replaced.discard(id(state))
            self._replacing.pop(id(state), None)
            await self._release(state)  # wipes it for the next rollout
        finally:
            await super().cleanup_state(state, **kwargs)

    async def _lease_for(self, state: State, pool: SandboxPool | None = None) -> DockerSandbox:
        """Lease a sandbox for the rollout of `state` (from `pool`, else this loop's)
        and prepare it.

        The lease is recorded before `prepare_sandbox` runs, so cleanup_state
        returns the sandbox even when preparing it fails.
        """
        if pool is None:
            pool = await self._pool()
        lease = pool.acquire()
        sandbox = await lease.__aenter__()
        self._leases[id(state)] = (lease, sandbox, pool)
        prepared = self.prepare_sandbox(sandbox, state)
        if inspect.isawaitable(prepared):  # a subclass may override it with a plain `def`
            await prepared
        return sandbox

    async def _release(self, state: State) -> None:
        """Give the rollout's sandbox back to the pool (wiped, or replaced if dead)."""
        entry = self._leases.pop(id(state), None)
        if entry is not None:
            await entry[0].__aexit__(None, None, None)

    async def _replace_sandbox(self, state: State) -> DockerSandbox:
        """Swap the rollout's dead sandbox for a fresh, prepared one.

        Any failure here is the infrastructure's, whatever its type, so it is
        raised as one of `INFRASTRUCTURE_ERRORS`: the rollout ends as an error.
        """
        lock = self._replacing.setdefault(id(state), asyncio.Lock())
        async with lock:  # calls run side by side replace once; the others take the new one
            entry = self._leases.get(id(state))
            if entry is not None and entry[1].alive:
                return entry[1]
            return await self._replace_dead(state, entry)

    async def _replace_dead(self, state: State, entry: _Lease | None) -> DockerSandbox:
        """`_replace_sandbox`'s work, from the pool the dead sandbox came from: one
        closed meanwhile (`aclose`) raises SandboxClosedError rather than starting a
        new pool that nothing would close."""
        try:
            await self._release(state)
            return await self._lease_for(state, entry[2] if entry is not None else None)
        except INFRASTRUCTURE_ERRORS:
            raise
        except Exception as exc:
            raise SandboxStartError(
                f"the rollout's sandbox died and no replacement could be made ready: "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    # ------------------------------------------------------------- the pool

    async def _pool(self) -> SandboxPool:
        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is not None:
            return pool
        lock = self._pool_locks.setdefault(loop, asyncio.Lock())
        async with lock:
            if loop not in self._pools:
                pool = SandboxPool(self.sandbox_config, self.pool_size)
                await pool.start()
                self._pools[loop] = pool
            return self._pools[loop]

    @contextlib.asynccontextmanager
    async def acquire_sandbox(self) -> AsyncIterator[DockerSandbox]:
        """A sandbox of this environment's pool outside any rollout (e.g. for scoring).

        The rollout's own sandbox is wiped and returned when the episode ends,
        before the rubric runs; a rubric that must run code uses this.
        """
        pool = await self._pool()
        async with pool.acquire() as sandbox:
            yield sandbox

    async def aclose(self) -> None:
        """Destroy this environment's sandboxes (of every event loop it ran on)."""
        current = asyncio.get_running_loop()
        pools, self._pools = self._pools, {}
        self._pool_locks.clear()
        for loop, pool in pools.items():
            if loop is current:
                await pool.close()
            else:  # that loop is finished or busy elsewhere: remove its containers directly
                await asyncio.to_thread(pool.destroy_now)

    async def __aenter__(self) -> SandboxEnv:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
