"""Which path a client's calls take, and that the transport sends what the SDK would."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from aiohttp import web
from loopback_http import chat_body, serve_posts

from vfgym.envs import SingleTurnEnv
from vfgym.inference.client import RetryPolicy, request_model_response
from vfgym.inference.transport import (
    CONNECTIONS_ENV,
    TRANSPORT_ENV,
    ResponseRecord,
    connections_per_host,
    transport_choice,
    transport_for,
)

HELLO = [{"role": "user", "content": "hello"}]
NO_RETRY = RetryPolicy(max_retries=0)


class Recorder:
    """Answers every chat request, keeping its headers, query and body."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.port = 0
        self.answers: list[tuple[int, dict[str, str]]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append(
            {
                "headers": dict(request.headers),
                "query": dict(request.query),
                "body": await request.json(),
            }
        )
        status, headers = self.answers.pop(0) if self.answers else (200, {})
        body = chat_body("hi") if status == 200 else {"error": {"message": "busy"}}
        return web.json_response(body, status=status, headers=headers)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@pytest.fixture
async def recorder() -> AsyncIterator[Recorder]:
    server = Recorder()
    runner, server.port = await serve_posts(server.handle, "/v1/chat/completions")
    try:
        yield server
    finally:
        await runner.cleanup()


async def test_the_clients_credentials_headers_and_query_reach_the_server(
    recorder: Recorder,
) -> None:
    client = openai.AsyncOpenAI(
        base_url=recorder.base_url,
        api_key="sk-test",
        organization="org-7",
        project="proj-3",
        default_headers={"X-Gateway": "blue"},
        default_query={"api-version": "2024-01"},
        max_retries=0,
    )
    assert transport_for(client) is not None
    response = await request_model_response(client, "m", HELLO, retry=NO_RETRY)
    assert isinstance(response, ResponseRecord)
    headers = recorder.seen[0]["headers"]
    assert headers["Authorization"] == "Bearer sk-test"
    assert headers["OpenAI-Organization"] == "org-7"
    assert headers["OpenAI-Project"] == "proj-3"
    assert headers["X-Gateway"] == "blue"
    assert recorder.seen[0]["query"] == {"api-version": "2024-01"}


async def test_both_paths_send_the_same_body(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = openai.AsyncOpenAI(base_url=recorder.base_url, api_key="k", max_retries=0)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    sampling = {
        "max_tokens": 32,
        "temperature": 0.5,
        "top_k": 20,  # vLLM's: not an openai argument, so sent through extra_body
        "extra_body": {"return_token_ids": True},
        "seed": None,  # dropped
    }
    for path in ("openai", "aiohttp"):
        monkeypatch.setenv(TRANSPORT_ENV, path)
        await request_model_response(
            client, "m", HELLO, oai_tools=tools, sampling_args=sampling, retry=NO_RETRY
        )
    sdk, ours = (seen["body"] for seen in recorder.seen)
    assert ours == sdk
    assert ours["max_completion_tokens"] == 32 and ours["top_k"] == 20
    assert ours["return_token_ids"] is True and "seed" not in ours


async def test_the_clients_own_max_retries_are_honoured_with_retry_after(
    recorder: Recorder,
) -> None:
    recorder.answers = [(503, {"retry-after-ms": "1"}), (429, {"retry-after-ms": "1"})]
    client = openai.AsyncOpenAI(base_url=recorder.base_url, api_key="k", max_retries=2)
    response = await transport_for(client).chat_create(model="m", messages=HELLO)  # type: ignore[union-attr]
    assert response.choices[0].message.content == "hi"
    assert len(recorder.seen) == 3
    recorder.answers = [(503, {"x-should-retry": "false"})]
    with pytest.raises(openai.InternalServerError):
        await transport_for(client).chat_create(model="m", messages=HELLO)  # type: ignore[union-attr]
    assert len(recorder.seen) == 4  # the server said not to


async def test_a_timeout_is_the_sdks_timeout_error() -> None:
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.json_response(chat_body())

    runner, port = await serve_posts(slow, "/v1/chat/completions")
    try:
        client = openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{port}/v1", api_key="k", timeout=0.2, max_retries=0
        )
        with pytest.raises(openai.APITimeoutError):
            await transport_for(client).chat_create(model="m", messages=HELLO)  # type: ignore[union-attr]
    finally:
        await runner.cleanup()


def test_clients_the_transport_cannot_honour_keep_the_sdk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    own_pool = openai.AsyncOpenAI(
        base_url="http://127.0.0.1:9/v1", api_key="k", http_client=openai.DefaultAsyncHttpxClient()
    )
    azure = openai.AsyncAzureOpenAI(
        api_key="k", api_version="2024-06-01", azure_endpoint="https://example.invalid"
    )
    plain = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="k")
    assert transport_for(own_pool) is None
    assert transport_for(azure) is None
    assert transport_for(object()) is None  # a stand-in keeps its own `create`
    assert transport_for(plain) is not None  # a sync client too: sent from the loop
    monkeypatch.setenv(TRANSPORT_ENV, "openai")
    assert transport_for(plain) is None
    monkeypatch.setenv(TRANSPORT_ENV, "aiohttp")
    with pytest.raises(ValueError, match=r"http_client of its own.*VFGYM_MODEL_TRANSPORT=auto"):
        transport_for(own_pool)


def test_a_bad_setting_says_what_to_give(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TRANSPORT_ENV, "httpx")
    with pytest.raises(ValueError, match="auto, aiohttp, openai"):
        transport_choice()
    assert transport_choice("AIOHTTP") == "aiohttp"
    for bad in ("0", "-3", "many"):
        monkeypatch.setenv(CONNECTIONS_ENV, bad)
        with pytest.raises(ValueError, match="at least 1"):
            connections_per_host()
    monkeypatch.setenv(CONNECTIONS_ENV, "16")
    assert connections_per_host() == 16


async def test_a_settings_change_on_the_client_is_seen(recorder: Recorder) -> None:
    client = openai.AsyncOpenAI(base_url=recorder.base_url, api_key="old", max_retries=0)
    await request_model_response(client, "m", HELLO, retry=NO_RETRY)
    client.api_key = "new"
    await request_model_response(client, "m", HELLO, retry=NO_RETRY)
    assert [s["headers"]["Authorization"] for s in recorder.seen] == ["Bearer old", "Bearer new"]


async def test_a_batch_of_a_sync_client_goes_through_the_transport(recorder: Recorder) -> None:
    client = openai.OpenAI(base_url=recorder.base_url, api_key="k", max_retries=0)
    out = await SingleTurnEnv(dataset=[{"question": "a"}, {"question": "b"}]).evaluate(client, "m")
    assert all("error" not in state for state in out.state)
    assert all(isinstance(state["responses"][0], ResponseRecord) for state in out.state)
    assert len(recorder.seen) == 2


def test_evaluate_sync_of_an_async_client_goes_through_the_transport() -> None:
    """The run's own loop gets a new client with the same settings, which the transport
    serves, and a session of its own that closes with that loop."""
    seen: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.headers["Authorization"])
        return web.json_response(chat_body("hi"))

    loop = asyncio.new_event_loop()
    try:
        runner, port = loop.run_until_complete(serve_posts(handle, "/v1/chat/completions"))
        thread_loop_runs = threading.Thread(target=loop.run_forever, daemon=True)
        thread_loop_runs.start()
        client = openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-sync", max_retries=0
        )
        out = SingleTurnEnv(dataset=[{"question": "a"}]).evaluate_sync(client, "m")
        assert "error" not in out.state[0]
        assert isinstance(out.state[0]["responses"][0], ResponseRecord)
        assert seen == ["Bearer sk-sync"]
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread_loop_runs.join(10)
        loop.close()


def test_a_base_url_with_credentials_keeps_the_sdk() -> None:
    client = openai.AsyncOpenAI(base_url="http://user:secret@127.0.0.1:9/v1", api_key="k")
    assert transport_for(client) is None
