"""Tool use: plain Python functions the model calls through OpenAI tool calls.

`ToolEnv` answers each tool call with a tool message; reading the calls and
writing the results is in `tool_calls.py`, checking its settings in
`tool_settings.py`, and the tools' schemas in `vfgym.tools`.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

from vfgym.engine._async import maybe_await, never_suspends
from vfgym.engine.offload import AbandonedThreadsError, Offloader, OffloadMode
from vfgym.envs.multiturn_env import MultiTurnEnv
from vfgym.envs.tool_calls import (
    cut_text,
    default_error_formatter,
    give_id,
    read_call_function,
    read_call_id,
    read_call_name,
    result_text,
)
from vfgym.envs.tool_settings import (
    DEFAULT_MAX_TOOL_RESULT_CHARS,
    MIN_TOOL_RESULT_CHARS,
    check_result_cap,
    check_time_limit,
    check_time_limits,
    checked_tools,
)
from vfgym.errors import CallTimeoutError, ToolTimeoutError
from vfgym.tools.arguments import read_json_integer
from vfgym.tools.names import check_tool_name, clip, json_kind, quote, tool_name
from vfgym.tools.schema import Tool
from vfgym.types import ChatMessage, Messages, State


class ToolCallError(Exception):
    """A tool call the environment could not make (bad JSON, unknown tool, bad arguments)."""


class ToolEnv(MultiTurnEnv):
    """Offers `tools` to the model and answers each tool call with a tool message.

    A malformed call never ends the rollout: bad JSON, an unknown tool, arguments
    of the wrong type and a tool that raises each become a tool message telling
    the model what went wrong, and the episode goes on. Every call is recorded in
    `state["tools_called"]` (names, in order; a long unknown name shortened) and
    `state["tool_call_log"]` (name, call id, outcome, duration), both empty from
    `setup_state` on. Every reply carries its call's id; a call that came without one
    (a hand-written or replayed conversation), or with the id of an earlier call of its
    turn (a lax server), is given one of its own, written into the call too, so each
    reply answers exactly one call and the conversation stays valid for an
    OpenAI-compatible server.

    A reply (a result or an error message) longer than `max_tool_result_chars` is
    cut, ending with a note that says so, so one runaway tool cannot fill the
    model's context window. A dict, list or tuple result is sent as JSON, which
    models read more reliably than Python's repr (quotes, None, True).

    The exception: a tool that raises one of `infrastructure_errors` failed through
    no fault of the model's (its sandbox's Docker Engine went away, say), so the
    error ends the rollout as an error (`state["error"]`, stop reason "error") the
    way a failed model server does, instead of being fed to the model as its failed
    call. So does any exception (a ValueError too) from the environment's own
    `prepare_tool_args` hook (a StatefulToolEnv's `update_tool_args`): the model's
    arguments are checked before the hook runs, so what the hook raises is never the
    model's to fix.

    A call that runs past its time limit (`tool_timeout`, `tool_timeouts`) is a
    failed call too: the model reads "tool X did not finish within N s" and the
    rollout goes on. See `__init__` for what happens to the call itself.
    """

    #: Exceptions a tool may raise that are the environment's failure, not the model's.
    #: They propagate out of `env_response` rather than becoming a tool message.
    infrastructure_errors: tuple[type[BaseException], ...] = ()

    def __init__(
        self,
        tools: list[Callable[..., Any]] | None = None,
        max_turns: int = 10,
        error_formatter: Callable[[Exception], str] = default_error_formatter,
        offload_sync: OffloadMode = "auto",
        max_tool_result_chars: int | None = DEFAULT_MAX_TOOL_RESULT_CHARS,
        tool_timeout: float | None = None,
        tool_timeouts: Mapping[str, float | None] | None = None,
        **kwargs: Any,
    ):
        """`offload_sync` says where sync tools run (see `vfgym.engine.offload`): "auto"
        inline while they stay quick and in a worker thread once calls turn slow,
        "always" in a thread, "never" inline. `max_tool_result_chars` caps each tool
        reply the model reads (None: no cap); a longer one is cut with a note.

        `tool_timeout` is each tool call's time limit in seconds (a positive, finite
        number), so that one tool that blocks for ever cannot hang its rollout and, with
        it, the end of a whole `generate`/`evaluate` batch. `tool_timeouts` maps tool
        names to their own limits, overriding it (None there: that tool has none).
        Past its limit an async tool is cancelled; a sync tool cannot be stopped, so its
        worker thread is abandoned and what it returns later is discarded. A sync tool
        under a limit always runs in a worker thread of the offloader's own pool
        (whatever `offload_sync` says: inline, no limit could fire), never in the event
        loop's default executor, and an abandoned thread is replaced there, so stuck
        calls never starve later ones; at most `vfgym.engine.offload.MAX_ABANDONED` (32)
        abandoned threads may run at once, and past that a limited sync call is not
        started but answered with an error. The limit counts from when the call starts
        running (not while it waits for a free worker) and covers the tool function
        only, not `prepare_tool_args`.

        The default is None, no limit, as before: a limit moves every call of a quick
        sync tool from inline (about a microsecond) to a thread (about 50 µs), and a
        right limit depends on the tool (a web search, a compile), so it is set by the
        author who knows it. An async tool must not block the event loop itself
        (`time.sleep`): no limit can interrupt that.

        Tools with time limits of their own, as a `SandboxEnv`'s `python` and `bash`
        have (`SandboxConfig.timeout`, 10 s, after which the sandbox kills the code and
        the model reads a timed-out result; the host gives the sandbox 10 s more to
        answer): set `tool_timeout` above those, as a backstop, or exempt them with
        `tool_timeouts={"python": None, "bash": None}`. A lower limit cuts the call on
        the host instead: the cancelled call leaves its sandbox unusable, so it is
        replaced before the next call and the model is told its earlier state is gone.
        """
        self.max_tool_result_chars = check_result_cap(max_tool_result_chars)
        self.tool_timeout = check_time_limit(tool_timeout)
        self.tool_timeouts = check_time_limits(tool_timeouts)
        self._limit_names_checked = not self.tool_timeouts
        self.offloader = Offloader(offload_sync)
        self.tools: list[Callable[..., Any]] = []
        self.tool_map: dict[str, Callable[..., Any]] = {}
        self._tool_specs: dict[str, Tool] = {}
        # Each tool's signature, to check what `prepare_tool_args` returns before a call.
        self._signatures: dict[str, inspect.Signature] = {}
        self.error_formatter = error_formatter
        # An override written for verifiers may take no **kwargs; it gets no state then.
        self._call_tool_takes_state = any(
            p.kind is p.VAR_KEYWORD or p.name == "state"
            for p in inspect.signature(self.call_tool).parameters.values()
        )
        super().__init__(max_turns=max_turns, oai_tools=[], **kwargs)
        for tool in checked_tools(tools):
            self.add_tool(tool)

    # ------------------------------------------------------------- tools

    def _register(self, spec: Tool) -> None:
        check_tool_name(spec.name)
        if spec.name in self._tool_specs:
            raise ValueError(
                f"a tool named {spec.name!r} is already registered; give the new one "
                "another name, or remove_tool the old one first"
            )
        self.tools.append(spec.func)
        self.tool_map[spec.name] = spec.func
        self._tool_specs[spec.name] = spec
        self._signatures[spec.name] = inspect.signature(spec.func)
        assert self.oai_tools is not None
        self.oai_tools.append(spec.schema)
        self._limit_names_checked = not self.tool_timeouts

    def add_tool(self, tool: Callable[..., Any]) -> None:
        """Offer another function to the model; its schema comes from its signature."""
        self._register(Tool.from_function(tool))

    def remove_tool(self, tool: Callable[..., Any]) -> None:
        name = tool_name(tool)
        if name not in self._tool_specs:
            raise KeyError(f"no tool named {name!r}; tools are {sorted(self._tool_specs)}")
        spec = self._tool_specs.pop(name)
        self._signatures.pop(name, None)
        self.tools.remove(spec.func)
        self.tool_map.pop(name)
        assert self.oai_tools is not None
        self.oai_tools.remove(spec.schema)
        self._limit_names_checked = not self.tool_timeouts

    def tool_time_limit(self, name: str) -> float | None:
        """The time limit of a call of tool `name` in seconds (None: none): its own
        from `tool_timeouts`, else `tool_timeout`. For a `call_tool` override that
        calls a tool itself: `await self.offloader.call_limited(limit, func, ...)`."""
        limits = self.tool_timeouts
        return limits[name] if name in limits else self.tool_timeout

    def _check_limit_names(self) -> None:
        """Refuse a `tool_timeouts` name no tool has (a typo would silently leave that
        tool unlimited). Checked when a rollout starts, not in `__init__`: subclasses
        (a SandboxEnv) add their tools after it."""
        unknown = sorted(set(self.tool_timeouts) - set(self._tool_specs))
        if unknown:
            tools = ", ".join(sorted(self._tool_specs)) or "none"
            raise ValueError(
                f"tool_timeouts names {', '.join(map(quote, unknown))}, which this environment "
                f"does not offer; its tools are: {tools}. Fix the name or remove the entry"
            )
        self._limit_names_checked = True

    # ------------------------------------------------------------- hooks

    @never_suspends
    async def setup_state(self, state: State, **kwargs: Any) -> State:
        """Start the tool-call records empty, so they can be read from the reset on."""
        if not self._limit_names_checked:
            self._check_limit_names()
        state = await super().setup_state(state, **kwargs)
        state.setdefault("tools_called", [])
        state.setdefault("tool_call_log", [])
        return state

    @never_suspends
    async def is_completed(self, messages: Messages, state: State, **kwargs: Any) -> bool:
        """Done when the model answers without calling a tool."""
        if state.get("prompt_too_long"):
            return True
        if not isinstance(messages, list) or not messages:
            return False
        last = messages[-1]
        return last.get("role") == "assistant" and not last.get("tool_calls")

    def prepare_tool_args(
        self,
        tool_name: str,
        tool_args: dict[str, Any],
        messages: Messages,
        state: State,
        **kwargs: Any,
    ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
        """Hook to add arguments the model does not see (StatefulToolEnv uses it).

        May be sync or async (an async override can, say, start a sandbox lazily).
        """
        return tool_args

    async def call_tool(
        self, tool_name: str, tool_args: dict[str, Any], tool_call_id: str, **kwargs: Any
    ) -> ChatMessage:
        """Run one tool and wrap its result in a tool message.

        A slow sync tool runs in a worker thread, so it never stalls the other
        rollouts (see `offload_sync`). An exception propagates to `env_response`,
        which turns it into the model's error message with `error_formatter`
        (unless it is one of `infrastructure_errors`). The result's text is cut to
        `max_tool_result_chars` here, so an override that wraps this reply (adds a
        label, a note) keeps what it adds. The tool's time limit applies here too
        (ToolTimeoutError past it).
        """
        spec = self._tool_specs.get(tool_name)
        positional, keywords = spec.call_arguments(tool_args) if spec else ([], tool_args)
        func = self.tool_map[tool_name]
        limits = self.tool_timeouts  # (`tool_time_limit`, inlined)
        limit = limits[tool_name] if limits and tool_name in limits else self.tool_timeout
        if limit is None:  # the common case, with no limit's machinery on its way
            result = await self.offloader.call(func, *positional, **keywords)
        else:
            result = await self._limited_call(tool_name, limit, func, positional, keywords)
        content = cut_text(result_text(result), self.max_tool_result_chars)
        return {"role": "tool", "content": content, "tool_call_id": tool_call_id}

    async def _limited_call(
        self,
        name: str,
        limit: float,
        func: Callable[..., Any],
        positional: list[Any],
        keywords: dict[str, Any],
    ) -> Any:
        """Tool `name`'s result within `limit` seconds; past it, ToolTimeoutError."""
        try:
            return await self.offloader.call_limited(limit, func, *positional, **keywords)
        except CallTimeoutError as exc:
            raise ToolTimeoutError(name, exc.limit) from None
        except AbandonedThreadsError as exc:
            raise AbandonedThreadsError(f"tool {name} was not run: {exc}") from None

    async def _prepared_args(
        self,
        name: str,
        args: dict[str, Any],
        messages: Messages,
        state: State,
        kwargs: dict[str, Any],
    ) -> dict[str, Any]:
        """The model's checked arguments with what `prepare_tool_args` (a
        StatefulToolEnv's `update_tool_args`) adds.

        Nothing the hook raises is caught: the hook is the environment's own code, so
        its failure (a ValueError included) ends the rollout as the environment's error
        rather than being shown to the model as if its call had failed. The model's
        own mistakes were refused before the hook runs.
        """
        prepared = await maybe_await(self.prepare_tool_args, name, args, messages, state, **kwargs)
        return self._checked_prepared(name, prepared)

    def _checked_prepared(self, name: str, prepared: Any) -> dict[str, Any]:
        """The arguments `prepare_tool_args` (`update_tool_args`) returned, refused with
        a TypeError naming that hook when they cannot call the tool.

        What the hook got wrong (no dict returned, a hidden argument left unfilled, a
        keyword the tool does not take) is the environment's bug: the model, told
        "missing 1 required positional argument", could do nothing about it, and the
        developer would see only failed calls. So the error ends the rollout as an
        error (a Gym step raises it) instead of becoming the model's tool message.
        """
        hook = "update_tool_args" if hasattr(self, "update_tool_args") else "prepare_tool_args"
        where = f"{type(self).__name__}.{hook}"
        if not isinstance(prepared, Mapping):
            raise TypeError(
                f"{where} must return the tool's arguments as a dict (the model's, with "
                f"the hidden ones added), not {type(prepared).__name__}; end it with "
                "`return tool_args`"
            )
        spec = self._tool_specs[name]
        positional, keywords = spec.call_arguments(dict(prepared))
        try:
            self._signatures[name].bind(*positional, **keywords)
        except TypeError as exc:
            hidden = sorted(spec.hidden_args)
            expected = "the model's arguments"
            if hidden:
                expected += f" plus the hidden ones {hidden}"
            raise TypeError(
                f"{where} returned arguments that cannot call {name} ({exc}); it must "
                f"return {expected}"
            ) from None
        return dict(prepared)

    def _error_text(self, text: Any) -> Any:
        """An error message cut to the cap: an exception's text can be any length
        (a tool's own message, one problem per item of a long argument)."""
        return cut_text(text, self.max_tool_result_chars) if isinstance(text, str) else text

    def _parse_call(self, call: Any) -> tuple[str, dict[str, Any]]:
        """(name, arguments) of one tool call; ToolCallError says what is malformed.

        Every part is type-checked, since a call recorded by hand (or by a lax server)
        can hold anything: a malformed call must become the model's error message,
        not a raw exception that ends the rollout.
        """
        function = read_call_function(call)
        if type(function) is not dict and not isinstance(function, Mapping):
            raise ToolCallError(
                "a tool call's 'function' must be an object with 'name' and 'arguments', "
                f"not {json_kind(function)}"
            )
        name = function.get("name") or ""
        if not isinstance(name, str):
            raise ToolCallError(f"a tool's name must be a string, not {json_kind(name)}")
        if name not in self._tool_specs:
            known = ", ".join(sorted(self._tool_specs)) or "none"
            raise ToolCallError(f"unknown tool {quote(name)}; the available tools are: {known}")
        return name, _call_arguments(name, function.get("arguments"))

    async def env_response(
        self, messages: Messages, state: State, **kwargs: Any
    ) -> tuple[Messages, State]:
        """Answer every tool call of the last assistant turn, in order."""
        assert isinstance(messages, list)
        calls = messages[-1].get("tool_calls") or []
        called = state.setdefault("tools_called", [])
        log = state.setdefault("tool_call_log", [])
        replies: list[ChatMessage] = []
        taken = {read_call_id(call) for call in calls}
        answered: set[str] = set()
        for index, call in enumerate(calls):
            started = time.perf_counter()
            call_id = read_call_id(call)
            if not call_id or call_id in answered:  # none, or an earlier call's: a new one
                call_id = give_id(call, index, taken)
            answered.add(call_id)
            name = ""
            try:
                name, args = self._parse_call(call)
                args = self._tool_specs[name].validate(args)
            except (ToolCallError, ValueError) as exc:
                name = name or read_call_name(call)
                reply: ChatMessage = {
                    "role": "tool",
                    "content": self._error_text(f"Error: {exc}"),
                    "tool_call_id": call_id,
                }
                ok = False
            else:
                if type(self).prepare_tool_args is not ToolEnv.prepare_tool_args:
                    # Outside the `try`s: whatever the hook raises is the environment's.
                    args = await self._prepared_args(name, args, messages, state, kwargs)
                try:
                    extra = {"state": state} if self._call_tool_takes_state else {}
                    reply = await self.call_tool(name, args, call_id, **extra)
                    is_dict = type(reply) is dict or isinstance(reply, MutableMapping)
                    if is_dict and not reply.get("tool_call_id"):
                        reply["tool_call_id"] = call_id  # an override that left it out
                    ok = True
                except Exception as exc:
                    if isinstance(exc, self.infrastructure_errors):
                        raise  # the rollout ends as an error: not the model's failure
                    reply = {
                        "role": "tool",
                        "content": self._error_text(self.error_formatter(exc)),
                        "tool_call_id": call_id,
                    }
                    ok = False
            name = clip(name)  # an unknown name can be any length: the records keep its start
            called.append(name)
            log.append(
                {
                    "name": name,
                    "id": call_id,
                    "ok": ok,
                    "duration_s": time.perf_counter() - started,
                }
            )
            replies.append(reply)
        return replies, state


def _refuse_constant(name: str) -> Any:
    """NaN and Infinity are not JSON, though Python's parser reads them: a model that
    sends one gets told, rather than a float tool silently getting nan or inf."""
    raise ToolCallError(f"{name} is not a JSON value; send a number (or null)")


#: `json.loads(text, parse_constant=...)` builds a decoder on every call, a third of
#: reading a call's arguments: one decoder, made once, does the same.
_ARGUMENTS_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_int=read_json_integer)


def _call_arguments(name: str, raw: Any) -> dict[str, Any]:
    """The arguments of a call to `name`: a JSON object, sent as text (or a dict)."""
    if raw is None or (type(raw) is str and not raw):
        return {}
    if type(raw) is str:  # the usual case, before the ABC check a Mapping needs
        try:
            args = _ARGUMENTS_DECODER.decode(raw)
        except json.JSONDecodeError as exc:
            raise ToolCallError(
                f"the arguments of {name} are not valid JSON ({exc.msg} at position "
                f'{exc.pos}); send a JSON object such as {{"arg": value}}'
            ) from None
        except RecursionError:  # Python's parser recurses once per level
            raise ToolCallError(
                f"the arguments of {name} are nested too deeply to read; send a flatter JSON object"
            ) from None
    elif isinstance(raw, Mapping):
        args = dict(raw)
    elif isinstance(raw, str):  # a str subclass
        return _call_arguments(name, str(raw))
    else:
        raise ToolCallError(
            f"the arguments of {name} must be a JSON object written as a string, "
            f"such as '{{\"arg\": value}}', not {json_kind(raw)}"
        )
    if not isinstance(args, dict):
        raise ToolCallError(f"the arguments of {name} must be a JSON object, not {json_kind(args)}")
    return args


__all__ = [
    "DEFAULT_MAX_TOOL_RESULT_CHARS",
    "MIN_TOOL_RESULT_CHARS",
    "ToolCallError",
    "ToolEnv",
    "check_result_cap",
    "check_time_limit",
    "check_time_limits",
    "checked_tools",
    "cut_text",
    "default_error_formatter",
    "result_text",
]
