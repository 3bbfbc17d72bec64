"""The endpoints the token-exact mode uses: token-id prompts, `return_token_ids`, /tokenize."""

from __future__ import annotations

from typing import Any

import openai
from aiohttp import web
from loopback_http import serve_posts

from vfgym.inference.client import RetryPolicy, request_model_response
from vfgym.inference.transport import ResponseRecord, transport_for
from vfgym.training.response_ids import response_tokens


class TokenServer:
    """A vLLM-shaped stand-in: completions from token ids, and /tokenize."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, dict[str, Any]]] = []

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append((request.path, body))
        if request.path == "/tokenize":
            tokens = [ord(c) for c in body["prompt"]]
            return web.json_response({"count": len(tokens), "max_model_len": 64, "tokens": tokens})
        prompt = body["prompt"]
        choice: dict[str, Any] = {"index": 0, "text": "ok", "finish_reason": "stop"}
        if body.get("return_token_ids"):
            choice["token_ids"] = [7, 8]
            choice["prompt_token_ids"] = prompt
        if body.get("logprobs"):
            choice["logprobs"] = {
                "tokens": ["token_id:7", "token_id:8"],
                "token_logprobs": [-1.0, -2.0],
            }
        return web.json_response(
            {
                "id": "cmpl-1",
                "object": "text_completion",
                "model": "m",
                "choices": [choice],
                "usage": {"prompt_tokens": len(prompt), "completion_tokens": 2, "total_tokens": 5},
            }
        )


async def test_a_token_id_prompt_with_return_token_ids() -> None:
    server = TokenServer()
    runner, port = await serve_posts(server.handle, "/v1/completions", "/tokenize")
    try:
        client = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k")
        response = await request_model_response(
            client,
            "m",
            [1, 2, 3],  # type: ignore[arg-type]
            message_type="completion",
            sampling_args={
                "max_tokens": 4,
                "logprobs": 1,
                "extra_body": {"return_token_ids": True},
            },
            retry=RetryPolicy(max_retries=0),
        )
        assert isinstance(response, ResponseRecord)
        path, body = server.bodies[0]
        assert path == "/v1/completions"
        assert body == {
            "model": "m",
            "prompt": [1, 2, 3],
            "max_tokens": 4,
            "logprobs": 1,
            "return_token_ids": True,
        }
        assert response.choices[0].text == "ok"
        assert response.choices[0].prompt_token_ids == [1, 2, 3]
        assert response_tokens(response) == ([7, 8], [-1.0, -2.0])
    finally:
        await runner.cleanup()


async def test_tokenize_is_served_beside_v1() -> None:
    server = TokenServer()
    runner, port = await serve_posts(server.handle, "/v1/completions", "/tokenize")
    try:
        client = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k")
        transport = transport_for(client)
        assert transport is not None
        answer = await transport.tokenize(model="m", prompt="hi")
        assert answer.tokens == [104, 105] and answer.count == 2
        assert server.bodies == [("/tokenize", {"model": "m", "prompt": "hi"})]
    finally:
        await runner.cleanup()
