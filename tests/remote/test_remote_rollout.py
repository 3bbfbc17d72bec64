"""`POST /vfgym/rollout`: the env server plays a whole episode against a model endpoint.

The model is vfgym's loopback OpenAI-compatible server answering with the game's
reference policy, and asked for token ids as vLLM is; the answer must be the record
`generate` writes, with the server's responses (and so the token data) in it.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from remote_servers import AUTH

from vfgym.envs.registry import load_environment


async def post(url: str, body: Any, headers: dict[str, str] = AUTH) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession(headers=headers) as http,
        http.post(url + "/vfgym/rollout", json=body) as response,
    ):
        return response.status, await response.json()


async def test_a_rollout_comes_back_as_generates_record(serve: Any, model_server: Any) -> None:
    env = load_environment("guess-the-number")
    model = await model_server(env.reference_policy)
    server = serve(env)
    body = {
        "base_url": model.base_url,
        "model": "reference",
        "api_key": "secret-key-never-echoed",
        "sampling_args": {"temperature": 0.0, "extra_body": {"return_token_ids": True}},
        "example": 3,
    }
    status, answer = await post(server.base_url, body)
    assert status == 200, answer
    record = answer["record"]
    rows = env.get_eval_inputs()
    assert record["example_id"] == rows[3]["example_id"]
    assert record["reward"] == 1.0 and record["stop_reason"]
    assert record["answer"] == rows[3]["answer"]
    assert record["completion"][0]["role"] == "assistant"
    responses = record["state"]["responses"]
    assert len(responses) == record["turn"]
    assert all(r["prompt_token_ids"] and r["choices"][0]["token_ids"] for r in responses)
    assert "secret-key-never-echoed" not in str(answer)
    assert not server.sessions and server.info()["active_sessions"] == 0


async def test_a_bad_request_says_what_to_fix(serve: Any) -> None:
    server = serve(load_environment("guess-the-number"))
    cases = [
        ({"model": "m"}, "'base_url' must be the model's OpenAI-compatible endpoint"),
        ({"base_url": "http://h/v1", "model": "m", "example": 10_000}, "row index from 0 to"),
        ({"base_url": "http://h/v1", "model": "m", "temperature": 1}, "unknown field"),
        ({"base_url": "http://h/v1", "model": "m", "sampling_args": [1]}, "JSON object"),
    ]
    for body, said in cases:
        status, answer = await post(server.base_url, body)
        assert status == 400 and said in answer["error"], (body, answer)
        assert answer["code"] == "VALIDATION_ERROR"
    status, answer = await post(server.base_url, {"model": "m"}, headers={})
    assert status == 401


async def test_rollouts_count_against_the_session_cap(serve: Any, model_server: Any) -> None:
    env = load_environment("guess-the-number")
    model = await model_server(env.reference_policy)
    server = serve(env, max_sessions=1)
    assert server.claim_rollout()  # the one slot is taken, as by a running session
    try:
        status, answer = await post(server.base_url, {"base_url": model.base_url, "model": "m"})
    finally:
        server.release_rollout()
    assert status == 429 and answer["code"] == "CAPACITY_REACHED"
    assert "--max-sessions 1" in answer["error"]
