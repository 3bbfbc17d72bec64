"""The two paths a model call can take, as a fixture: the openai SDK and vfgym's transport.

`client_path` runs a test once per path: it sets `VFGYM_MODEL_TRANSPORT` for the test
and makes clients the path can carry. The project's `ModelServer.client()` gives the
client an `http_client` of its own (to skip loading TLS certificates), which keeps
the SDK; on the transport's path the client is made without one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import openai
import pytest

from vfgym.inference.transport import TRANSPORT_ENV, transport_for


@dataclass(frozen=True)
class ClientPath:
    """One path of model calls, and clients of a server that take it."""

    name: str

    def client(self, server: Any, **kwargs: Any) -> openai.AsyncOpenAI:
        """`server.client(**kwargs)`, made so that its calls take this path."""
        if self.name == "aiohttp":
            kwargs.setdefault("http_client", None)
        client = server.client(**kwargs)
        assert (transport_for(client) is not None) == (self.name == "aiohttp")
        return client

    def sync_client(self, server: Any, **kwargs: Any) -> openai.OpenAI:
        """`server.sync_client(**kwargs)`, likewise."""
        if self.name == "aiohttp":
            kwargs.setdefault("http_client", None)
        client = server.sync_client(**kwargs)
        assert (transport_for(client) is not None) == (self.name == "aiohttp")
        return client


@pytest.fixture(params=["openai", "aiohttp"], name="client_path")
def client_path_fixture(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> ClientPath:
    """The test runs once through the openai SDK and once through vfgym's transport."""
    monkeypatch.setenv(TRANSPORT_ENV, request.param)
    return ClientPath(request.param)
