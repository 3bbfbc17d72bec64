"""vfgym's own transport for OpenAI-compatible servers: aiohttp, a fast JSON codec, no validation.

`OpenAITransport` sends what `client.chat.completions.create(**kwargs)` and
`client.completions.create(**kwargs)` would send (the same keyword arguments,
`extra_body`, `extra_headers`, `extra_query` and `timeout` included), plus vLLM's
`/tokenize` and `/detokenize`, and answers with `ResponseRecord`s. Failures are
raised as the openai SDK's own exceptions (`RateLimitError`, `BadRequestError`,
`APIConnectionError`, `APITimeoutError`, `APIResponseValidationError`, ...) with
the status, headers and body of the answer, so the retry policy, the reading of
Retry-After and `x-should-retry`, and the recognition of a context overflow work
the same on both paths. The client's own `max_retries` is honoured as the SDK
honours it (vfgym's batches set it to 0 and let `RetryPolicy` decide).
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Mapping
from typing import Any

import aiohttp
import openai

from vfgym.inference.retry import retry_after
from vfgym.inference.transport.records import ResponseRecord
from vfgym.inference.transport.session import pooled_session
from vfgym.inference.transport.settings import ClientSettings, timeout_seconds

try:
    import httpx2 as _httpx  # what openai >= 3 is built on
except ImportError:  # pragma: no cover - older openai releases use httpx
    import httpx as _httpx  # type: ignore[no-redef,import-not-found,unused-ignore]

try:
    import orjson

    def dumps(value: Any) -> bytes:
        """JSON bytes of a request body (orjson: several times json's speed)."""
        return orjson.dumps(value, default=_json_default)

    def loads(raw: bytes | str) -> Any:
        """The decoded answer. orjson takes strict JSON only; Python's servers (vLLM's
        among them) may write a logprob of -inf as `-Infinity` or NaN as `NaN`, which
        the standard library's decoder reads, as the openai SDK's does."""
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return json.loads(raw)

except ImportError:  # pragma: no cover - orjson is in the `fast` extra

    def dumps(value: Any) -> bytes:
        """JSON bytes of a request body (the standard library's codec: no orjson here)."""
        return json.dumps(value, default=_json_default, separators=(",", ":")).encode()

    loads = json.loads  # type: ignore[assignment,unused-ignore]


def _json_default(value: Any) -> Any:
    """Objects a prompt may carry that JSON has no type for: the SDK's models."""
    if hasattr(value, "model_dump"):
        return value.model_dump(exclude_none=True)
    raise TypeError(
        f"a model request holds a {type(value).__name__}, which has no JSON form; give "
        "messages, tools and sampling arguments as plain dicts, lists, text and numbers"
    )


# The statuses the openai SDK raises a class of its own for.
_STATUS_ERRORS: dict[int, type[openai.APIStatusError]] = {
    400: openai.BadRequestError,
    401: openai.AuthenticationError,
    403: openai.PermissionDeniedError,
    404: openai.NotFoundError,
    409: openai.ConflictError,
    422: openai.UnprocessableEntityError,
    429: openai.RateLimitError,
}
# Keyword arguments of the SDK's `create` that are not part of the JSON body.
_REQUEST_OPTIONS = frozenset({"extra_body", "extra_headers", "extra_query", "timeout"})
# The SDK's own backoff for its `max_retries`: 0.5 s doubling, at most 8 s.
_SDK_INITIAL_DELAY, _SDK_MAX_DELAY = 0.5, 8.0


class OpenAITransport:
    """The model requests of one openai client's settings, over the loop's pooled session."""

    __slots__ = ("_limit", "_root", "_settings", "_timeout", "base_url")

    def __init__(self, settings: ClientSettings, connections_per_host: int) -> None:
        self._settings = settings
        self._limit = connections_per_host
        self.base_url = settings.base_url
        # vLLM serves /tokenize beside /v1, not under it.
        self._root = settings.base_url.removesuffix("/v1")
        self._timeout = _client_timeout(settings.connect_timeout, settings.read_timeout)

    async def chat_create(self, **kwargs: Any) -> ResponseRecord:
        """POST /chat/completions with the keyword arguments of the SDK's `create`."""
        return await self.post(self.base_url + "/chat/completions", kwargs)

    async def completions_create(self, **kwargs: Any) -> ResponseRecord:
        """POST /completions (a text prompt, or token ids for vLLM) likewise."""
        return await self.post(self.base_url + "/completions", kwargs)

    async def tokenize(self, **kwargs: Any) -> ResponseRecord:
        """vLLM's POST /tokenize (`model` and `prompt`, or `messages`): `.tokens`, `.count`."""
        return await self.post(self._root + "/tokenize", kwargs)

    async def detokenize(self, **kwargs: Any) -> ResponseRecord:
        """vLLM's POST /detokenize (`model` and `tokens`): `.prompt`."""
        return await self.post(self._root + "/detokenize", kwargs)

    async def post(self, url: str, kwargs: Mapping[str, Any]) -> ResponseRecord:
        """One request, sent again after a transient failure as often as the client's
        `max_retries` allows, with the SDK's backoff (or the server's Retry-After)."""
        settings = self._settings
        body, headers, query, timeout = self._request_parts(kwargs)
        payload = dumps(body)
        attempt = 0
        while True:
            try:
                return await self._send(url, payload, headers, query, timeout)
            except (openai.APIStatusError, openai.APIConnectionError) as exc:
                if attempt >= settings.max_retries or not _sdk_retries(exc):
                    raise
                attempt += 1
                await asyncio.sleep(_sdk_delay(attempt, retry_after(exc)))

    def _request_parts(
        self, kwargs: Mapping[str, Any]
    ) -> tuple[dict[str, Any], dict[str, str], dict[str, str], aiohttp.ClientTimeout]:
        settings = self._settings
        body = {
            key: value
            for key, value in kwargs.items()
            if key not in _REQUEST_OPTIONS and not isinstance(value, openai.NotGiven)
        }
        extra_body = kwargs.get("extra_body")
        if extra_body:
            body.update(extra_body)
        headers, query, timeout = settings.headers, settings.query, self._timeout
        extra_headers = kwargs.get("extra_headers")
        if extra_headers:
            headers = {**headers, **{k: v for k, v in extra_headers.items() if isinstance(v, str)}}
        extra_query = kwargs.get("extra_query")
        if extra_query:
            query = {**query, **{str(k): str(v) for k, v in extra_query.items()}}
        if "timeout" in kwargs and not isinstance(kwargs["timeout"], openai.NotGiven):
            connect, read = timeout_seconds(kwargs["timeout"])
            timeout = _client_timeout(connect, read)
        return body, headers, query, timeout

    async def _send(
        self,
        url: str,
        payload: bytes,
        headers: dict[str, str],
        query: dict[str, str],
        timeout: aiohttp.ClientTimeout,
    ) -> ResponseRecord:
        session = await pooled_session(self._limit)
        try:
            async with session.post(
                url, data=payload, headers=headers, params=query or None, timeout=timeout
            ) as response:
                raw = await response.read()
                status = response.status
                if status >= 300:
                    raise _status_error(url, status, response.headers, raw)
        except TimeoutError as exc:  # aiohttp's timeouts are TimeoutErrors
            raise openai.APITimeoutError(request=_request(url)) from exc
        except aiohttp.ClientError as exc:  # refused, dropped, cut short
            raise openai.APIConnectionError(
                message=f"Connection error: {type(exc).__name__}: {exc}", request=_request(url)
            ) from exc
        try:
            data = loads(raw)
        except ValueError as exc:
            raise _malformed(url, status, raw, "is not JSON") from exc
        if not isinstance(data, dict):
            raise _malformed(url, status, raw, "is not a JSON object")
        return ResponseRecord(data)


def _request(url: str) -> Any:
    """The SDK's exceptions name the request they were raised for."""
    return _httpx.Request("POST", url)


def _response(url: str, status: int, headers: Mapping[str, str], raw: bytes) -> Any:
    return _httpx.Response(
        status, headers=list(headers.items()), content=raw, request=_request(url)
    )


def _status_error(
    url: str, status: int, headers: Mapping[str, str], raw: bytes
) -> openai.APIStatusError:
    """The SDK's exception for an error status, with the same message and body it gives."""
    text = raw.decode("utf-8", "replace").strip()
    body: Any = text
    message = f"Error code: {status}"
    try:
        body = loads(text)
    except ValueError:
        pass
    else:
        error = body.get("error", body) if isinstance(body, dict) else None
        said = error.get("message") if isinstance(error, dict) else None
        if isinstance(said, str) and said:
            message += f" - {said}"
        if isinstance(body, dict):
            body = body.get("error", body)
    kind = _STATUS_ERRORS.get(status)
    if kind is None:
        kind = openai.InternalServerError if status >= 500 else openai.APIStatusError
    return kind(message, response=_response(url, status, headers, raw), body=body)


def _malformed(url: str, status: int, raw: bytes, what: str) -> openai.APIResponseValidationError:
    shown = raw[:200].decode("utf-8", "replace")
    return openai.APIResponseValidationError(
        _response(url, status, {}, raw),
        shown,
        message=f"the model server answered {status} with a body that {what}: {shown!r}",
    )


def _sdk_retries(exc: BaseException) -> bool:
    """Whether the openai SDK would send the request again after `exc`."""
    if isinstance(exc, openai.APIStatusError):
        told = exc.response.headers.get("x-should-retry")
        if told in ("true", "false"):
            return told == "true"
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return isinstance(exc, openai.APIConnectionError)


def _sdk_delay(attempt: int, server_said: float | None) -> float:
    if server_said is not None and 0 <= server_said <= 60:
        return server_said
    delay = min(_SDK_INITIAL_DELAY * 2 ** (attempt - 1), _SDK_MAX_DELAY)
    return delay * (1 - 0.25 * random.random())


def _client_timeout(connect: float | None, read: float | None) -> aiohttp.ClientTimeout:
    """A connect bound and a bound on each wait for the server, as httpx's timeouts are."""
    return aiohttp.ClientTimeout(total=None, sock_connect=connect, sock_read=read)
