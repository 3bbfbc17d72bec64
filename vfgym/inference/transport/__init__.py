"""vfgym's own HTTP transport for OpenAI-compatible servers, and the choice of path.

The openai SDK spends about 3 ms of CPU on a chat completion (httpx, pydantic
validation of every field and logprob); a bare aiohttp client makes the same
request for a small fraction of that. Model calls of a plain `AsyncOpenAI` /
`OpenAI` client therefore go through `OpenAITransport` (aiohttp, orjson, answers
read lazily as `ResponseRecord`s), and clients it cannot honour keep the SDK
(see `settings`). `VFGYM_MODEL_TRANSPORT=openai|aiohttp|auto` chooses explicitly;
`VFGYM_HTTP_CONNECTIONS_PER_HOST` bounds the pooled connections to one host.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

from openai import AsyncOpenAI, OpenAI

from vfgym.inference.transport.http import OpenAITransport
from vfgym.inference.transport.records import ResponseRecord
from vfgym.inference.transport.session import close_sessions, pooled_session
from vfgym.inference.transport.settings import (
    CONNECTIONS_ENV,
    TRANSPORT_ENV,
    client_settings,
    connections_per_host,
    transport_choice,
    why_not_honoured,
)

# The transport made for each client, and what it was made from: a rollout makes a
# `ModelCaller` per rollout, and reading an openai client's settings costs tens of
# microseconds. Weakly keyed: an entry goes with its client.
_made: weakref.WeakKeyDictionary[Any, tuple[tuple[Any, ...], OpenAITransport | None]] = (
    weakref.WeakKeyDictionary()
)


def transport_for(client: Any, choice: str | None = None) -> OpenAITransport | None:
    """The transport that sends `client`'s model calls, or None where the SDK (or the
    object's own `create`, for a stand-in that is no openai client) keeps them.

    `choice` (default: `VFGYM_MODEL_TRANSPORT`, else "auto") is "auto", "aiohttp"
    or "openai"; with "aiohttp", an openai client the transport cannot honour is
    refused with the reason rather than sent another way than asked. The transport
    is made once per client and made again when a setting it carries has changed.
    """
    environ = os.environ
    made_from = (
        choice,
        environ.get(TRANSPORT_ENV),
        environ.get(CONNECTIONS_ENV),
        getattr(client, "api_key", None),
        getattr(client, "organization", None),
        getattr(client, "project", None),
        # openai 3 keeps the URL here; its `_base_url` is a property doing work per read.
        id(getattr(client, "_configured_base_url", None) or getattr(client, "_base_url", None)),
        id(getattr(client, "timeout", None)),
        getattr(client, "max_retries", None),
        id(getattr(client, "_client", None)),
        id(getattr(client, "_custom_headers", None)),
        id(getattr(client, "_custom_query", None)),
    )
    try:
        known = _made.get(client)
    except TypeError:  # an object that takes no weak reference: nothing to remember
        return _make(client, choice)
    if known is not None and known[0] == made_from:
        return known[1]
    transport = _make(client, choice)
    _made[client] = (made_from, transport)
    return transport


def _make(client: Any, choice: str | None) -> OpenAITransport | None:
    chosen = transport_choice(choice)
    if chosen == "openai" or not isinstance(client, AsyncOpenAI | OpenAI):
        return None
    reason = why_not_honoured(client)
    if reason is None:
        return OpenAITransport(client_settings(client), connections_per_host())
    if chosen == "aiohttp":
        raise ValueError(
            f"{TRANSPORT_ENV}=aiohttp asks for vfgym's HTTP transport, but {reason}; "
            f"set {TRANSPORT_ENV}=auto (or openai) to send this client's calls through "
            "the openai SDK"
        )
    return None


__all__ = [
    "CONNECTIONS_ENV",
    "TRANSPORT_ENV",
    "OpenAITransport",
    "ResponseRecord",
    "close_sessions",
    "connections_per_host",
    "pooled_session",
    "transport_choice",
    "transport_for",
]
