"""A client made with an `http_client` of the caller's (a proxy, TLS settings, a
transport) keeps it: a batch used to swap it for a default one, silently."""

from __future__ import annotations

import asyncio
import logging

import openai
from scripted_models import say_ok

from vfgym.envs import SingleTurnEnv
from vfgym.inference.server import ModelServer
from vfgym.inference.server.server import API_KEY

ROWS = [{"question": "a"}, {"question": "b"}]


async def test_a_sync_client_keeps_its_own_http_client_in_evaluate(model_server) -> None:
    server = await model_server(say_ok)
    seen: list[str] = []
    http = openai.DefaultHttpxClient(event_hooks={"request": [lambda r: seen.append(r.url.path)]})
    client = openai.OpenAI(base_url=server.base_url, api_key=API_KEY, http_client=http)
    try:
        out = await SingleTurnEnv(dataset=ROWS).evaluate(client, "m")
        assert all("error" not in state for state in out.state)
        # (the model list first: token_mode "auto" asks once whether the server is a vLLM)
        assert seen == ["/v1/models"] + ["/v1/chat/completions"] * 2
        # The caller's client is still open for its own use.
        assert (await asyncio.to_thread(client.models.list)).data
    finally:
        client.close()


def test_a_sync_client_keeps_its_own_http_client_in_evaluate_sync() -> None:
    seen: list[str] = []
    with ModelServer(say_ok) as server:
        http = openai.DefaultHttpxClient(
            event_hooks={"request": [lambda r: seen.append(r.url.path)]}
        )
        client = openai.OpenAI(base_url=server.base_url, api_key=API_KEY, http_client=http)
        try:
            out = SingleTurnEnv(dataset=ROWS).evaluate_sync(client, "m")
            assert all("error" not in state for state in out.state), out.state
            assert seen == ["/v1/models"] + ["/v1/chat/completions"] * 2
        finally:
            client.close()


def test_an_async_clients_own_http_client_in_evaluate_sync_is_named_in_a_warning(
    caplog,
) -> None:
    """It belongs to the loop it was used on; the run's own loop cannot use it."""
    with ModelServer(say_ok) as server:
        http = openai.DefaultAsyncHttpxClient()
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key=API_KEY, http_client=http)
        with caplog.at_level(logging.WARNING, logger="vfgym.engine.runner"):
            out = SingleTurnEnv(dataset=ROWS).evaluate_sync(client, "m")
        assert all("error" not in state for state in out.state), out.state
        assert "pass a sync OpenAI client" in caplog.text
