"""Which path a client's model calls take, and the settings of an openai client it keeps.

A plain `AsyncOpenAI` or `OpenAI` is read once for what its requests carry (base
URL, API key, organization, project, default headers and query, timeout,
`max_retries`) and its calls go through vfgym's aiohttp transport. A client that
carries something the transport cannot reproduce keeps the SDK: an `http_client`
of the caller's (a proxy, TLS settings, a transport), Azure or any other subclass,
an API key given as a function, workload identity or a provider. The environment
variable `VFGYM_MODEL_TRANSPORT` chooses explicitly (see `transport_choice`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

from openai import AsyncOpenAI, OpenAI

#: The environment variable that chooses the path of model calls.
TRANSPORT_ENV = "VFGYM_MODEL_TRANSPORT"
#: The environment variable that bounds the open connections per server host.
CONNECTIONS_ENV = "VFGYM_HTTP_CONNECTIONS_PER_HOST"
#: Open connections per host when nothing says otherwise: room for a thousand
#: rollouts waiting on the model at once, and a bound a server's accept queue takes.
DEFAULT_CONNECTIONS_PER_HOST = 1024

TransportChoice = Literal["auto", "aiohttp", "openai"]
_CHOICES: tuple[TransportChoice, ...] = ("auto", "aiohttp", "openai")


def transport_choice(value: str | None = None) -> TransportChoice:
    """The path model calls take: `value`, else `VFGYM_MODEL_TRANSPORT`, else "auto".

    "auto" sends a client's calls through vfgym's transport when it can honour the
    client's settings and through the openai SDK otherwise; "aiohttp" asks for the
    transport (a client it cannot honour is refused with the reason); "openai" keeps
    the SDK for every call.
    """
    raw = os.environ.get(TRANSPORT_ENV, "") if value is None else value
    choice = raw.strip().lower() or "auto"
    if choice not in _CHOICES:
        raise ValueError(
            f"{TRANSPORT_ENV}={raw!r} is not a model transport; set it to one of "
            f"{', '.join(_CHOICES)} (or leave it unset for auto)"
        )
    return choice  # type: ignore[return-value]


def connections_per_host(value: int | str | None = None) -> int:
    """The bound on open connections to one server host (`VFGYM_HTTP_CONNECTIONS_PER_HOST`)."""
    raw = os.environ.get(CONNECTIONS_ENV) if value is None else value
    if raw is None or raw == "":
        return DEFAULT_CONNECTIONS_PER_HOST
    try:
        limit = int(raw)
    except (TypeError, ValueError):
        limit = 0
    if limit < 1:
        raise ValueError(
            f"{CONNECTIONS_ENV}={raw!r}: give the most connections to keep open to one "
            f"model server host, a whole number of at least 1 (default "
            f"{DEFAULT_CONNECTIONS_PER_HOST})"
        )
    return limit


@dataclass(frozen=True)
class ClientSettings:
    """What each request of an openai client carries, read from the client once."""

    base_url: str
    headers: dict[str, str]
    query: dict[str, str]
    connect_timeout: float | None
    read_timeout: float | None
    max_retries: int


def why_not_honoured(client: Any) -> str | None:
    """Why the transport cannot send `client`'s requests as the SDK would, or None
    when it can."""
    if type(client) not in (AsyncOpenAI, OpenAI):
        return (
            f"a {type(client).__name__} is not a plain AsyncOpenAI/OpenAI client "
            "(Azure, a subclass or a wrapper may change how requests are made)"
        )
    if _own_http_client(client):
        return "the client was made with an http_client of its own (a proxy, TLS settings)"
    if "@" in str(getattr(client, "_configured_base_url", None) or client.base_url).split("/")[2]:
        return "the base URL carries credentials (user:password@host)"
    if getattr(client, "_api_key_provider", None) is not None:
        return "the client's api_key is a function, called by the SDK per request"
    if getattr(client, "workload_identity", None) is not None:
        return "the client authenticates with workload identity"
    if getattr(client, "_provider", None) is not None:
        return "the client's requests are configured by a provider"
    return None


def _own_http_client(client: Any) -> bool:
    """True when the client's pool is not the SDK's default one (its `http_client`)."""
    try:
        from openai._base_client import AsyncHttpxClientWrapper, SyncHttpxClientWrapper
    except ImportError:  # another openai layout: the transport cannot tell, so it stays out
        return True
    return type(getattr(client, "_client", None)) not in (
        SyncHttpxClientWrapper,
        AsyncHttpxClientWrapper,
    )


def client_settings(client: AsyncOpenAI | OpenAI) -> ClientSettings:
    """The headers, query, timeouts and retries of `client`'s requests (see `why_not_honoured`)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if client.api_key:
        headers["Authorization"] = f"Bearer {client.api_key}"
    if client.organization is not None:
        headers["OpenAI-Organization"] = client.organization
    if client.project is not None:
        headers["OpenAI-Project"] = client.project
    for name, value in (getattr(client, "_custom_headers", None) or {}).items():
        if isinstance(value, str):  # the SDK's Omit() removes a header: so does leaving it out
            headers[name] = value
        else:
            headers.pop(name, None)
    query = {
        str(name): str(value)
        for name, value in (getattr(client, "_custom_query", None) or {}).items()
        if value is not None
    }
    connect, read = timeout_seconds(client.timeout)
    return ClientSettings(
        base_url=str(client.base_url).rstrip("/"),
        headers=headers,
        query=query,
        connect_timeout=connect,
        read_timeout=read,
        max_retries=int(client.max_retries),
    )


def timeout_seconds(timeout: Any) -> tuple[float | None, float | None]:
    """(connect, read) seconds of an openai client's timeout: a number is both, an
    httpx Timeout gives its own (a read timeout bounds each wait for the server, as
    the SDK's does), None waits for ever."""
    if timeout is None:
        return None, None
    if isinstance(timeout, int | float):
        return float(timeout), float(timeout)
    return getattr(timeout, "connect", None), getattr(timeout, "read", None)
