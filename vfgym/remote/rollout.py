"""`POST /vfgym/rollout`: the server plays a whole episode against a model endpoint.

A trainer that farms rollouts out to environment machines sends the model's
OpenAI-compatible endpoint and sampling args; the environment machine plays one
evaluation example with `generate` and answers with the record `generate` writes to
results.jsonl (prompt, completion, answer, reward, metrics, stop reason, ...), plus the
model server's responses under `state.responses`, which carry the token ids and
logprobs when the sampling args ask the server for them (vLLM:
`{"extra_body": {"return_token_ids": true}, "logprobs": true}`).

Request body (JSON): `base_url` and `model` (required), `api_key` (default "EMPTY";
never stored or echoed), `sampling_args` (an object), `example` (the evaluation row's
index, default 0). Answers: 200 `{"record": ...}`; 400 for a bad body, with what to
fix; 429 `CAPACITY_REACHED` when the server's session slots are taken (a rollout takes
one); 503 while the server drains.

This is vfgym's own route, beside OpenEnv's protocol rather than bent into it: OpenEnv
has no call that hands the environment a model.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from vfgym.remote.protocol import CAPACITY_REACHED, VALIDATION_ERROR

if TYPE_CHECKING:
    from vfgym.remote.server import EnvServer

#: The State entries a rollout record carries beyond `generate`'s own: the model
#: server's responses, where the token data is.
TOKEN_COLUMNS = ["responses"]


def rollout_route(server: EnvServer) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The handler of `POST /vfgym/rollout` for `server`."""
    rows: list[dict[str, Any]] = []

    async def handle(request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError) as exc:
            return _refuse(400, f"the body must be a JSON object: {exc}", VALIDATION_ERROR)
        try:
            base_url, model, api_key, sampling_args, example = _checked(body)
        except ValueError as exc:
            return _refuse(400, str(exc), VALIDATION_ERROR)
        if not rows:
            rows.extend(server.environment.get_eval_inputs())
        if not 0 <= example < len(rows):
            return _refuse(
                400,
                f"'example' must be an evaluation row index from 0 to {len(rows) - 1}, "
                f"got {example}",
                VALIDATION_ERROR,
            )
        if not server.claim_rollout():
            refused = server.refusal()
            message = refused[0] if refused else "no session slot is free"
            return _refuse(503 if server.draining else 429, message, CAPACITY_REACHED)
        try:
            record = await _play(server, rows[example], base_url, model, api_key, sampling_args)
        finally:
            server.release_rollout()
        from vfgym.results.records import json_line

        return web.Response(
            body=b'{"record":' + json_line(record).rstrip(b"\n") + b"}",
            content_type="application/json",
        )

    return handle


def _checked(body: Any) -> tuple[str, str, str, dict[str, Any], int]:
    if not isinstance(body, dict):
        raise ValueError(f"the body must be a JSON object, not {type(body).__name__}")
    unknown = sorted(set(body) - {"base_url", "model", "api_key", "sampling_args", "example"})
    if unknown:
        raise ValueError(
            f"unknown field(s) {unknown}; the fields are base_url, model, api_key, "
            "sampling_args, example"
        )
    base_url, model = body.get("base_url"), body.get("model")
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise ValueError(
            "'base_url' must be the model's OpenAI-compatible endpoint, e.g. "
            f"http://HOST:8000/v1, not {base_url!r}"
        )
    if not isinstance(model, str) or not model:
        raise ValueError(f"'model' must be the model's name, not {model!r}")
    api_key = body.get("api_key") or "EMPTY"
    if not isinstance(api_key, str):
        raise ValueError("'api_key' must be a string")
    sampling_args = body.get("sampling_args") or {}
    if not isinstance(sampling_args, dict):
        raise ValueError(
            f"'sampling_args' must be a JSON object (e.g. {{\"temperature\": 0.7}}), not "
            f"{json.dumps(sampling_args)}"
        )
    example = body.get("example", 0)
    if type(example) is not int:
        raise ValueError(f"'example' must be an integer row index, not {example!r}")
    return base_url, model, api_key, sampling_args, example


async def _play(
    server: EnvServer,
    row: dict[str, Any],
    base_url: str,
    model: str,
    api_key: str,
    sampling_args: dict[str, Any],
) -> dict[str, Any]:
    """One rollout of `row` by `generate`; the record it delivers."""
    from openai import AsyncOpenAI

    records: list[dict[str, Any]] = []
    client = AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=2)
    try:
        await server.environment.generate(
            [dict(row)],
            client,
            model,
            sampling_args=sampling_args,
            state_columns=TOKEN_COLUMNS,
            on_result=records.append,
        )
    finally:
        await client.close()
    return records[0]


def _refuse(status: int, message: str, code: str) -> web.Response:
    return web.json_response({"error": message, "code": code}, status=status)
