"""Request options the project's server must judge as OpenAI and vLLM do.

`stream_options` on a request that does not stream is a 400 on both real servers,
so a client that sends it must fail here too, not only in production. And a text
completion with no `max_tokens` gets vLLM's (and OpenAI's) default of 16 tokens,
so a completion-mode environment that forgets to set it is cut short here as it
would be there. Each test drives the server over loopback with the real openai client.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest

from vfgym.inference.server import policies

HELLO = [{"role": "user", "content": "hello"}]
LONG = "count: " + " ".join(str(i) for i in range(40))  # well over 16 tokens


async def _chat(client: openai.AsyncOpenAI, **options: Any) -> Any:
    return await client.chat.completions.create(model="m", messages=HELLO, **options)


async def _text(client: openai.AsyncOpenAI, **options: Any) -> Any:
    return await client.completions.create(model="m", prompt="hello", **options)


ENDPOINTS = {"chat": _chat, "completions": _text}


@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
@pytest.mark.parametrize("stream", [None, False], ids=["stream-absent", "stream-false"])
async def test_stream_options_without_streaming_is_an_openai_shaped_400(
    model_server, endpoint: str, stream: bool | None
) -> None:
    server = await model_server(policies.echo)
    options: dict[str, Any] = {"stream_options": {"include_usage": True}}
    if stream is not None:
        options["stream"] = stream
    with pytest.raises(openai.BadRequestError) as caught:
        await ENDPOINTS[endpoint](server.client(), **options)
    error = caught.value
    assert error.status_code == 400
    assert error.body["param"] == "stream_options"
    assert error.body["type"] == "BadRequestError"
    assert error.body["code"] == 400
    assert "'stream_options'" in error.body["message"]
    assert "'stream'" in error.body["message"]


@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
async def test_an_empty_stream_options_object_is_refused_too(model_server, endpoint: str) -> None:
    """OpenAI refuses any stream_options object on a request that does not stream."""
    server = await model_server(policies.echo)
    with pytest.raises(openai.BadRequestError, match="stream_options"):
        await ENDPOINTS[endpoint](server.client(), stream_options={})


@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
async def test_a_null_stream_options_is_accepted(model_server, endpoint: str) -> None:
    """`null` is what a client sends for "not set"; both real servers accept it."""
    server = await model_server(policies.echo)
    response = await ENDPOINTS[endpoint](server.client(), stream_options=None)
    assert response.choices[0].finish_reason == "stop"
    assert server.requests[-1]["stream_options"] is None


# -- the completion length a request gets when it names none ---------------------------------


async def test_a_text_completion_without_max_tokens_gets_16_tokens(model_server) -> None:
    server = await model_server(policies.echo)
    response = await server.client().completions.create(model="m", prompt=LONG)
    [choice] = response.choices
    assert choice.finish_reason == "length"
    assert response.usage.completion_tokens == 16
    assert choice.text == LONG[:16]


async def test_a_text_completion_with_null_max_tokens_may_fill_the_context(model_server) -> None:
    server = await model_server(policies.echo)
    response = await server.client().completions.create(model="m", prompt=LONG, max_tokens=None)
    assert response.choices[0].finish_reason == "stop"
    assert response.choices[0].text == LONG


async def test_a_chat_completion_without_max_tokens_may_fill_the_context(model_server) -> None:
    server = await model_server(policies.echo)
    response = await server.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": LONG}]
    )
    assert response.choices[0].finish_reason == "stop"
    assert response.choices[0].message.content == LONG


async def test_the_default_16_tokens_must_fit_the_context_window(model_server) -> None:
    """vLLM checks the prompt plus the default 16 against the window, as an explicit 16."""
    server = await model_server(policies.echo, max_model_len=20)
    with pytest.raises(openai.BadRequestError, match="maximum context length is 20 tokens"):
        await server.client().completions.create(model="m", prompt="0123456789")
    fits = await server.client().completions.create(model="m", prompt="0123")
    assert fits.choices[0].text == "0123"
