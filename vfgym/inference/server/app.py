"""The aiohttp application: OpenAI-compatible routes over a policy and a tokenizer.

Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models,
GET /v1/models/{id}, POST /tokenize, POST /detokenize (vLLM style) and GET /health. Generation
requests are recorded and may be hit by an injected fault (see `faults`). Every
error, an unknown route included, is answered in the OpenAI error shape.

Streaming (`stream: true`) is for outside tools (the openai client, agent
frameworks); vfgym's own client refuses it, as a rollout needs whole answers. The
answer is computed whole, then sent as server-sent events cut per token (see
`streaming.text_pieces`), so every refusal and a policy that raises is still an
HTTP error status before the stream starts. What a stream keeps of the rest:

- The request is recorded as it arrived, and a queued fault hits it before any
  event is sent, as for any request ("malformed" sends an event that is no JSON).
- `return_token_ids`, as vLLM streams it: every chunk carries the `token_ids` of
  the tokens it adds (they join to the whole completion's ids); the first chat
  chunk carries `prompt_token_ids`, and the first chunk of each text-completion
  choice that choice's. `logprobs` likewise come per chunk, for the chunk's tokens.
- A tool call's tokens ride on the delta that names the call; its arguments
  follow in pieces that carry none.
- With `n` > 1 (or several prompts) the choices' chunks take turns, one choice
  per chunk, told apart by `index`. OpenAI's final chunk per choice has an empty
  delta and the finish reason (vLLM puts it on the last content chunk); this
  server sends OpenAI's.
- `stream_options.include_usage` adds a last chunk with empty `choices` and the
  usage, and `"usage": null` on every other chunk; without it chunks have no usage.
"""

from __future__ import annotations

import json
import re
from typing import Any

from aiohttp import web

from vfgym.inference.server.core import ServerCore
from vfgym.inference.server.http import json_response, send_events
from vfgym.inference.server.protocol import (
    HTTPFailure,
    bad_request,
)
from vfgym.inference.server.streaming import (
    EventStream,
)

MAX_BODY_BYTES = 64 * 1024 * 1024


async def _read_raw(request: web.Request) -> bytes:
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        # A 413, not the generic 500 below: clients retry 5xx, and resending cannot help.
        raise HTTPFailure(
            413,
            f"the request body is too large (over {MAX_BODY_BYTES // (1024 * 1024)} MiB); "
            "send a shorter prompt",
        ) from None


async def _read_body(request: web.Request) -> dict[str, Any]:
    return _parse_body(await _read_raw(request))


def _parse_body(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except ValueError:
        raise bad_request("the request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    return body


def _error(core: ServerCore, exc: HTTPFailure) -> web.Response:
    return json_response(core.writer, exc.body(), status=exc.status, headers=exc.headers)


def build_app(core: ServerCore) -> web.Application:
    """The aiohttp application serving `core`."""

    async def generation(request: web.Request, chat: bool) -> web.StreamResponse:
        try:
            raw = await _read_raw(request)
            body = _parse_body(raw)
            core.record(raw)
            fault = core.faults.take()
            if fault is not None:
                answer = await core.apply_fault(fault, request, body, chat=chat)
                if answer is not None:
                    return answer
            payload = await (core.chat(body) if chat else core.completions(body))
            if isinstance(payload, EventStream):
                return await send_events(request, core.writer, payload)
            return json_response(core.writer, payload)
        except HTTPFailure as exc:
            return _error(core, exc)
        except Exception as exc:  # a server bug: still answer in the OpenAI error shape
            message = f"model server error: {type(exc).__name__}: {exc}"
            return _error(core, HTTPFailure(500, message))

    async def chat_completions(request: web.Request) -> web.StreamResponse:
        return await generation(request, True)

    async def completions(request: web.Request) -> web.StreamResponse:
        return await generation(request, False)

    async def models(request: web.Request) -> web.StreamResponse:
        return json_response(core.writer, core.models())

    async def model(request: web.Request) -> web.StreamResponse:
        try:
            return json_response(core.writer, core.model(request.match_info["model"]))
        except HTTPFailure as exc:
            return _error(core, exc)

    async def tokenize(request: web.Request) -> web.StreamResponse:
        try:
            return json_response(core.writer, core.tokenize(await _read_body(request)))
        except HTTPFailure as exc:
            return _error(core, exc)

    async def detokenize(request: web.Request) -> web.StreamResponse:
        try:
            return json_response(core.writer, core.detokenize(await _read_body(request)))
        except HTTPFailure as exc:
            return _error(core, exc)

    async def health(request: web.Request) -> web.StreamResponse:
        return web.Response(status=200)

    routes = {
        ("POST", "/v1/chat/completions"): chat_completions,
        ("POST", "/v1/completions"): completions,
        ("GET", "/v1/models"): models,
        # ids may hold "/" (Hugging Face names), sent as is or as %2F
        ("GET", "/v1/models/{model:.+}"): model,
        ("POST", "/tokenize"): tokenize,
        ("POST", "/detokenize"): detokenize,
        ("GET", "/health"): health,
    }

    async def unknown_route(request: web.Request) -> web.StreamResponse:
        return _error(core, _unknown_route(request.method, request.path, list(routes)))

    app = web.Application(client_max_size=MAX_BODY_BYTES)
    for (method, path), handler in routes.items():
        if method == "GET":
            app.router.add_get(path, handler)  # HEAD too, as health checkers send
        else:
            app.router.add_route(method, path, handler)
    # Registered last, so only requests no route above matches reach it.
    app.router.add_route("*", "/{tail:.*}", unknown_route)
    return app


#: A route's placeholder with its pattern, shown to a client as the bare "{name}".
_ROUTE_PATTERN = re.compile(r"\{(\w+):[^}]*\}")


def _shown_path(route: str) -> str:
    return _ROUTE_PATTERN.sub(r"{\1}", route)


def _unknown_route(method: str, path: str, routes: list[tuple[str, str]]) -> HTTPFailure:
    """The OpenAI-shaped 404/405 for a request no route serves, saying which routes exist.

    aiohttp's own answer is a plain-text "404: Not Found", which the openai client
    shows as is; the likeliest cause, a base URL without "/v1", deserves a hint.
    """
    served = ", ".join(f"{m} {_shown_path(p)}" for m, p in routes)
    methods = [m for m, p in routes if p == path]
    if methods:
        return HTTPFailure(
            405,
            f"{method} {path} is not allowed; use {' or '.join(methods)}",
            headers={"Allow": ", ".join(methods)},
        )
    hint = ""
    if any(p == "/v1" + path for _, p in routes):
        hint = ' (is the base URL missing "/v1"? use ModelServer.base_url)'
    return HTTPFailure(404, f"Invalid URL ({method} {path}){hint}; this server serves: {served}")
