"""The model server and client against what real OpenAI-compatible servers do.

Each test drives the project's server over loopback HTTP with the real openai
client (or raw aiohttp for bodies the client would never send).
"""

from __future__ import annotations

import errno
from typing import Any

import aiohttp
import openai
import pytest

from vfgym.inference.client import completion_room, request_model_response
from vfgym.inference.server import ModelServer, policies
from vfgym.inference.server.protocol import HTTPFailure
from vfgym.types import Messages

HELLO = [{"role": "user", "content": "hello"}]


def test_a_fixed_port_can_be_served_again_right_after_a_stop() -> None:
    """Stopping closes the clients' keep-alive connections, leaving the port in TIME_WAIT
    (as `with ModelServer(...).running() as s: env.evaluate_sync(s.sync_client(), ...)` does);
    a restart on that port must still bind it."""
    with ModelServer(policies.echo).running() as first:
        port = first.port
        client = first.sync_client()
        for _ in range(3):
            client.chat.completions.create(model="m", messages=HELLO)
    client.close()
    with ModelServer(policies.echo, port=port).running() as again:
        with again.sync_client() as client:
            reply = client.chat.completions.create(model="m", messages=HELLO)
    assert reply.choices[0].message.content == "hello"


def test_a_taken_port_names_the_port_and_what_to_do() -> None:
    with ModelServer(policies.echo).running() as first:
        port = first.port
        with pytest.raises(OSError) as caught:
            ModelServer(policies.echo, port=port).start()
    assert caught.value.errno == errno.EADDRINUSE
    assert f"127.0.0.1:{port}" in str(caught.value)
    assert "port=0" in str(caught.value)


async def test_an_oversized_body_is_a_413_in_the_openai_error_shape(model_server) -> None:
    server = await model_server(policies.echo)
    async with aiohttp.ClientSession() as session:
        body = b'{"model": "m", "messages": "' + b"x" * (65 * 1024 * 1024) + b'"}'
        async with session.post(f"{server.base_url}/chat/completions", data=body) as response:
            status, payload = response.status, await response.json()
    assert status == 413
    assert set(payload["error"]) == {"message", "type", "param", "code"}
    assert "too large" in payload["error"]["message"]


async def test_top_logprobs_without_logprobs_is_refused(model_server) -> None:
    """OpenAI: "`logprobs` must be set to `true` if this parameter is used"; vLLM answers 400."""
    server = await model_server(policies.echo)
    async with server.client() as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(model="m", messages=HELLO, top_logprobs=3)
        assert caught.value.param == "top_logprobs"
        assert "logprobs" in caught.value.message
        answered = await client.chat.completions.create(
            model="m", messages=HELLO, logprobs=True, top_logprobs=3
        )
    assert len(answered.choices[0].logprobs.content[0].top_logprobs) == 3


async def test_a_request_without_a_model_is_a_400_not_an_unknown_model(model_server) -> None:
    server = await model_server({"a": policies.echo, "b": policies.echo})
    async with aiohttp.ClientSession() as session:
        async with session.post(
            f"{server.base_url}/chat/completions", json={"messages": HELLO}
        ) as response:
            status, payload = response.status, await response.json()
    assert status == 400
    assert payload["error"]["param"] == "model"
    assert "model" in payload["error"]["message"] and "['a', 'b']" in payload["error"]["message"]


# How OpenAI, vLLM (older, 0.9-0.11, newest) and SGLang word a request whose
# max tokens reach past the window; {w} window, {p} prompt tokens, {c} completion.
OVERFLOW_WORDINGS = {
    "openai": "This model's maximum context length is {w} tokens. However, you requested {t} "
    "tokens ({p} in the messages, {c} in the completion). Please reduce the length of the "
    "messages or completion.",
    "vllm-0.10": "'max_tokens' or 'max_completion_tokens' is too large: {c}. This model's "
    "maximum context length is {w} tokens and your request has {p} input tokens "
    "({c} > {w} - {p}).",
    "vllm-new": "This model's maximum context length is {w} tokens. However, you requested {c} "
    "output tokens and your prompt contains at least {p} input tokens, for a total of at "
    "least {t} tokens. Please reduce the length of the input prompt or the number of "
    "requested output tokens.",
    "sglang": "Requested token count exceeds the model's maximum context length of {w} tokens. "
    "You requested a total of {t} tokens: {p} tokens from the input messages and {c} tokens "
    "for the completion. Please reduce the number of tokens in the input messages or the "
    "completion to fit within the limit.",
}


WINDOW, PROMPT = 4096, 1000


def overflowing_server_policy(wording: str):
    """A policy that refuses, in `wording`, any request asking for more than the room left."""

    def policy(messages: Messages, request: dict[str, Any]) -> str:
        asked = request.get("max_completion_tokens") or request.get("max_tokens") or 0
        if PROMPT + asked > WINDOW:
            text = wording.format(w=WINDOW, p=PROMPT, c=asked, t=PROMPT + asked)
            raise HTTPFailure(400, text)
        return "fits"

    return policy


@pytest.mark.parametrize("server_kind", sorted(OVERFLOW_WORDINGS))
async def test_max_tokens_past_the_window_is_shrunk_for_every_server_wording(
    model_server, fast_retry, server_kind
) -> None:
    server = await model_server(overflowing_server_policy(OVERFLOW_WORDINGS[server_kind]))
    async with server.client() as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(
                model="m", messages=HELLO, max_completion_tokens=8000
            )
        assert completion_room(caught.value) == WINDOW - PROMPT
        server.clear_requests()
        reply = await request_model_response(
            client, "m", HELLO, sampling_args={"max_tokens": 8000}, retry=fast_retry
        )
    assert reply.choices[0].message.content == "fits"
    assert [r["max_completion_tokens"] for r in server.requests] == [8000, WINDOW - PROMPT]


def test_a_prompt_that_alone_fills_the_window_leaves_no_room() -> None:
    """vLLM's prompt-only wording and "0 output tokens" mean no shrink can help."""
    for text in (
        "This model's maximum context length is 4096 tokens. However, your request has 5000 "
        "input tokens. Please reduce the length of the input messages.",
        "This model's maximum context length is 4096 tokens. However, you requested 0 output "
        "tokens and your prompt contains at least 4097 input tokens, for a total of at least "
        "4097 tokens.",
    ):
        assert completion_room(Exception(text)) is None


@pytest.mark.parametrize(
    "tools",
    [
        "add",
        [{"type": "function"}],
        [{"type": "function", "function": {"description": "no name"}}],
        [{"type": "retrieval", "function": {"name": "add"}}],
        ["add"],
    ],
)
async def test_malformed_tools_are_a_400_as_on_vllm(model_server, tools) -> None:
    """A tool schema vLLM would refuse must not pass here and fail only in production."""
    server = await model_server(policies.echo)
    async with server.client() as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(model="m", messages=HELLO, tools=tools)
    assert caught.value.param is not None and caught.value.param.startswith("tools")
    assert server.requests  # it reached the server: the client itself did not refuse it


async def test_a_base_url_without_v1_gets_a_json_404_that_says_so(model_server) -> None:
    server = await model_server(policies.echo)
    async with openai.AsyncOpenAI(base_url=server.url, api_key="k", max_retries=0) as client:
        with pytest.raises(openai.NotFoundError) as caught:
            await client.chat.completions.create(model="m", messages=HELLO)
    assert caught.value.body["type"] == "NotFoundError"
    assert "POST /chat/completions" in caught.value.message
    assert '"/v1"' in caught.value.message and "POST /v1/chat/completions" in caught.value.message


async def test_a_wrong_method_gets_a_json_405_naming_the_right_one(model_server) -> None:
    server = await model_server(policies.echo)
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{server.base_url}/chat/completions") as response:
            status, allow, payload = (
                response.status,
                response.headers["Allow"],
                await response.json(),
            )
    assert (status, allow) == (405, "POST")
    assert "use POST" in payload["error"]["message"]
