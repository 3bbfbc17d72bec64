"""Policies: the plain functions that stand in for a model behind the test server.

A policy is `policy(messages)` or `policy(messages, request)`, sync or async. It
gets the chat messages (or the prompt string of a text completion) and, when it
declares a parameter named `request`, the whole JSON body, so it can look at
`tools` or sampling arguments. It returns the assistant's text or an assistant
message dict with `tool_calls`. A server holds one policy for every model name,
or a mapping from model name to policy (a game's reference policy beside a test
policy, for example).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from vfgym.engine._async import (
    call_offloaded,
    called_safely,
    is_async_callable,
    stop_iteration_error,
)
from vfgym.errors import PolicyCancelledError, PolicyReplyError, UnknownModelError

Policy = Callable[..., Any]
PolicySpec = Policy | Mapping[str, Policy]


def _wants_request(func: Policy) -> bool:
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):  # builtins without a signature get the messages only
        return False
    param = params.get("request")
    return param is not None and param.kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    )


class BoundPolicy:
    """One policy with its calling convention worked out once, not per request."""

    __slots__ = ("func", "is_async", "offload", "wants_request")

    def __init__(self, func: Policy, *, offload_sync: bool) -> None:
        if not callable(func):
            raise TypeError(f"a policy must be callable, got {type(func).__name__}")
        self.func = func
        self.wants_request = _wants_request(func)
        self.is_async = is_async_callable(func)
        self.offload = offload_sync and not self.is_async

    async def __call__(self, prompt: Any, request: dict[str, Any]) -> Any:
        """Run the policy on `prompt`; awaits whatever it returns if that is awaitable.

        What the policy raises is its own error, answered with a 500 that names it, so
        two exceptions that asyncio would otherwise mangle are renamed here: a
        StopIteration (an exhausted `next(replies)`, which a coroutine turns into a
        bare "coroutine raised StopIteration") and a CancelledError the policy let
        escape while its request was not cancelled (which would drop the connection,
        and every client retries a dropped connection: the policy would run again).
        """
        try:
            return await self._run(prompt, request)
        except RuntimeError as exc:
            if isinstance(exc.__cause__, StopIteration) and str(exc) == _CORO_STOP:
                raise stop_iteration_error(self.func) from exc.__cause__
            raise
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise  # the request itself was cancelled: let it end
            raise PolicyCancelledError(_policy_name(self.func)) from exc

    async def _run(self, prompt: Any, request: dict[str, Any]) -> Any:
        kwargs = {"request": request} if self.wants_request else {}
        if self.offload:
            return await call_offloaded(self.func, prompt, **kwargs)
        result = called_safely(self.func, (prompt,), kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result


#: What Python makes of a StopIteration that leaves a coroutine.
_CORO_STOP = "coroutine raised StopIteration"


def _policy_name(func: Policy) -> str:
    return getattr(func, "__qualname__", None) or repr(func)


class PolicyRouter:
    """Maps a request's `model` to a policy.

    With a single callable every model name is served by it (so a client's
    configured model name never matters); with a mapping, a name that is not a
    key is an unknown model, as on a real server.
    """

    def __init__(self, policy: PolicySpec, *, default_model: str, offload_sync: bool) -> None:
        if isinstance(policy, Mapping):
            if not policy:
                raise ValueError("the policy mapping is empty; give at least one model name")
            self._by_name = {
                str(name): BoundPolicy(func, offload_sync=offload_sync)
                for name, func in policy.items()
            }
            self._single: BoundPolicy | None = None
        else:
            self._single = BoundPolicy(policy, offload_sync=offload_sync)
            self._by_name = {default_model: self._single}
        self.models: list[str] = list(self._by_name)

    @property
    def serves_any_name(self) -> bool:
        """True when one policy answers for every model name (no mapping was given)."""
        return self._single is not None

    def get(self, model: Any) -> BoundPolicy:
        """The policy for `model`, or `UnknownModelError`."""
        if self._single is not None:
            return self._single
        bound = self._by_name.get(model)
        if bound is None:
            raise UnknownModelError(model, self.models)
        return bound

    def check(self, model: Any) -> None:
        """Raise `UnknownModelError` unless `model` is served (None means the default)."""
        if model is not None:
            self.get(model)


def _tool_call(raw: Any, index: int, call_ids: Iterator[int]) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        dump = getattr(raw, "model_dump", None)
        if not callable(dump):
            raise PolicyReplyError(f"tool_calls[{index}] must be a dict, got {type(raw).__name__}")
        raw = dump(exclude_none=True)
    function = raw.get("function")
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise PolicyReplyError(
            f"tool_calls[{index}] needs 'function': {{'name': str, 'arguments': str}}, "
            f"got {dict(raw)!r:.160}"
        )
    arguments = function.get("arguments")
    if arguments is None:  # the wire always carries a JSON object string, never "null"
        arguments = "{}"
    elif not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    call_id = raw.get("id") or f"call_{next(call_ids):08d}"
    if not isinstance(call_id, str):
        raise PolicyReplyError(
            f"tool_calls[{index}].id must be a str (or left out to have one made), "
            f"got {type(call_id).__name__}: {call_id!r:.40}"
        )
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": function["name"], "arguments": arguments},
    }


def normalise_reply(reply: Any, call_ids: Iterator[int]) -> dict[str, Any]:
    """Turn a policy's return value into an assistant message dict.

    Missing tool-call ids are numbered from `call_ids` (the server's own counter, so
    ids are reproducible per server) and the type is filled in; arguments given as
    a dict are serialised to the JSON string the protocol carries.
    """
    if isinstance(reply, str):
        return {"role": "assistant", "content": reply}
    if not isinstance(reply, Mapping):
        dump = getattr(reply, "model_dump", None)
        if not callable(dump):
            raise PolicyReplyError(
                "a policy must return a str or an assistant message dict "
                f"({{'role': 'assistant', 'content': ..., 'tool_calls': [...]}}), "
                f"got {type(reply).__name__}"
            )
        reply = dump(exclude_none=True)
    role = reply.get("role", "assistant")
    if role != "assistant":
        raise PolicyReplyError(f"a policy's message must have role 'assistant', got {role!r}")
    content = reply.get("content")
    if content is not None and not isinstance(content, str):
        raise PolicyReplyError(
            f"a policy's message content must be a str or None, got {type(content).__name__}"
        )
    message: dict[str, Any] = {"role": "assistant", "content": content}
    raw_calls = reply.get("tool_calls")
    if raw_calls:
        if not isinstance(raw_calls, list | tuple):
            raise PolicyReplyError(
                f"a policy's tool_calls must be a list, got {type(raw_calls).__name__}"
            )
        message["tool_calls"] = [_tool_call(call, i, call_ids) for i, call in enumerate(raw_calls)]
    return message
