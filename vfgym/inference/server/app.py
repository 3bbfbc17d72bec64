"""The aiohttp application: OpenAI-compatible routes over a policy and a tokenizer.

Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models,
GET /v1/models/{id}, POST /tokenize, POST /detokenize (vLLM style) and GET /health. Generation
requests are recorded and may be hit by an injected fault (see `faults`). Every
error, an unknown route included, is answered in the OpenAI error shape.

Streaming (`stream: true`) is for outside tools (the openai client, agent
frameworks); vfgym's own client refuses it, as a rollout needs whole answers. The
answer is computed whole, then sent as server-sent events cut per token (see
`protocol.text_pieces`), so every refusal and a policy that raises is still an
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

import asyncio
import copy
import itertools
import json
import math
import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from vfgym.errors import PolicyReplyError, UnknownModelError
from vfgym.inference.server.faults import Fault, FaultQueue
from vfgym.inference.server.policy import BoundPolicy, PolicyRouter, normalise_reply
from vfgym.inference.server.protocol import (
    EventStream,
    HTTPFailure,
    JSONWriter,
    ResponseHead,
    TokenizerView,
    TokenOptions,
    bad_request,
    chat_chunk_choices,
    chat_logprobs,
    completion_choice,
    completion_chunk_choices,
    completion_logprobs,
    context_overflow,
    finish_text,
    finish_turn,
    interleave,
    model_not_found,
    reply_text,
)
from vfgym.inference.server.tokenizer import content_text


def json_response(
    writer: JSONWriter, payload: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """A JSON answer, encoded in one pass (with any pre-encoded fragments spliced in)."""
    return web.Response(
        body=writer.encode(payload),
        status=status,
        headers=headers,
        content_type="application/json",
    )


#: The `object` of a chunk of a streamed answer of each kind (a text completion's
#: chunks are "text_completion" too, on OpenAI and vLLM).
_CHUNK_OBJECT = {"chat.completion": "chat.completion.chunk"}

#: Headers of a server-sent-event stream; no-cache keeps proxies from buffering it.
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


async def send_events(
    request: web.Request, writer: JSONWriter, stream: EventStream
) -> web.StreamResponse:
    """Send `stream` as server-sent events, `data: <json>` each, then `data: [DONE]`.

    One write per event, so a client reads the chunks as they come, as from a
    server that samples token by token. A client that hangs up mid-stream only
    ends the stream: there is nobody left to answer.
    """
    response = web.StreamResponse(status=200, headers=SSE_HEADERS)
    await response.prepare(request)
    try:
        for chunk in stream.chunks:
            await response.write(b"data: " + writer.encode(chunk) + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
    except ConnectionError:
        pass
    return response


#: The range of `seed` vLLM accepts (a signed 64-bit integer); OpenAI's is the same.
SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1


def _int_param(
    body: dict[str, Any], name: str, *, minimum: int, maximum: int | None = None
) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_request(f"'{name}' must be an integer, got {value!r}", name)
    if value < minimum or (maximum is not None and value > maximum):
        upper = f" and <= {maximum}" if maximum is not None else ""
        raise bad_request(f"'{name}' must be >= {minimum}{upper}, got {value}", name)
    return value


def _stop_param(body: dict[str, Any]) -> list[str] | None:
    stop = body.get("stop")
    if stop is None:
        return None
    if isinstance(stop, str):
        return [stop]
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        return stop
    raise bad_request(f"'stop' must be a string or a list of strings, got {stop!r}", "stop")


MAX_BODY_BYTES = 64 * 1024 * 1024

#: What /v1/completions gives a request with no `max_tokens`, as vLLM and OpenAI do.
TEXT_COMPLETION_DEFAULT_MAX_TOKENS = 16


def _tools_param(body: dict[str, Any]) -> list[Any] | None:
    """`tools`, checked as vLLM and OpenAI check it: malformed schemas are a 400 there too."""
    tools = body.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise bad_request(f"'tools' must be a list of tool dicts, got {tools!r:.120}", "tools")
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if (
            not isinstance(function, dict)
            or not isinstance(function.get("name"), str)
            or tool.get("type", "function") != "function"
        ):
            raise bad_request(
                f"tools[{i}] must be {{'type': 'function', 'function': {{'name': str, "
                f"'description': str, 'parameters': {{...}}}}}}, got {tool!r:.120}",
                f"tools[{i}]",
            )
    return tools


def _check_tool_choice(body: dict[str, Any], tools: list[Any] | None) -> None:
    """`tool_choice`, checked as vLLM checks it (OpenAI refuses the same requests).

    "none" needs nothing; "auto", "required" and a named function need `tools`, and
    the named function must be one of them.
    """
    choice = body.get("tool_choice")
    if choice is None or choice == "none":
        return
    if not tools:
        raise bad_request(
            f"'tool_choice' {choice!r:.120} is only allowed when 'tools' are given; "
            "send tools or drop tool_choice",
            "tool_choice",
        )
    if choice in ("auto", "required"):
        return
    if not isinstance(choice, dict):
        raise bad_request(
            "'tool_choice' must be 'none', 'auto', 'required' or "
            f"{{'type': 'function', 'function': {{'name': ...}}}}, got {choice!r:.120}",
            "tool_choice",
        )
    function = choice.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str) or choice.get("type", "function") != "function":
        raise bad_request(
            "a named 'tool_choice' must be {'type': 'function', 'function': {'name': str}}, "
            f"got {choice!r:.120}",
            "tool_choice",
        )
    names = [tool["function"]["name"] for tool in tools]
    if name not in names:
        raise bad_request(
            f"'tool_choice' names the function {name!r}, which is not one of the tools "
            f"{names}; name one of them or add it to tools",
            "tool_choice",
        )


@dataclass(frozen=True)
class ForcedCall:
    """What a forced `tool_choice` promises the client: a reply that calls a tool,
    and calls only functions among `names`. `shown` and `wanted` word it for errors."""

    shown: str
    wanted: str
    names: tuple[str, ...]


def _forced_call(body: dict[str, Any], tools: list[Any] | None) -> ForcedCall | None:
    """The promise of the request's tool_choice ("required" or a named function), or
    None when the model may answer in text ("auto", "none", no tool_choice).

    Read before the policy runs, as the policy gets `body` and may edit it; the
    choice itself has been checked by `_check_tool_choice`.
    """
    choice = body.get("tool_choice")
    if choice == "required" and tools:
        names = tuple(tool["function"]["name"] for tool in tools)
        return ForcedCall("'required'", f"a call of one of the tools {list(names)}", names)
    if isinstance(choice, dict):
        name = choice["function"]["name"]
        return ForcedCall(f"naming the function {name!r}", f"a call of {name!r}", (name,))
    return None


def _broken_promise(forced: ForcedCall, message: dict[str, Any], model: Any) -> HTTPFailure | None:
    """The error for a policy reply that breaks a forced tool_choice, None for one that keeps it.

    vLLM decodes under a grammar in these modes, so its output is always a call of
    the named function (or of one of the tools for "required"); OpenAI promises the
    same. A scripted policy cannot be constrained, and passing its text on would
    hand the client an answer that no real server gives, so the request fails.
    It is a 500, not a 400: the request is valid (vLLM serves it), the stand-in
    model broke the contract, as a policy that returns a bad reply does. It
    carries `x-should-retry: false`, as a retry would call the same policy again.
    Several calls are let through when each names an allowed function (OpenAI may
    send parallel calls); a call cut short later by `max_tokens` or a stop string
    is cut as any reply is.
    """
    calls = message.get("tool_calls") or []
    if not calls:
        got = f"no tool call, only the text {content_text(message.get('content'))!r:.200}"
    else:
        wrong = [c["function"]["name"] for c in calls if c["function"]["name"] not in forced.names]
        if not wrong:
            return None
        got = f"a call of {wrong[0]!r}"
    return HTTPFailure(
        500,
        f"tool_choice {forced.shown} promises {forced.wanted}, but the policy for model {model!r} "
        f"returned {got}; vLLM constrains the model's output to such a call here, so make "
        "the policy return {'tool_calls': [...]} calling that function when it sees this "
        "tool_choice (or send tool_choice 'auto' to allow text)",
        headers=NO_RETRY,
    )


#: Sent with a 500 that a retry cannot mend (a policy that raised, or answered
#: nonsense): the openai client and `vfgym.inference.client` retry a 5xx unless told not to,
#: which would call the broken policy again and delay the error by the backoff.
NO_RETRY = {"x-should-retry": "false"}

#: The `response_format` types vLLM knows; OpenAI knows the first three.
RESPONSE_FORMAT_TYPES = ("text", "json_object", "json_schema", "structural_tag")


def _check_response_format(body: dict[str, Any]) -> None:
    """`response_format`, checked as vLLM and OpenAI check it: a misspelt type is a 400
    there, so it must not pass here and fail only in production."""
    fmt = body.get("response_format")
    if fmt is None:
        return
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind not in RESPONSE_FORMAT_TYPES:
        raise bad_request(
            f"'response_format' must be {{'type': T}} with T one of {list(RESPONSE_FORMAT_TYPES)} "
            "(and a 'json_schema' object for type json_schema), got "
            f"{fmt!r:.120}",
            "response_format",
        )
    schema = fmt.get("json_schema")
    if kind == "json_schema" and (
        not isinstance(schema, dict) or not isinstance(schema.get("name"), str)
    ):
        raise bad_request(
            "'response_format' of type json_schema needs 'json_schema': "
            f"{{'name': str, 'schema': {{...}}}}, got {fmt!r:.120}",
            "response_format",
        )


def _refuse_max_completion_tokens(body: dict[str, Any]) -> None:
    """/v1/completions takes `max_tokens` only: OpenAI refuses `max_completion_tokens`
    there and vLLM ignores it (giving the default 16 tokens), so honouring it here
    would hide the mistake until production."""
    if body.get("max_completion_tokens") is not None:
        raise bad_request(
            "'max_completion_tokens' is a chat completions parameter; /v1/completions "
            "takes 'max_tokens' (vLLM would ignore it and give 16 tokens)",
            "max_completion_tokens",
        )


def _own_requests(body: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """`body` for the first of `count` policy calls and a copy for each other one.

    A real server samples n choices independently from the request as sent; a
    policy may edit what it is given (append to the messages, say), and one call's
    edits must not reach another's. The first call may have `body` itself, as the
    caller reads what it needs from it beforehand; so n=1 copies nothing.
    """
    return [body] + [copy.deepcopy(body) for _ in range(count - 1)]


@dataclass(frozen=True)
class StreamSettings:
    """How a request that streams wants its stream: with a last usage chunk or not."""

    include_usage: bool


def _stream_param(body: dict[str, Any]) -> StreamSettings | None:
    """`stream` and `stream_options`, checked as OpenAI checks them; None: no streaming.

    `stream_options` on a request that does not stream is a 400 on OpenAI and vLLM,
    so a client that sends it fails here as it would against them. A null
    `stream` or `stream_options` means "not set". vLLM's `continuous_usage_stats`
    is refused rather than ignored, so nobody counts on usage it does not send.
    """
    stream = body.get("stream")
    if stream is not None and type(stream) is not bool:
        raise bad_request(f"'stream' must be true or false, got {stream!r:.40}", "stream")
    options = body.get("stream_options")
    if not stream:
        if options is not None:
            raise bad_request(
                "'stream_options' is only allowed when 'stream' is true; "
                "drop stream_options or set stream=True",
                "stream_options",
            )
        return None
    if options is None:
        return StreamSettings(include_usage=False)
    if not isinstance(options, dict):
        raise bad_request(
            f"'stream_options' must be an object like {{'include_usage': true}}, "
            f"got {options!r:.80}",
            "stream_options",
        )
    include_usage = options.get("include_usage")
    if include_usage is not None and type(include_usage) is not bool:
        raise bad_request(
            f"'stream_options.include_usage' must be true or false, got {include_usage!r:.40}",
            "stream_options",
        )
    if options.get("continuous_usage_stats"):
        raise bad_request(
            "'stream_options.continuous_usage_stats' is not supported by this server; "
            "use include_usage for the usage of the whole answer",
            "stream_options",
        )
    return StreamSettings(include_usage=bool(include_usage))


def _top_logprobs_param(body: dict[str, Any]) -> int:
    """`top_logprobs` of a chat request; OpenAI and vLLM refuse it without `logprobs`,
    and refuse a `logprobs` that is a count (as in /v1/completions) rather than a flag."""
    flag = body.get("logprobs")
    if flag is not None and type(flag) is not bool:
        raise bad_request(
            f"'logprobs' of a chat completion is true or false, got {flag!r:.40}; the "
            "number of alternatives per token is 'top_logprobs' (0-20)",
            "logprobs",
        )
    top_n = _int_param(body, "top_logprobs", minimum=0, maximum=20)
    if top_n is not None and not flag:
        raise bad_request(
            "'top_logprobs' needs 'logprobs': true; set logprobs=True or drop top_logprobs",
            "top_logprobs",
        )
    return top_n or 0


class ServerCore:
    """Everything the route handlers share: policies, tokenizer, limits, faults, records."""

    def __init__(
        self,
        router: PolicyRouter,
        view: TokenizerView,
        *,
        model_name: str,
        max_model_len: int,
        record_requests: bool,
    ) -> None:
        self.router = router
        self.view = view
        self.model_name = model_name
        self.max_model_len = max_model_len
        self.faults = FaultQueue()
        self.writer = JSONWriter()
        self.record_requests = record_requests
        self._records: list[bytes] = []
        self._records_lock = threading.Lock()
        self._response_ids = itertools.count()
        self._id_prefix = os.urandom(4).hex()
        self.call_ids = itertools.count()
        self.created = int(time.time())

    # -- records ------------------------------------------------------------

    def record(self, raw: bytes) -> None:
        """Keep a request's body as it arrived.

        The bytes, not the parsed dict: the policy gets that dict and may edit it, and
        a record must say what the client sent. Parsed again when read (tests read
        records; the hot path only appends).
        """
        if self.record_requests:
            with self._records_lock:
                self._records.append(raw)

    def records(self) -> list[dict[str, Any]]:
        with self._records_lock:
            raws = list(self._records)
        return [json.loads(raw) for raw in raws]

    def clear_records(self) -> None:
        with self._records_lock:
            self._records.clear()

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}-{self._id_prefix}{next(self._response_ids):08x}"

    # -- shared request checks ------------------------------------------------

    def _sampling(self, body: dict[str, Any], prompt_tokens: int, *, chat: bool) -> int:
        """Check the context window; return how many tokens the completion may have.

        With no limit given, a chat completion may fill the window, and a text
        completion gets 16 tokens: vLLM and OpenAI default `max_tokens` to 16 on
        /v1/completions (an explicit null lifts it), so a completion-mode client
        that forgets to set it is cut short here as it would be there.
        """
        if chat:
            max_tokens = _int_param(body, "max_completion_tokens", minimum=1)
        else:
            _refuse_max_completion_tokens(body)
            max_tokens = None
        if max_tokens is None:
            max_tokens = _int_param(body, "max_tokens", minimum=1)
        if max_tokens is None and not chat and "max_tokens" not in body:
            max_tokens = TEXT_COMPLETION_DEFAULT_MAX_TOKENS
        requested = prompt_tokens + (max_tokens or 0)
        if prompt_tokens >= self.max_model_len or requested > self.max_model_len:
            raise context_overflow(self.max_model_len, prompt_tokens, max_tokens or 0, chat=chat)
        return max_tokens if max_tokens is not None else self.max_model_len - prompt_tokens

    def _policy(self, body: dict[str, Any]) -> BoundPolicy:
        model = body.get("model")
        if model is None and not self.router.serves_any_name:
            raise bad_request(
                f"you must provide a model parameter; this server serves: {self.router.models}",
                "model",
            )
        try:
            return self.router.get(model)
        except UnknownModelError as exc:
            raise HTTPFailure(404, str(exc), param="model") from None

    async def _replies(
        self, policy: BoundPolicy, model: Any, calls: list[tuple[Any, dict[str, Any]]]
    ) -> list[Any]:
        """The policy's reply to each (prompt, request) of `calls`, run concurrently."""
        try:
            if len(calls) == 1:
                prompt, request = calls[0]
                return [await policy(prompt, request)]
            return list(await asyncio.gather(*(policy(p, r) for p, r in calls)))
        except HTTPFailure:
            raise
        except Exception as exc:
            raise HTTPFailure(
                500,
                f"the policy for model {model!r} raised {type(exc).__name__}: {exc}",
                headers=NO_RETRY,
            ) from exc

    def _normalise(self, reply: Any, model: Any) -> dict[str, Any]:
        try:
            return normalise_reply(reply, self.call_ids)
        except PolicyReplyError as exc:
            raise HTTPFailure(
                500,
                f"the policy for model {model!r} returned a bad reply: {exc}",
                headers=NO_RETRY,
            ) from None

    def _chat_reply(self, reply: Any, model: Any, forced: ForcedCall | None) -> dict[str, Any]:
        """The policy's reply as an assistant message, refused when it breaks a forced
        tool_choice (see `_broken_promise`)."""
        message = self._normalise(reply, model)
        if forced is not None:
            failure = _broken_promise(forced, message, model)
            if failure is not None:
                raise failure
        return message

    def _usage(self, prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }

    # -- endpoints ----------------------------------------------------------------

    async def chat(self, body: dict[str, Any]) -> dict[str, Any] | EventStream:
        """A chat completion, or the chunks that stream it when the request streams.

        Either way the whole answer is computed first: every refusal, and a policy
        that raises, is an HTTP error before any byte of a stream is sent.
        """
        policy = self._policy(body)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise bad_request("'messages' must be a non-empty list of message dicts", "messages")
        stream = _stream_param(body)
        tools = _tools_param(body)
        _check_tool_choice(body, tools)
        _check_response_format(body)
        view = self.view
        try:
            prompt_tokens = view.chat_count(messages, tools)
        except (TypeError, ValueError) as exc:
            raise bad_request(
                f"cannot apply the chat template to 'messages': {exc}", "messages"
            ) from None
        limit = self._sampling(body, prompt_tokens, chat=True)
        n = _int_param(body, "n", minimum=1, maximum=128) or 1
        _int_param(body, "seed", minimum=SEED_MIN, maximum=SEED_MAX)  # (policies pick theirs)
        top_n = _top_logprobs_param(body)
        opts = TokenOptions(
            top_n=top_n if body.get("logprobs") else None,
            as_ids=bool(body.get("return_tokens_as_token_ids")),
            want_ids=bool(body.get("return_token_ids")),
        )
        stop = _stop_param(body)
        model = body.get("model")
        # Read before the policy runs: it gets `body` and may edit it.
        prompt_ids = view.chat_ids(messages, tools) if opts.want_ids else None
        parse_tool_calls = bool(tools) and body.get("tool_choice") != "none"
        named_tool_choice = isinstance(body.get("tool_choice"), dict)
        forced = _forced_call(body, tools)
        requests = _own_requests(body, n)
        replies = await self._replies(policy, model, [(r["messages"], r) for r in requests])
        turns = [
            finish_turn(
                view,
                self._chat_reply(reply, model, forced),
                limit,
                stop,
                parse_tool_calls=parse_tool_calls,
                named_tool_choice=named_tool_choice,
            )
            for reply in replies
        ]
        usage = self._usage(prompt_tokens, sum(len(ids) for _, ids, _ in turns))
        head = self._head("chatcmpl", "chat.completion", model, stream)
        if stream is not None:
            return self._chat_stream(head, turns, opts, prompt_ids, usage)
        choices = [self._chat_choice(index, turn, opts) for index, turn in enumerate(turns)]
        response: dict[str, Any] = {**head.body(choices), "usage": usage}
        if prompt_ids is not None:
            response["prompt_token_ids"] = prompt_ids
        return response

    def _head(
        self, id_prefix: str, kind: str, model: Any, stream: StreamSettings | None
    ) -> ResponseHead:
        """The id, object, created and model an answer (or each of its chunks) carries."""
        return ResponseHead(
            id=self._new_id(id_prefix),
            object=kind if stream is None else _CHUNK_OBJECT.get(kind, kind),
            created=int(time.time()),
            model=model if model is not None else self.model_name,
            include_usage=stream is not None and stream.include_usage,
        )

    def _chat_choice(
        self, index: int, turn: tuple[dict[str, Any], list[int], str], opts: TokenOptions
    ) -> dict[str, Any]:
        message, ids, finish = turn
        logprobs = None
        if opts.top_n is not None:
            logprobs = chat_logprobs(self.view, ids, opts.top_n, opts.as_ids)
        choice: dict[str, Any] = {
            "index": index,
            "message": message,
            "logprobs": logprobs,
            "finish_reason": finish,
        }
        if opts.want_ids:
            choice["token_ids"] = ids
        return choice

    def _chat_stream(
        self,
        head: ResponseHead,
        turns: list[tuple[dict[str, Any], list[int], str]],
        opts: TokenOptions,
        prompt_ids: list[int] | None,
        usage: dict[str, int],
    ) -> EventStream:
        """The chunks of a streamed chat completion.

        As vLLM streams it, the first chunk carries `prompt_token_ids` when
        `return_token_ids` is set, and every chunk its own `token_ids`.
        """
        per_choice = [
            chat_chunk_choices(self.view, index, turn, opts) for index, turn in enumerate(turns)
        ]
        chunks = interleave(head, per_choice)
        if prompt_ids is not None:
            chunks[0]["prompt_token_ids"] = prompt_ids
        if head.include_usage:
            chunks.append(head.usage_chunk(usage))
        return EventStream(chunks)

    def _prompts(self, prompt: Any) -> list[tuple[str, list[int] | None]]:
        """The prompts of a text completion as (text, ids if the client sent ids)."""
        if isinstance(prompt, str):
            return [(prompt, None)]
        if isinstance(prompt, list) and prompt:
            if all(isinstance(p, str) for p in prompt):
                return [(p, None) for p in prompt]
            if all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
                return [(self._detokenize(prompt), list(prompt))]
            if all(isinstance(p, list) for p in prompt):
                return [(self._detokenize(p), list(p)) for p in prompt]
        raise bad_request(
            "'prompt' must be a string, a list of strings, a list of token ids "
            "or a list of token-id lists",
            "prompt",
        )

    def _detokenize(self, tokens: Any) -> str:
        if not isinstance(tokens, list) or not all(
            isinstance(t, int) and not isinstance(t, bool) for t in tokens
        ):
            raise bad_request("'tokens' must be a list of integer token ids", "tokens")
        try:
            return self.view.decode(tokens)
        except (ValueError, IndexError, KeyError, TypeError) as exc:
            raise bad_request(f"cannot decode the token ids: {exc}", "tokens") from None

    async def completions(self, body: dict[str, Any]) -> dict[str, Any] | EventStream:
        """A text completion, or the chunks that stream it (computed whole first, as `chat`)."""
        policy = self._policy(body)
        stream = _stream_param(body)
        _check_response_format(body)
        if body.get("echo"):
            raise bad_request("'echo' is not supported by this server", "echo")
        if body.get("suffix") is not None:  # vLLM's 400 too; ignoring it would hide that
            raise bad_request(
                "'suffix' is not supported (vLLM refuses it too); put the text to fill "
                "around into the 'prompt' in the model's own fill-in-the-middle format",
                "suffix",
            )
        view = self.view
        prompts = self._prompts(body.get("prompt"))
        n = _int_param(body, "n", minimum=1, maximum=128) or 1
        _int_param(body, "seed", minimum=SEED_MIN, maximum=SEED_MAX)  # (policies pick theirs)
        opts = TokenOptions(
            top_n=_int_param(body, "logprobs", minimum=0, maximum=20),
            as_ids=bool(body.get("return_tokens_as_token_ids")),
            want_ids=bool(body.get("return_token_ids")),
        )
        stop = _stop_param(body)
        model = body.get("model")

        # Every prompt is checked before the policy runs (it gets `body` and may edit it).
        counts = [len(ids) if ids is not None else view.count(text) for text, ids in prompts]
        limits = [self._sampling(body, count, chat=False) for count in counts]
        requests = iter(_own_requests(body, len(prompts) * n))

        results: list[tuple[str, list[int], str]] = []
        prompt_ids: list[list[int] | None] = []
        for (text, given_ids), limit in zip(prompts, limits, strict=True):
            calls = [(text, next(requests)) for _ in range(n)]
            replies = await self._replies(policy, model, calls)
            for reply in replies:
                results.append(
                    finish_text(view, reply_text(self._normalise(reply, model)), limit, stop)
                )
                if not opts.want_ids:
                    prompt_ids.append(None)
                else:
                    prompt_ids.append(given_ids if given_ids is not None else view.encode(text))
        usage = self._usage(sum(counts), sum(len(ids) for _, ids, _ in results))
        head = self._head("cmpl", "text_completion", model, stream)
        if stream is not None:
            return self._completion_stream(head, results, opts, prompt_ids, usage)
        choices = [
            self._completion_choice(index, result, opts, prompt_ids[index])
            for index, result in enumerate(results)
        ]
        return {**head.body(choices), "usage": usage}

    def _completion_stream(
        self,
        head: ResponseHead,
        results: list[tuple[str, list[int], str]],
        opts: TokenOptions,
        prompt_ids: list[list[int] | None],
        usage: dict[str, int],
    ) -> EventStream:
        """The chunks of a streamed text completion; each choice's first chunk carries
        its `prompt_token_ids` when `return_token_ids` is set, as vLLM streams them."""
        per_choice = [
            completion_chunk_choices(self.view, index, result, opts, prompt_ids[index])
            for index, result in enumerate(results)
        ]
        chunks = interleave(head, per_choice)
        if head.include_usage:
            chunks.append(head.usage_chunk(usage))
        return EventStream(chunks)

    def _completion_choice(
        self,
        index: int,
        result: tuple[str, list[int], str],
        opts: TokenOptions,
        prompt_ids: list[int] | None,
    ) -> dict[str, Any]:
        text, ids, finish = result
        logprobs = None
        if opts.top_n is not None:
            logprobs = completion_logprobs(self.view, ids, opts.top_n, opts.as_ids)
        choice = completion_choice(index, text, logprobs, finish, ids, opts)
        if opts.want_ids:
            choice["prompt_token_ids"] = prompt_ids
        return choice

    def models(self) -> dict[str, Any]:
        """GET /v1/models: every listed model name."""
        return {"object": "list", "data": [self._model_card(name) for name in self.router.models]}

    def model(self, name: str) -> dict[str, Any]:
        """GET /v1/models/{name}: the model object, as in the list, or OpenAI's 404.

        A single policy answers chats for any model name, so any name is served
        here too: a client that checks its configured model before a run must not
        fail where its chats would work.
        """
        try:
            self.router.check(name)
        except UnknownModelError as exc:
            raise model_not_found(
                f"{exc} Retrieve one of those names (GET /v1/models lists them)."
            ) from None
        return self._model_card(name)

    def _model_card(self, name: str) -> dict[str, Any]:
        """A model object as OpenAI lists it, plus vLLM's `root` and `max_model_len`."""
        return {
            "id": name,
            "object": "model",
            "created": self.created,
            "owned_by": "vfgym",
            "root": name,
            "max_model_len": self.max_model_len,
        }

    def tokenize(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            self.router.check(body.get("model"))
        except UnknownModelError as exc:
            raise HTTPFailure(404, str(exc), param="model") from None
        if "messages" in body:
            messages = body["messages"]
            if not isinstance(messages, list):
                raise bad_request("'messages' must be a list of message dicts", "messages")
            try:
                ids = self.view.chat_ids(
                    messages, body.get("tools"), bool(body.get("add_generation_prompt", True))
                )
            except (TypeError, ValueError) as exc:
                raise bad_request(f"cannot apply the chat template: {exc}", "messages") from None
        elif isinstance(body.get("prompt"), str):
            ids = self.view.encode(body["prompt"])
        else:
            raise bad_request("send either 'prompt' (a string) or 'messages' (a list)", "prompt")
        return {
            "count": len(ids),
            "max_model_len": self.max_model_len,
            "tokens": ids,
            "token_strs": None,
        }

    def detokenize(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            self.router.check(body.get("model"))
        except UnknownModelError as exc:
            raise HTTPFailure(404, str(exc), param="model") from None
        return {"prompt": self._detokenize(body.get("tokens"))}

    # -- faults -------------------------------------------------------------------

    async def apply_fault(
        self, fault: Fault, request: web.Request, body: dict[str, Any], *, chat: bool
    ) -> web.StreamResponse | None:
        """Answer with `fault`; None means go on and answer normally (after a delay)."""
        kind = fault.kind
        if kind == "slow":
            await asyncio.sleep(fault.seconds)
            return None
        if kind == "500":
            raise HTTPFailure(500, "injected fault: internal server error")
        if kind == "503":
            raise HTTPFailure(503, "injected fault: service unavailable")
        if kind == "429":
            headers = {
                "Retry-After": str(math.ceil(fault.seconds)),
                "retry-after-ms": str(round(fault.seconds * 1000)),
            }
            raise HTTPFailure(429, "injected fault: rate limit reached", headers=headers)
        if kind == "context":
            requested = _int_param(body, "max_tokens", minimum=1) or 1
            raise context_overflow(self.max_model_len, self.max_model_len, requested, chat=chat)
        if kind == "malformed":
            return _malformed(streams=body.get("stream") is True)
        # "drop": close the connection without writing a response.
        transport = request.transport
        if transport is not None:
            transport.abort()
        raise _Dropped


def _malformed(*, streams: bool) -> web.Response:
    """A 200 whose body is not what the client waits for.

    A streaming client gets an event stream whose event is not JSON: HTML where
    it waits for events would be skipped as no event at all, and the stream would
    look like an empty answer instead of a broken one.
    """
    if streams:
        return web.Response(
            status=200, body=b"data: <html>this is not JSON\n\n", headers=SSE_HEADERS
        )
    return web.Response(status=200, body=b"<html>this is not JSON", content_type="application/json")


class _Dropped(Exception):
    """Raised inside a handler whose connection was closed on purpose."""


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
        except _Dropped:
            raise asyncio.CancelledError from None
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
