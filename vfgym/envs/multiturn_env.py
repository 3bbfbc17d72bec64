"""The turn loop: model turn, environment turn, until the episode ends.

`MultiTurnEnv` holds the loop and the hooks an author overrides; checking what
the hooks return is in `env_replies.py`, and the stop reasons, turn limit and
per-turn token budget in `turn_limits.py`.
"""

from __future__ import annotations

import asyncio
import time
from abc import abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any

from openai import AsyncOpenAI, OpenAI

from vfgym.compat.kwargs import written_for_verifiers
from vfgym.engine._async import call_inline, is_async_callable, maybe_await, settle_inline
from vfgym.engine.data import build_prompt, fresh_copy
from vfgym.engine.offload import Offloader
from vfgym.engine.state import fill_state_defaults, new_state
from vfgym.envs.env_replies import prepared_state, take_reply
from vfgym.envs.environment import Environment
from vfgym.envs.turn_limits import (
    STOP_REASONS,
    TRUNCATING,
    final_stop,
    turn_limit,
    turn_sampling_args,
)
from vfgym.errors import ContextLengthExceeded, NoModelTurnError, error_record
from vfgym.inference.messages import assistant_message, completion_text
from vfgym.inference.tokens.mode import (
    TokenMode,
    checked_token_mode,
    note_token_samples,
    rollout_caller,
)
from vfgym.training.response_ids import response_field
from vfgym.types import ChatMessage, Info, Messages, ModelResponse, SamplingArgs, State


class MultiTurnEnv(Environment):
    """An environment that answers each model turn until `is_completed` says stop.

    Authors implement `env_response(messages, state) -> (messages, state)` and
    usually `is_completed`; both may be sync or async. `setup_state` prepares a
    fresh State (deal the cards, acquire a sandbox) and `cleanup_state` always runs
    when the episode ends: normally, on error and on cancellation.
    """

    #: Whether the environment answers the model's turn that used up `max_turns` (so a
    #: game's final move still counts). None: decided at construction, False for an
    #: environment written for verifiers 0.1.x (which ended the rollout on that turn,
    #: before `env_response`), True otherwise.
    answers_last_turn: bool | None = None

    #: How model turns are sent (see `vfgym.inference.tokens`): "auto" sends token ids to
    #: a vLLM and messages to any other server, "exact" always sends token ids, "chat"
    #: always messages.
    token_mode: TokenMode = "auto"
    #: In token-exact mode: which format tool calls are read from the sampled text in (the
    #: name vLLM's --tool-call-parser gives it).
    tool_parser: str = "hermes"
    #: In token-exact mode: a local Hugging Face tokenizer to render the chat template
    #: with; None renders with the server's own /tokenize.
    chat_tokenizer: Any = None

    def __init__(self, max_turns: int | None = -1, **kwargs: Any):
        super().__init__(**kwargs)
        self.max_turns = turn_limit(max_turns)
        if self.answers_last_turn is None:  # (the catalogue's games are vfgym's own)
            native = type(self).__module__.startswith("vfgym.games.")
            self.answers_last_turn = native or not written_for_verifiers()
        # Which hooks keep their defaults, so the loop can skip them. Plain attributes,
        # read on every turn: the interpreter reads those fastest.
        cls = type(self)
        self._default_max_turns = cls.max_turns_reached is MultiTurnEnv.max_turns_reached
        self._default_context = cls.get_context_messages is MultiTurnEnv.get_context_messages
        self._default_init = (
            cls.init_state is Environment.init_state
            and cls.init_completion is Environment.init_completion
        )
        self._default_is_completed = cls.is_completed is MultiTurnEnv.is_completed
        self._default_model_call = cls.get_model_response is Environment.get_model_response
        # Said once per environment: a budget its server's responses give no way to count.
        self._warned_uncounted_budget = False
        # Per server base URL: whether it was found to speak token-exact mode ("auto").
        self._token_servers: dict[str, asyncio.Task[bool]] = {}
        # Where sync hooks run (`setup_state` and `cleanup_state`, which acquire and
        # release a sandbox or a connection; `env_response` and `is_completed`): one
        # that blocks would stall every rollout sharing the loop; quick ones still run
        # inline (see vfgym.engine.offload).
        self._sync_hooks = Offloader()
        self._async_hooks: dict[Any, bool] = {}
        # The two hooks of every turn, awaited directly when async (see `call_hook`).
        self._async_is_completed = is_async_callable(self.is_completed)
        self._async_env_response = is_async_callable(self.env_response)

    # ------------------------------------------------------------- hooks

    async def setup_state(self, state: State, **kwargs: Any) -> State:
        """Prepare a new episode's State; the default leaves it as it is."""
        return state

    async def is_completed(self, messages: Messages, state: State, **kwargs: Any) -> bool:
        """True when the episode has reached its natural end.

        The turn limit, the token budget and a context overflow are enforced by
        the loop itself (and reported as truncation), so overriding this only
        needs the environment's own end condition.
        """
        return bool(state.get("prompt_too_long", False))

    @abstractmethod
    async def env_response(
        self, messages: Messages, state: State, **kwargs: Any
    ) -> tuple[Messages, State]:
        """The environment's reply to the model's last turn, and the updated State."""

    async def cleanup_state(self, state: State, **kwargs: Any) -> None:
        """Release what `setup_state` acquired. Runs exactly once per episode."""

    async def max_turns_reached(self, state: State) -> bool:
        return 0 < self.max_turns <= state["turn"]

    async def prompt_too_long(self, state: State) -> bool:
        return bool(state.get("prompt_too_long", False))

    async def get_context_messages(self, state: State) -> Messages:
        return state["prompt"] + state["completion"]

    def _default_hook(self, name: str) -> bool:
        """True when hook `name` is MultiTurnEnv's own, which does nothing: skip the call."""
        return getattr(type(self), name) is getattr(MultiTurnEnv, name)

    async def _completed(self, context: Messages, state: State, kwargs: dict[str, Any]) -> Any:
        """`is_completed` (see `call_hook`). (Callers skip the call for the default,
        which only reads `prompt_too_long`.)"""
        if self._async_is_completed:  # `call_hook`'s async case, without its call
            result = (
                self.is_completed(context, state, **kwargs)
                if kwargs
                else self.is_completed(context, state)
            )
            return await result if hasattr(result, "__await__") else result
        return await self.call_hook(self.is_completed, (context, state), kwargs)

    async def call_hook(
        self, hook: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """A hook the engine calls (`setup_state`, `is_completed`, `env_response`,
        `cleanup_state`): an async one awaited, a sync one through the offloader. A
        sync hook that blocks (acquiring a sandbox, a request, a subprocess) would
        otherwise stall every rollout sharing the loop; a quick one (a game's move)
        runs inline after its first call; a cancelled rollout waits for a sync hook
        in a worker thread to return (see `Offloader.call_waited`)."""
        function = getattr(hook, "__func__", hook)  # (a method: the class's function)
        is_async = self._async_hooks.get(function)
        if is_async is None:  # asked once per hook: the check costs more than the call
            is_async = self._async_hooks[function] = is_async_callable(hook)
        if is_async:
            return await (hook(*args, **kwargs) if kwargs else hook(*args))
        return await self._sync_hooks.call_waited(function, hook, *args, **kwargs)

    @property
    def hooks_are_sync(self) -> bool:
        """True when every per-turn hook is plain sync code (or a default that never waits).

        Then an episode can be driven without an event loop (`advance_sync`,
        `check_stop_sync`), which is what lets the Gym adapter step a game in
        microseconds.
        """
        base = MultiTurnEnv
        for name in (
            "init_completion",
            "init_state",
            "setup_state",
            "is_completed",
            "env_response",
            "cleanup_state",
            "get_context_messages",
            "max_turns_reached",
            "prompt_too_long",
        ):
            impl = getattr(type(self), name)
            if getattr(base, name, None) is impl:
                continue
            if is_async_callable(getattr(self, name)) and not getattr(
                impl, "__vfgym_inline__", False
            ):
                return False
        return True

    # ----------------------------------------------------- episode pieces

    def record_model_turn(
        self, state: State, message: ChatMessage | str, response: ModelResponse = None
    ) -> None:
        """Append the model's turn to the completion and count it.

        Shared by `rollout` (message from the server) and the Gym adapter
        (message given as the action).
        """
        if response is not None:
            state["responses"].append(response)
            usage = getattr(response, "usage", None)
            if usage is not None and usage.completion_tokens is not None:
                state["completion_tokens"] += usage.completion_tokens
            else:  # some servers and gateways send no usage
                state["completion_tokens"] += self._tokens_without_usage(response)
        if self.message_type == "chat":
            state["completion"].append(message)
        else:
            state.setdefault("responses_start_idx", []).append(len(state["completion"]))
            state["completion"] += message
        state["turn"] += 1

    def _tokens_without_usage(self, response: Any) -> int:
        """A turn's token count from a response with no `usage`, so that the token
        budget still holds: the first choice's logprobs or token ids, one entry per
        generated token. With neither there is nothing to count; an environment with a
        budget says so once instead of letting the budget silently do nothing.
        """
        choices = getattr(response, "choices", None)
        if choices:
            choice = choices[0]
            logprobs = getattr(choice, "logprobs", None)
            if logprobs is not None:
                tokens = getattr(logprobs, "content", None)  # chat
                if tokens is None:
                    tokens = getattr(logprobs, "tokens", None)  # legacy completions
                if tokens is not None:
                    return len(tokens)
            ids = response_field(choice, "token_ids")
            if ids is not None:
                return len(ids)
        budget = self.rollout_token_budget
        if budget is not None and not self._warned_uncounted_budget:
            self._warned_uncounted_budget = True
            self.logger.warning(
                "%s has rollout_token_budget=%d, but the model server's responses carry no "
                "usage, logprobs or token ids, so their tokens cannot be counted and the "
                "budget is not enforced. Have the server return `usage`, request logprobs "
                "(sampling_args={'logprobs': True}, or {'logprobs': 1} for completions), "
                "or rely on max_turns to end rollouts.",
                type(self).__name__,
                budget,
            )
        return 0

    async def check_stop(
        self, state: State, *, natural_only: bool = False, **kwargs: Any
    ) -> str | None:
        """Why the episode must end now, or None to go on.

        With `natural_only`, only the environment's own end (`is_completed`) counts.
        """
        if self._default_context:
            context = state["prompt"] + state["completion"]
        else:
            context = await maybe_await(self.get_context_messages, state)
        if self._default_is_completed:
            completed = state.get("prompt_too_long", False)
        else:
            completed = await self._completed(context, state, kwargs)
        if completed or natural_only:
            return self._natural_stop(state, completed)
        if not self._default_max_turns and await maybe_await(self.max_turns_reached, state):
            return "max_turns"
        return self._limit_stop(state)

    def check_stop_sync(
        self, state: State, *, natural_only: bool = False, **kwargs: Any
    ) -> str | None:
        """`check_stop` with no event loop, for environments whose `hooks_are_sync`."""
        context = self._context_sync(state)
        # A hook overridden with a plain `def` returns its value, an async one an awaitable.
        completed: bool | Awaitable[bool]
        if kwargs:  # (see advance_sync)
            completed = self.is_completed(context, state, **kwargs)
        else:
            completed = self.is_completed(context, state)
        if hasattr(completed, "__await__"):
            completed = settle_inline(completed)
        if completed or natural_only:
            return self._natural_stop(state, completed)
        if not self._default_max_turns and call_inline(self.max_turns_reached, state):
            return "max_turns"
        return self._limit_stop(state)

    def _natural_stop(self, state: State, completed: Any) -> str | None:
        if not completed:
            return None
        return "context_length" if state.get("prompt_too_long") else "completed"

    def _limit_stop(self, state: State) -> str | None:
        """The loop's own limits: the default turn limit and the token budget."""
        if self._default_max_turns and 0 < self.max_turns <= state["turn"]:
            return "max_turns"
        budget = self.rollout_token_budget
        if budget is not None and state["completion_tokens"] >= budget:
            return "token_budget"
        return None

    async def advance(self, state: State, **kwargs: Any) -> tuple[Messages, str | None]:
        """After a model turn: end the episode, or let the environment answer.

        Returns the environment's new messages and the stop reason (None to go
        on). The environment answers the model's last turn even when that turn
        used up `max_turns` or the token budget (a game's final move still
        counts) unless `answers_last_turn` is False, as for an environment written
        for verifiers 0.1.x; its natural end, checked first, skips the answer.
        `is_completed` and `env_response` see the same context list.
        """
        if self._default_context:
            context = state["prompt"] + state["completion"]
        else:
            context = await maybe_await(self.get_context_messages, state)
        if self._default_is_completed:
            completed = state.get("prompt_too_long", False)
        else:
            completed = await self._completed(context, state, kwargs)
        if completed:
            return self._no_messages(), self._natural_stop(state, completed)
        if not self.answers_last_turn and await maybe_await(self.max_turns_reached, state):
            return self._no_messages(), "max_turns"  # as verifiers 0.1.x: no env_response
        reply: tuple[Messages, State] | Awaitable[tuple[Messages, State]]
        if self._async_env_response:  # `call_hook`'s async case, without its call
            reply = (
                self.env_response(context, state, **kwargs)
                if kwargs
                else self.env_response(context, state)
            )
            if hasattr(reply, "__await__"):
                reply = await reply
        else:
            reply = await self.call_hook(self.env_response, (context, state), kwargs)
        messages = take_reply(self, state, reply)
        # (an empty `**kwargs` costs a dict per call: this runs every turn)
        return messages, await (
            self.check_stop(state, **kwargs) if kwargs else self.check_stop(state)
        )

    def advance_sync(self, state: State, **kwargs: Any) -> tuple[Messages, str | None]:
        """`advance` with no event loop, for environments whose `hooks_are_sync`.

        The same steps as `advance` (the shared pieces hold the logic); only the
        way hooks are called differs. This is what lets the Gym adapter step a
        game in a few microseconds.
        """
        context = self._context_sync(state)
        # Hooks are called without `**kwargs` when there are none: a call through an
        # empty `**` costs more than the rest of a game's turn check. (A hook overridden
        # with a plain `def` returns its value, an async one an awaitable.)
        completed: bool | Awaitable[bool]
        reply: tuple[Messages, State] | Awaitable[tuple[Messages, State]]
        if kwargs:
            completed = self.is_completed(context, state, **kwargs)
        else:
            completed = self.is_completed(context, state)
        if hasattr(completed, "__await__"):  # an async hook that never suspends
            completed = settle_inline(completed)
        if completed:
            return self._no_messages(), self._natural_stop(state, completed)
        if not self.answers_last_turn and call_inline(self.max_turns_reached, state):
            return self._no_messages(), "max_turns"
        if kwargs:
            reply = self.env_response(context, state, **kwargs)
        else:
            reply = self.env_response(context, state)
        if hasattr(reply, "__await__"):
            reply = settle_inline(reply)
        messages = take_reply(self, state, reply)
        if kwargs:
            return messages, self.check_stop_sync(state, **kwargs)
        return messages, self.check_stop_sync(state)

    def text_turn_sync(self, state: State, text: str) -> tuple[Messages, str | None]:
        """One whole turn with no event loop: the model's turn `text` recorded (as an
        assistant message in a chat environment), then the environment's answer
        (`advance_sync`), for environments whose `hooks_are_sync`.

        The Gym adapter's `step` for a text action is exactly this; it is one method
        so that an environment can fuse the two halves (TextGame does).
        """
        if self.message_type == "chat":
            self.record_model_turn(state, {"role": "assistant", "content": text})
        else:
            self.record_model_turn(state, text)
        return self.advance_sync(state)

    def _no_messages(self) -> Messages:
        return [] if self.message_type == "chat" else ""

    def _context_sync(self, state: State) -> Messages:
        if self._default_context:
            return state["prompt"] + state["completion"]
        return call_inline(self.get_context_messages, state)

    def finish(self, state: State, stop_reason: str) -> None:
        """Mark how the episode ended."""
        state["stop_reason"] = stop_reason
        state["is_truncated"] = stop_reason in TRUNCATING

    def _own_prompt(self, prompt: Messages) -> Messages:
        """`prompt` as this rollout's own: chat messages copied (a hook may edit them in
        place), and a text prompt given to a chat environment made its user turn (with
        the environment's system prompt and few-shot), as a dataset row's would be."""
        if self.message_type != "chat":
            return prompt
        if isinstance(prompt, str):
            return build_prompt(prompt, self.system_prompt, self.few_shot)
        return list(map(dict, prompt))  # type: ignore[arg-type]

    # ---------------------------------------------------------------- loop

    async def rollout(
        self,
        client: AsyncOpenAI | OpenAI,
        model: str,
        prompt: Messages,
        completion: Messages | None = None,
        answer: str = "",
        state: State | None = None,
        task: str = "default",
        info: Info | None = None,
        example_id: int = 0,
        sampling_args: SamplingArgs | None = None,
        **kwargs: Any,
    ) -> tuple[Messages, State]:
        """Play one episode against the model; never raises for a failed model call.

        A server that keeps failing ends the rollout with `state["error"]`; a
        context overflow ends it as truncated. `cleanup_state` always runs.
        """
        # The rollout's own prompt and info: the batch hands every copy of an example
        # the same row, which a hook changing them in place would change for all.
        prompt = self._own_prompt(prompt)
        info = {} if info is None else fresh_copy(info)
        if not state:
            if completion is None and self._default_init:
                completion = [] if self.message_type == "chat" else ""
            elif completion is None:
                completion = await maybe_await(self.init_completion)
            if self._default_init:
                state = new_state(prompt, completion, answer, task, info, example_id)
            else:
                built = await maybe_await(
                    self.init_state, prompt, completion, answer, task, info, example_id
                )
                if not isinstance(built, dict):
                    raise TypeError(
                        f"{type(self).__name__}.init_state must return the new State (a "
                        f"dict), got {type(built).__name__}; end it with `return state`"
                    )
                defaults = new_state(prompt, completion, answer, task, info, example_id)
                state = fill_state_defaults(built, defaults)
        else:  # the caller's State: whatever the loop keeps that it lacks is added
            empty = self._no_messages() if completion is None else completion
            defaults = new_state(prompt, empty, answer, task, info, example_id)
            state = fill_state_defaults(state, defaults)
        start = time.perf_counter()
        args = self.merged_sampling_args(sampling_args)
        tools = info.get("oai_tools") or self.oai_tools
        caller = None
        try:
            if self._default_model_call:  # the request's fixed part, prepared once
                caller = await rollout_caller(
                    client,
                    model,
                    token_mode=checked_token_mode(self.token_mode),
                    message_type=self.message_type,
                    oai_tools=tools,
                    sampling_args=args,
                    retry=self.retry,
                    tool_parser=self.tool_parser,
                    tokenizer=self.chat_tokenizer,
                    known_servers=self._token_servers,
                )
            if not self._default_hook("setup_state"):
                prepared = await self.call_hook(self.setup_state, (state,), kwargs)
                if prepared is not None:  # a hook that mutates in place may forget `return state`
                    state = prepared_state(type(self).__name__, state, prepared)
            stop = await self.check_stop(state, **kwargs)
            default_context = self._default_context
            chat = self.message_type == "chat"
            budget = self.rollout_token_budget
            budgeted = budget is not None
            response: ModelResponse = None
            while stop is None:
                if default_context:
                    context = state["prompt"] + state["completion"]
                else:
                    context = await maybe_await(self.get_context_messages, state)
                turn_args = turn_sampling_args(budget, state, args) if budgeted else args
                try:
                    if caller is not None:
                        response = await caller(context, turn_args)
                    else:
                        response = await self.get_model_response(
                            client,
                            model,
                            context,
                            oai_tools=tools,
                            sampling_args=turn_args,
                            message_type=self.message_type,
                        )
                except ContextLengthExceeded as exc:
                    state["prompt_too_long"] = True
                    if state["turn"] == 0:  # no model turn at all: nothing was generated
                        raise NoModelTurnError(
                            f"the first prompt does not fit the model's context window, so "
                            f"the model never answered: {exc}"
                        ) from exc
                    stop = "context_length"
                    break
                message = (
                    assistant_message(response)  # type: ignore[arg-type]
                    if chat
                    else completion_text(response)  # type: ignore[arg-type]
                )
                self.record_model_turn(state, message, response)
                _, stop = await (self.advance(state, **kwargs) if kwargs else self.advance(state))
            self.finish(state, final_stop(self.rollout_token_budget, state, stop, response))
        except Exception as exc:  # the batch goes on; the rollout is reported as errored
            state["error"] = error_record(exc)
            self.finish(state, "error")
            self.logger.warning("rollout %s failed: %s", example_id, state["error"]["message"])
        finally:
            note_token_samples(state, caller, self.logger)
            try:
                if not self._default_hook("cleanup_state"):
                    await self.call_hook(self.cleanup_state, (state,), kwargs)
            except Exception as exc:  # a failed cleanup must not hide the episode's result
                state["cleanup_error"] = error_record(exc)
                self.logger.warning("cleanup of rollout %s failed: %s", example_id, exc)
            elapsed = (time.perf_counter() - start) * 1000
            state["timing"]["generation_ms"] = elapsed
            state["timing"]["total_ms"] = elapsed
        return state["completion"], state


__all__ = ["STOP_REASONS", "TRUNCATING", "MultiTurnEnv", "turn_limit"]
