"""Talking to an OpenAI-compatible server: sampling arguments, retries, overflow.

Every model call of a rollout goes through a `ModelCaller`, so the retry
policy, the handling of vLLM's extra sampling keys and the recognition of a
context-length overflow live in one place.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import random
import re
from dataclasses import dataclass
from typing import Any

import openai
from openai import AsyncOpenAI, OpenAI
from openai.resources.chat.completions import AsyncCompletions as AsyncChatCompletions
from openai.resources.completions import AsyncCompletions

from vfgym.errors import ContextLengthExceeded, ModelCallError
from vfgym.types import ChatCompletionToolParam, Messages, MessageType, ModelResponse

_CONTEXT_MARKERS = (
    "maximum context length",
    "context_length_exceeded",
    "context length",
    "prompt is too long",
    "too many tokens",
)


@dataclass(frozen=True)
class RetryPolicy:
    """How transient server failures are retried: exponential backoff with jitter.

    Retried: HTTP 429 and 5xx, timeouts, dropped connections and bodies that are
    not valid JSON. Anything else (a 400, a 401) is the caller's to fix and fails
    at once. `generate`/`evaluate` turn the openai client's own retries off
    for the batch, so this policy alone decides.
    """

    max_retries: int = 4
    initial_delay: float = 0.25
    max_delay: float = 8.0
    jitter: float = 0.25

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number `attempt` (1-based)."""
        if retry_after is not None:
            return min(self.max_delay, retry_after)
        base = min(self.max_delay, self.initial_delay * (2 ** (attempt - 1)))
        return base * (1.0 + random.uniform(-self.jitter, self.jitter))


def is_context_overflow(exc: BaseException) -> bool:
    """True when the server refused the request because the prompt is too long."""
    if not isinstance(exc, openai.BadRequestError):
        return False
    text = str(exc).lower()
    return any(marker in text for marker in _CONTEXT_MARKERS)


_WINDOW = re.compile(r"maximum context length (?:is|of) (\d+)")
# The prompt's size as each server words it: OpenAI and older vLLM "(P in the
# messages, C in the completion)"; vLLM 0.9-0.11 "your request has P input tokens";
# newer vLLM "your prompt contains at least P input tokens"; SGLang "P tokens
# from the input messages".
_PROMPT_SIZE = re.compile(
    r"(\d+) in the (?:messages|prompt)"
    r"|request has (\d+) input tokens"
    r"|prompt contains (?:at least )?(\d+) input tokens"
    r"|(\d+) tokens from the input"
)


def completion_room(exc: BaseException) -> int | None:
    """Completion tokens that would still fit, read from a context-overflow error.

    OpenAI, vLLM and SGLang all give the window ("maximum context length is/of N
    tokens") and the prompt's size, in different words (see `_PROMPT_SIZE`); None
    when the message does not say, or when the prompt alone fills the window.
    """
    text = str(exc)
    window, prompt = _WINDOW.search(text), _PROMPT_SIZE.search(text)
    if window is None or prompt is None:
        return None
    prompt_tokens = next(size for size in prompt.groups() if size is not None)
    room = int(window.group(1)) - int(prompt_tokens)
    return room if room > 0 else None


def _max_tokens_key(sampling_args: dict[str, Any] | None) -> str | None:
    for key in ("max_completion_tokens", "max_tokens"):
        if (sampling_args or {}).get(key) is not None:
            return key
    return None


def is_transient(exc: BaseException) -> bool:
    """True for failures that a later identical request may not meet."""
    if isinstance(exc, openai.APIConnectionError | openai.RateLimitError):
        return True  # APITimeoutError is an APIConnectionError
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code >= 500 or exc.status_code in (408, 409, 429)
    return isinstance(exc, openai.APIResponseValidationError | json.JSONDecodeError)


def _retry_after(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait, if it said (`retry-after-ms` is the precise one)."""
    response = getattr(exc, "response", None)
    if response is None:
        return None
    for header, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = response.headers.get(header)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue  # e.g. an HTTP date: fall back to the policy's own backoff
        if seconds >= 0:
            return seconds
    return None


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
    (the name OpenAI's newer models require, and vLLM accepts); keys the client does
    not know (vLLM's `top_k`, `min_p`, `repetition_penalty`, ...) move into
    `extra_body`, which is sent to the server verbatim.
    """
    if not sampling_args:
        return {}
    args = {k: v for k, v in sampling_args.items() if v is not None}
    if message_type == "chat" and "max_tokens" in args:
        args.setdefault("max_completion_tokens", args.pop("max_tokens"))
    extra = dict(args.pop("extra_body", None) or {})
    for key in [k for k in args if k not in accepted]:
        extra[key] = args.pop(key)
    if extra:
        args["extra_body"] = extra
    return args


DEFAULT_RETRY = RetryPolicy()


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
        self._create = (client.chat if self._chat else client).completions.create
        self._in_thread = not isinstance(client, AsyncOpenAI)
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
                return await self._create(messages=prompt, **kwargs)
            return await self._send(prompt, kwargs)
        except Exception as exc:
            if sampling_args is None:
                sampling_args = self._sampling_args
            return await self._recover(exc, prompt, kwargs, sampling_args)

    def _with_sampling_args(self, sampling_args: dict[str, Any] | None) -> dict[str, Any]:
        return self._prepare(sampling_args, self._kwargs.get("tools"))

    async def _send(self, prompt: Messages, kwargs: dict[str, Any]) -> ModelResponse:
        if self._in_thread:  # a sync OpenAI client must not block the loop
            if self._chat:
                return await asyncio.to_thread(self._create, messages=prompt, **kwargs)
            return await asyncio.to_thread(self._create, prompt=prompt, **kwargs)
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
        attempt = 0
        shrunk = False
        while True:
            if isinstance(exc, openai.BadRequestError):
                if not is_context_overflow(exc):
                    raise ModelCallError(
                        f"the model server rejected the request (HTTP 400): {exc}",
                        attempts=attempt + 1,
                    ) from exc
                room, key = completion_room(exc), _max_tokens_key(sampling_args)
                if shrunk or room is None or key is None or sampling_args[key] <= room:  # type: ignore[index]
                    raise ContextLengthExceeded(str(exc)) from exc
                sampling_args = {**sampling_args, key: room}  # type: ignore[dict-item]
                kwargs = self._with_sampling_args(sampling_args)
                shrunk = True
            elif not is_transient(exc):
                raise ModelCallError(
                    f"model call failed: {type(exc).__name__}: {exc}", attempts=attempt + 1
                ) from exc
            else:
                attempt += 1
                if attempt > self.retry.max_retries:
                    raise ModelCallError(
                        f"model server still failing after {attempt} attempts "
                        f"({type(exc).__name__}: {exc}); check that it is up and not overloaded",
                        attempts=attempt,
                    ) from exc
                await asyncio.sleep(self.retry.delay(attempt, _retry_after(exc)))
            try:
                return await self._send(prompt, kwargs)
            except Exception as again:
                exc = again


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
