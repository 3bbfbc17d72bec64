"""Talking to an OpenAI-compatible server: sampling arguments, retries, overflow.

Every model call of a rollout goes through a `ModelCaller`, so the retry
policy, the handling of vLLM's extra sampling keys and the recognition of a
context-length overflow are applied in one place. This module sends the request
and decides what a failure is; the policy itself (`RetryPolicy`, Retry-After) is
in `retry.py`, and reading a context overflow in `overflow.py`.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any

import openai
from openai import AsyncOpenAI, OpenAI
from openai.resources.chat.completions import AsyncCompletions as AsyncChatCompletions
from openai.resources.completions import AsyncCompletions

from vfgym.engine.breaker import run_breaker
from vfgym.errors import ContextLengthExceeded, ModelCallError
from vfgym.inference.overflow import (
    completion_room,
    cut_by_length,
    is_context_overflow,
    max_tokens_key,
)
from vfgym.inference.retry import (
    DEFAULT_RETRY,
    MAX_STALE_CONNECTIONS,
    RetryPolicy,
    failure_hint,
    retry_after,
    stale_loop,
)
from vfgym.inference.transport import transport_for
from vfgym.types import ChatCompletionToolParam, Messages, MessageType, ModelResponse

# Besides 429 and 5xx: a request timeout and a conflict (say, an overloaded server
# shedding load) may pass when sent again; other 4xx are the caller's to fix.
_RETRIED_4XX = (408, 409, 429)


class EmptyModelResponse(Exception):
    """The server answered 200 without a completion: an error object, or no choices.

    Some gateways report an upstream failure this way instead of with an HTTP
    status. `status_code` is the code the error object gave, if any; without
    one the answer is treated like a malformed body (retried).
    """

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


def is_transient(exc: BaseException) -> bool:
    """True for failures that a later identical request may not meet. A server's
    `x-should-retry` header decides when it is there, as in the openai client: for a
    429 too (an exhausted quota is no passing rate limit)."""
    if isinstance(exc, openai.APIStatusError):
        told = exc.response.headers.get("x-should-retry")
        if told in ("true", "false"):
            return told == "true"
    if isinstance(exc, openai.APIConnectionError | openai.RateLimitError):
        return True  # APITimeoutError is an APIConnectionError
    if stale_loop(exc):
        return True
    if isinstance(exc, openai.APIStatusError | EmptyModelResponse):
        status = exc.status_code
        return status is None or status >= 500 or status in _RETRIED_4XX
    return isinstance(exc, openai.APIResponseValidationError | json.JSONDecodeError)


def _checked(response: Any) -> Any:
    """`response` when it carries a completion; raises `EmptyModelResponse` otherwise.

    A chat choice whose `message` is null is a malformed answer too (retried): taken
    as it is, the rollout failed on `None.content`, blamed on nobody.
    """
    choices = getattr(response, "choices", None)
    if choices:
        # A text completion's choice has no `message` at all; only a null one is refused.
        # (The transport's records are dicts, reading a field never sent as None.)
        first = choices[0]
        if isinstance(first, dict):
            message = first.get("message", response)
        else:
            message = getattr(first, "message", response)
        if message is not None:
            return response
        raise EmptyModelResponse("the model server answered 200 with a choice that has no message")
    error = _error_object(response)
    if error is None:
        raise EmptyModelResponse("the model server answered 200 with no choices")
    message = error.get("message", error) if isinstance(error, dict) else error
    code = error.get("code") if isinstance(error, dict) else None
    try:
        status = int(code) if code is not None else None
    except (TypeError, ValueError):
        status = None  # a name such as "rate_limit_exceeded", not an HTTP status
    raise EmptyModelResponse(
        f"the model server answered 200 with an error instead of a completion: {message}"
        + (f" (code {code})" if code is not None else ""),
        status_code=status,
    )


def _error_object(response: Any) -> Any:
    """The error a 200 answer carries instead of a completion, if any: OpenAI's shape
    (`{"error": {...}}`) or vLLM's ErrorResponse (`{"object": "error", "message", "code"}`),
    which a gateway may pass on with a 200."""
    error = getattr(response, "error", None)
    if error is not None or getattr(response, "object", None) != "error":
        return error
    return {
        "message": getattr(response, "message", None) or "(no message)",
        "code": getattr(response, "code", None),
    }


@functools.cache
def _accepted_params(kind: MessageType) -> frozenset[str]:
    """The keyword arguments the installed openai client's `create` accepts."""
    resource = AsyncChatCompletions if kind == "chat" else AsyncCompletions
    return frozenset(inspect.signature(resource.create).parameters) - {"self"}


def prepare_sampling_args(
    sampling_args: dict[str, Any] | None, message_type: MessageType, accepted: frozenset[str]
) -> dict[str, Any]:
    """Turn SamplingArgs into keyword arguments for the openai client.

    `None` values are dropped; `max_tokens` becomes `max_completion_tokens` for chat
    (the name OpenAI's newer models require, and vLLM accepts) and the reverse for
    text completions (whose endpoint knows only `max_tokens`: vLLM ignores the other
    name and gives 16 tokens); where both are given, `max_completion_tokens` wins, as
    it is the one a rollout's token budget lowers. Keys the client does not know
    (vLLM's `top_k`, `min_p`, `repetition_penalty`, ...) move into `extra_body`,
    which is sent to the server verbatim. Streaming is refused (see `refuse_stream`).
    """
    if not sampling_args:
        return {}
    args = {k: v for k, v in sampling_args.items() if v is not None}
    if message_type == "chat" and "max_tokens" in args:
        args.setdefault("max_completion_tokens", args.pop("max_tokens"))
    elif message_type != "chat" and "max_completion_tokens" in args:
        args["max_tokens"] = args.pop("max_completion_tokens")
    extra = dict(args.pop("extra_body", None) or {})
    refuse_stream(args, extra)
    for key in [k for k in args if k not in accepted]:
        extra[key] = args.pop(key)
    if extra:
        args["extra_body"] = extra
    return args


def refuse_stream(args: Mapping[str, Any], extra: Mapping[str, Any]) -> None:
    """Refuse `stream` before anything is sent: a rollout needs the whole answer.

    A streamed answer has no `choices`; taken for a server fault, it was sent again
    and again, and the rollout ended blaming a server that was fine.
    """
    if args.get("stream") or extra.get("stream"):
        raise ValueError(
            "sampling_args 'stream': a rollout needs each model answer whole, so vfgym "
            "does not stream; drop 'stream' (and 'stream_options') from sampling_args"
        )


def _is_async(client: Any, create: Any) -> bool:
    """Whether `create` must be awaited: an AsyncOpenAI, or a wrapper with an async `create`.

    Anything else (an `OpenAI`, a wrapper around one) is called in a thread.
    """
    if isinstance(client, AsyncOpenAI):
        return True
    try:
        return inspect.iscoroutinefunction(inspect.unwrap(create))
    except ValueError:  # a `__wrapped__` cycle: say sync, and let `_send` await what it got
        return False


class ModelCaller:
    """The model calls of one rollout, with the request's fixed part prepared once.

    The model, the tools and the sampling arguments are the same on every turn of a
    rollout; turning them into the client's keyword arguments once, not per turn,
    and going straight to the client's `create` while calls succeed, keeps a turn's
    cost close to the client's own. A failure goes to `_recover`, which applies the
    retry policy (see `request_model_response`).
    """

    __slots__ = ("_chat", "_create", "_in_thread", "_kwargs", "_sampling_args", "model", "retry")

    def __init__(
        self,
        client: AsyncOpenAI | OpenAI,
        model: str,
        *,
        message_type: MessageType = "chat",
        oai_tools: list[ChatCompletionToolParam] | None = None,
        sampling_args: dict[str, Any] | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.model = model
        self.retry = retry or DEFAULT_RETRY
        self._chat = message_type == "chat"
        # vfgym's HTTP transport where it can honour the client's settings (see
        # `vfgym.inference.transport`); else the client's own `create`, or a wrapper's.
        transport = transport_for(client)
        if transport is not None:
            self._create: Callable[..., Any] = (
                transport.chat_create if self._chat else transport.completions_create
            )
            self._in_thread = False
        else:
            # Its keyword arguments are built at run time (vLLM's extra sampling keys),
            # past what the stubs' overloads describe.
            self._create = (client.chat if self._chat else client).completions.create
            self._in_thread = not _is_async(client, self._create)
        self._sampling_args = sampling_args
        self._kwargs = self._prepare(sampling_args, oai_tools)

    def _prepare(
        self,
        sampling_args: dict[str, Any] | None,
        oai_tools: list[ChatCompletionToolParam] | None,
    ) -> dict[str, Any]:
        kind: MessageType = "chat" if self._chat else "completion"
        kwargs = prepare_sampling_args(sampling_args, kind, _accepted_params(kind))
        kwargs["model"] = self.model
        if self._chat and oai_tools:
            kwargs["tools"] = oai_tools
        return kwargs

    async def __call__(
        self, prompt: Messages, sampling_args: dict[str, Any] | None = None
    ) -> ModelResponse:
        """One model turn. `sampling_args`, when not the rollout's own, apply to this turn
        (a token budget lowers the max tokens as the rollout goes on)."""
        kwargs = self._kwargs
        if sampling_args is not None and sampling_args is not self._sampling_args:
            kwargs = self._with_sampling_args(sampling_args)
        try:
            if self._chat and not self._in_thread:  # the usual case, without _send's frame
                return _checked(await self._create(messages=prompt, **kwargs))
            return _checked(await self._send(prompt, kwargs))
        except Exception as exc:
            if sampling_args is None:
                sampling_args = self._sampling_args
            return await self._recover(exc, prompt, kwargs, sampling_args)

    def _with_sampling_args(self, sampling_args: dict[str, Any] | None) -> dict[str, Any]:
        return self._prepare(sampling_args, self._kwargs.get("tools"))

    async def _send(self, prompt: Messages, kwargs: dict[str, Any]) -> ModelResponse:
        if self._in_thread:  # a sync OpenAI client must not block the loop
            if self._chat:
                response = await asyncio.to_thread(self._create, messages=prompt, **kwargs)
            else:
                response = await asyncio.to_thread(self._create, prompt=prompt, **kwargs)
            # A wrapper whose plain `create` hands back an awaitable is async after all.
            return await response if inspect.isawaitable(response) else response
        if self._chat:
            return await self._create(messages=prompt, **kwargs)
        return await self._create(prompt=prompt, **kwargs)

    async def _recover(
        self,
        exc: Exception,
        prompt: Messages,
        kwargs: dict[str, Any],
        sampling_args: dict[str, Any] | None,
    ) -> ModelResponse:
        """Retry after `exc` as the policy says, or raise the error the rollout reports."""
        attempt = stale = 0
        shrunk = False
        while True:
            if isinstance(exc, openai.BadRequestError) and is_context_overflow(exc):
                room, key = completion_room(exc), max_tokens_key(sampling_args)
                if (
                    shrunk
                    or room is None
                    or key is None
                    or sampling_args is None  # (a key was found in them: never None here)
                    or sampling_args[key] <= room
                ):
                    raise ContextLengthExceeded(str(exc)) from exc
                sampling_args = {**sampling_args, key: room}
                kwargs = self._with_sampling_args(sampling_args)
                shrunk = True
            elif not is_transient(exc):  # a 400 is, unless its x-should-retry says otherwise
                raise ModelCallError(_refusal_message(exc), attempts=attempt + 1) from exc
            elif stale_loop(exc) and stale < MAX_STALE_CONNECTIONS:
                # Sent again at once and not counted: the pool dropped that connection,
                # and a pool may hold many from the earlier loop (see `stale_loop`).
                stale += 1
            else:
                attempt += 1
                if attempt > self.retry.max_retries:
                    raise ModelCallError(
                        f"model server still failing after {attempt} attempts "
                        f"({type(exc).__name__}: {exc}){failure_hint(exc)}",
                        attempts=attempt,
                    ) from exc
                delay = self.retry.delay(attempt, retry_after(exc))
                breaker = run_breaker()
                if breaker is None or not isinstance(exc, openai.APIConnectionError):
                    await asyncio.sleep(delay)
                elif await breaker.tripped_within(delay):  # the run gave up on the server
                    raise breaker.refusal() from exc
            try:
                return _checked(await self._send(prompt, kwargs))
            except Exception as again:
                exc = again


def _refusal_message(exc: BaseException) -> str:
    """The message of a call that is not retried: the caller's request is at fault."""
    if isinstance(exc, openai.BadRequestError):
        return f"the model server rejected the request (HTTP 400): {exc}"
    return f"model call failed: {type(exc).__name__}: {exc}"


async def request_model_response(
    client: AsyncOpenAI | OpenAI,
    model: str,
    prompt: Messages,
    *,
    message_type: MessageType = "chat",
    oai_tools: list[ChatCompletionToolParam] | None = None,
    sampling_args: dict[str, Any] | None = None,
    retry: RetryPolicy | None = None,
) -> ModelResponse:
    """One model turn, retried through transient failures.

    A request whose prompt fits but whose max tokens reach past the context
    window (a rollout's token budget can be larger than the window) is sent
    again once, asking for what still fits. Raises `ContextLengthExceeded` when
    the prompt no longer fits (the rollout ends as truncated) and
    `ModelCallError` when the server still fails after the retries (the rollout
    ends as errored). Sync `OpenAI` clients run in a thread.
    """
    caller = ModelCaller(
        client,
        model,
        message_type=message_type,
        oai_tools=oai_tools,
        sampling_args=sampling_args,
        retry=retry,
    )
    return await caller(prompt)


__all__ = [
    "EmptyModelResponse",
    "ModelCaller",
    "RetryPolicy",
    "completion_room",
    "cut_by_length",
    "is_context_overflow",
    "is_transient",
    "prepare_sampling_args",
    "refuse_stream",
    "request_model_response",
]
