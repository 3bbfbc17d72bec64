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


def transport_for(client: Any, choice: str | None = None) -> OpenAITransport | None:
    """The transport that sends `client`'s model calls, or None where the SDK (or the
    object's own `create`, for a stand-in that is no openai client) keeps them.

    `choice` (default: `VFGYM_MODEL_TRANSPORT`, else "auto") is "auto", "aiohttp"
    or "openai"; with "aiohttp", an openai client the transport cannot honour is
    refused with the reason rather than sent another way than asked.
    """
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
