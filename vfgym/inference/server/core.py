"""`ServerCore`: what the routes share, and how a generation request is answered.

Policies, tokenizer, limits, faults and the request log live here; the aiohttp
routes (`app`) only read the HTTP request and write the answer, and the
parameters are read and checked by `params`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
import threading
import time
from typing import Any

from aiohttp import web

from vfgym.errors import PolicyReplyError, UnknownModelError
from vfgym.inference.server.faults import Fault, FaultQueue
from vfgym.inference.server.http import CHUNK_OBJECT, SSE_HEADERS
from vfgym.inference.server.params import (
    NO_RETRY,
    SEED_MAX,
    SEED_MIN,
    TEXT_COMPLETION_DEFAULT_MAX_TOKENS,
    ForcedCall,
    StreamSettings,
    broken_promise,
    check_response_format,
    check_tool_choice,
    forced_call,
    int_param,
    own_requests,
    refuse_max_completion_tokens,
    stop_param,
    stream_param,
    tools_param,
    top_logprobs_param,
)
from vfgym.inference.server.policy import BoundPolicy, PolicyRouter, normalise_reply
from vfgym.inference.server.protocol import (
    HTTPFailure,
    JSONWriter,
    ResponseHead,
    TokenizerView,
    TokenOptions,
    bad_request,
    chat_logprobs,
    completion_choice,
    completion_logprobs,
    context_overflow,
    finish_text,
    finish_turn,
    model_not_found,
    reply_text,
)
from vfgym.inference.server.streaming import (
    EventStream,
    chat_chunk_choices,
    completion_chunk_choices,
    interleave,
)


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
            max_tokens = int_param(body, "max_completion_tokens", minimum=1)
        else:
            refuse_max_completion_tokens(body)
            max_tokens = None
        if max_tokens is None:
            max_tokens = int_param(body, "max_tokens", minimum=1)
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
        tool_choice (see `broken_promise`)."""
        message = self._normalise(reply, model)
        if forced is not None:
            failure = broken_promise(forced, message, model)
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
        stream = stream_param(body)
        tools = tools_param(body)
        check_tool_choice(body, tools)
        check_response_format(body)
        view = self.view
        try:
            prompt_tokens = view.chat_count(messages, tools)
        except (TypeError, ValueError) as exc:
            raise bad_request(
                f"cannot apply the chat template to 'messages': {exc}", "messages"
            ) from None
        limit = self._sampling(body, prompt_tokens, chat=True)
        n = int_param(body, "n", minimum=1, maximum=128) or 1
        int_param(body, "seed", minimum=SEED_MIN, maximum=SEED_MAX)  # (policies pick theirs)
        top_n = top_logprobs_param(body)
        opts = TokenOptions(
            top_n=top_n if body.get("logprobs") else None,
            as_ids=bool(body.get("return_tokens_as_token_ids")),
            want_ids=bool(body.get("return_token_ids")),
        )
        stop = stop_param(body)
        model = body.get("model")
        # Read before the policy runs: it gets `body` and may edit it.
        prompt_ids = view.chat_ids(messages, tools) if opts.want_ids else None
        parse_tool_calls = bool(tools) and body.get("tool_choice") != "none"
        named_tool_choice = isinstance(body.get("tool_choice"), dict)
        forced = forced_call(body, tools)
        requests = own_requests(body, n)
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
            object=kind if stream is None else CHUNK_OBJECT.get(kind, kind),
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
        stream = stream_param(body)
        check_response_format(body)
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
        n = int_param(body, "n", minimum=1, maximum=128) or 1
        int_param(body, "seed", minimum=SEED_MIN, maximum=SEED_MAX)  # (policies pick theirs)
        opts = TokenOptions(
            top_n=int_param(body, "logprobs", minimum=0, maximum=20),
            as_ids=bool(body.get("return_tokens_as_token_ids")),
            want_ids=bool(body.get("return_token_ids")),
        )
        stop = stop_param(body)
        model = body.get("model")

        # Every prompt is checked before the policy runs (it gets `body` and may edit it).
        counts = [len(ids) if ids is not None else view.count(text) for text, ids in prompts]
        limits = [self._sampling(body, count, chat=False) for count in counts]
        requests = iter(own_requests(body, len(prompts) * n))

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
            requested = int_param(body, "max_tokens", minimum=1) or 1
            raise context_overflow(self.max_model_len, self.max_model_len, requested, chat=chat)
        if kind == "malformed":
            return malformed_response(streams=body.get("stream") is True)
        # "drop": close the connection without writing a response, and end the handler
        # as aiohttp ends one whose client went away (no error answer is attempted).
        transport = request.transport
        if transport is not None:
            transport.abort()
        raise asyncio.CancelledError


def malformed_response(*, streams: bool) -> web.Response:
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
