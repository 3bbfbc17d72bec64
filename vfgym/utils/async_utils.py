"""Awaiting what may or may not be a coroutine, and optional semaphores, as
verifiers 0.1.x's `verifiers.utils.async_utils` offered them to environments."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from types import TracebackType
from typing import Any


async def maybe_await(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call `func`, and await the result when it is awaitable: one call site for
    sync and async hooks alike."""
    result = func(*args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    return result


class NullAsyncContext:
    """An `async with` that does nothing: the semaphore of an unlimited run."""

    async def __aenter__(self) -> NullAsyncContext:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        return False


async def maybe_semaphore(limit: int | None = None) -> asyncio.Semaphore | NullAsyncContext:
    """A semaphore of `limit` slots, or a no-op context when `limit` is None or not
    positive (verifiers' convention for "no limit")."""
    if limit is not None and limit > 0:
        return asyncio.Semaphore(limit)
    return NullAsyncContext()
