"""The client a batch sends its requests through, and whose it is to close.

Split from `runner.py`: a sync `OpenAI` client is given an async twin (so a batch
never parks a thread per request), and `generate_sync` / `evaluate_sync` get a
client whose connection pool belongs to their own event loop. Which of these
clients the batch made, and so closes, is decided here too.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from openai import AsyncOpenAI, DefaultAsyncHttpxClient, OpenAI

from vfgym.inference.transport.settings import why_not_honoured

logger = logging.getLogger(__name__)


def has_own_http_client(client: AsyncOpenAI | OpenAI) -> bool:
    """True when `client` was made with an `http_client` of the caller's (a proxy, TLS
    settings, a transport), which no copy of the client could rebuild."""
    http = getattr(client, "_client", None)
    if http is None:
        return False
    try:
        from openai._base_client import AsyncHttpxClientWrapper, SyncHttpxClientWrapper
    except ImportError:  # another openai layout: assume the client's own pool
        return False
    return type(http) not in (SyncHttpxClientWrapper, AsyncHttpxClientWrapper)


def as_async_client(client: AsyncOpenAI | OpenAI) -> AsyncOpenAI | OpenAI:
    """An async twin of a sync client, so a batch never parks one thread per request.

    The twin has the same key, base URL, organization, project, timeouts, retries
    and the headers and query parameters the caller added (a gateway's auth
    header, an api-version). A sync client made with an `http_client` of its own
    (a proxy, TLS settings) is returned as it is, since no twin could carry that
    over: its requests then run in worker threads.
    """
    if isinstance(client, AsyncOpenAI) or has_own_http_client(client):
        return client
    return async_twin(client)


def async_twin(client: AsyncOpenAI | OpenAI) -> AsyncOpenAI:
    """A new `AsyncOpenAI` with the settings of `client` (see `as_async_client`)."""
    return AsyncOpenAI(
        api_key=client.api_key,
        base_url=client.base_url,
        organization=client.organization,
        project=client.project,
        timeout=client.timeout,
        max_retries=client.max_retries,
        default_headers=dict(getattr(client, "_custom_headers", None) or {}) or None,
        default_query=dict(getattr(client, "_custom_query", None) or {}) or None,
    )


@contextlib.asynccontextmanager
async def loop_local_client(
    client: AsyncOpenAI | OpenAI,
) -> AsyncIterator[AsyncOpenAI | OpenAI]:
    """An async client whose connections belong to the running event loop, closed on exit.

    An `AsyncOpenAI` keeps its connection pool bound to the loop that first used
    it, and `generate_sync` / `evaluate_sync` run on a loop of their own each
    time; reusing the caller's pool there fails every request ("Event loop is
    closed", "bound to a different event loop"). So the run gets a copy with a
    fresh pool; key, base URL, headers, query and timeouts are kept. An `http_client`
    of the caller's (a proxy, TLS settings) cannot be: an async one belongs to its own
    loop, which a warning says, and a sync client with one is used as it is (its
    requests run in worker threads) and left open.
    """
    if isinstance(client, AsyncOpenAI) and why_not_honoured(client) is None:
        # A plain client: a new one with its settings and a pool of its own, which
        # vfgym's transport serves too (a copy with an http_client would not be).
        local = async_twin(client)
    elif isinstance(client, AsyncOpenAI):
        if has_own_http_client(client):
            logger.warning(
                "this run has an event loop of its own, where the AsyncOpenAI client's own "
                "http_client (bound to the loop it was used on) cannot serve; its requests "
                "go through a default connection pool, without that http_client's settings "
                "(a proxy, TLS). To keep them, pass a sync OpenAI client made with an "
                "equivalent http_client, or await the async call on the client's loop"
            )
        local = client.copy(http_client=DefaultAsyncHttpxClient())
    elif has_own_http_client(client):
        yield client
        return
    else:
        local = async_twin(client)
    try:
        yield local
    finally:
        await local.close()
