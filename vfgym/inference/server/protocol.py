"""The OpenAI wire format the test server speaks, built as plain dicts.

Responses are assembled by hand instead of through the openai package's pydantic
models: the server answers thousands of requests a second in benchmarks, and the
client validates what it receives anyway. Token ids and logprobs follow vLLM's
extensions (`return_token_ids`, `return_tokens_as_token_ids`) so token-level
training code can be tested against this server unchanged.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vfgym.inference.server.tokenizer import (
    ByteTokenizer,
    assistant_text,
    content_text,
)

_encode_json = json.JSONEncoder(separators=(",", ":")).encode


class RawJSON:
    """JSON text that a `JSONWriter` splices into a response as it is."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class JSONWriter:
    """Encodes responses to JSON bytes, splicing in `RawJSON` fragments.

    The stdlib encoder cannot emit raw text, so each fragment is first encoded as
    a placeholder string carrying this writer's random nonce, then replaced.
    """

    def __init__(self) -> None:
        self._nonce = os.urandom(6).hex()

    def encode(self, payload: Any) -> bytes:
        """The JSON of `payload` as bytes (ASCII-only, so lone surrogates cannot break it)."""
        fragments: list[str] = []
        nonce = self._nonce

        def placeholder(obj: Any) -> str:
            if not isinstance(obj, RawJSON):
                raise TypeError(f"cannot encode {type(obj).__name__} as JSON")
            fragments.append(obj.text)
            return f"\x00{nonce}:{len(fragments) - 1}\x00"

        text = json.JSONEncoder(separators=(",", ":"), default=placeholder).encode(payload)
        for i, fragment in enumerate(fragments):
            text = text.replace(f'"\\u0000{nonce}:{i}\\u0000"', fragment, 1)
        return text.encode("ascii")


class HTTPFailure(Exception):
    """An error answer: HTTP status plus an OpenAI-style error body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        err_type: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
        code: str | int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.err_type = err_type or _ERROR_TYPES.get(status, "APIError")
        self.param = param
        self.headers = headers
        self.code = status if code is None else code

    def body(self) -> dict[str, Any]:
        """The JSON body: `{"error": {message, type, param, code}}` as OpenAI sends it."""
        return {
            "error": {
                "message": self.message,
                "type": self.err_type,
                "param": self.param,
                "code": self.code,
            }
        }


_ERROR_TYPES = {
    400: "BadRequestError",
    404: "NotFoundError",
    405: "MethodNotAllowedError",
    413: "RequestTooLargeError",
    429: "RateLimitError",
    500: "InternalServerError",
    503: "ServiceUnavailableError",
}


def bad_request(message: str, param: str | None = None) -> HTTPFailure:
    """A 400 for input the client can fix; the message says what to change."""
    return HTTPFailure(400, message, param=param)


def model_not_found(message: str) -> HTTPFailure:
    """The 404 OpenAI answers for a model id it does not serve (GET /v1/models/{id}).

    Type and code are OpenAI's own, so code that tells a missing model apart from
    other errors by them works here as against OpenAI.
    """
    return HTTPFailure(
        404, message, err_type="invalid_request_error", param="model", code="model_not_found"
    )


def context_overflow(max_model_len: int, prompt_tokens: int, completion_tokens: int, *, chat: bool):
    """The 400 vLLM answers when a request does not fit the context window."""
    where = "messages" if chat else "prompt"
    return HTTPFailure(
        400,
        f"This model's maximum context length is {max_model_len} tokens. However, you requested "
        f"{prompt_tokens + completion_tokens} tokens ({prompt_tokens} in the {where}, "
        f"{completion_tokens} in the completion). Please reduce the length of the {where} "
        "or completion.",
        param="messages" if chat else "prompt",
    )


class TokenizerView:
    """The handful of tokenizer operations the server needs, with fast paths.

    Any Hugging-Face-like tokenizer works; `ByteTokenizer` additionally counts
    tokens without building id lists and knows each token's raw bytes.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._fast = isinstance(tokenizer, ByteTokenizer)
        self._text_cache: dict[int, str] = {}
        self.entry_cache: dict[tuple[int, int, bool], str] = {}

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def count(self, text: str) -> int:
        if self._fast:
            return self.tokenizer.count(text)
        return len(self.encode(text))

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids))

    def chat_ids(self, messages: Any, tools: Any, add_generation_prompt: bool = True) -> list[int]:
        return list(
            self.tokenizer.apply_chat_template(
                messages, tools=tools, tokenize=True, add_generation_prompt=add_generation_prompt
            )
        )

    def chat_count(self, messages: Any, tools: Any) -> int:
        if self._fast:
            return self.tokenizer.count_chat_tokens(messages, tools, add_generation_prompt=True)
        return len(self.chat_ids(messages, tools))

    def token_text(self, tid: int) -> str:
        text = self._text_cache.get(tid)
        if text is None:
            if self._fast:
                text = self.tokenizer.id_to_token(tid)
            else:
                text = self.tokenizer.decode([tid])
            self._text_cache[tid] = text
        return text

    def token_bytes(self, tid: int) -> list[int]:
        if self._fast:
            return list(self.tokenizer.token_bytes(tid))
        return list(self.token_text(tid).encode("utf-8", "surrogatepass"))

    @property
    def vocab_size(self) -> int:
        return int(getattr(self.tokenizer, "vocab_size", 0) or 0)


def token_logprob(tid: int) -> float:
    """A deterministic, always negative log-probability for a sampled token."""
    return -(((tid * 2654435761) % 1000) + 1) / 500.0


def _alternatives(tid: int, n: int, vocab_size: int) -> list[tuple[int, float]]:
    """`n` deterministic top-logprob entries: the sampled token first, then neighbours."""
    if n <= 0:
        return []
    lp = token_logprob(tid)
    size = max(vocab_size, tid + n + 1)
    return [(tid, lp)] + [((tid + j) % size, lp - 0.5 * j) for j in range(1, n)]


def _token_name(view: TokenizerView, tid: int, as_ids: bool) -> str:
    return f"token_id:{tid}" if as_ids else view.token_text(tid)


def _chat_entry(view: TokenizerView, tid: int, top_n: int, as_ids: bool) -> dict[str, Any]:
    top = [
        {"token": _token_name(view, alt, as_ids), "logprob": lp, "bytes": view.token_bytes(alt)}
        for alt, lp in _alternatives(tid, top_n, view.vocab_size)
    ]
    return {
        "token": _token_name(view, tid, as_ids),
        "logprob": token_logprob(tid),
        "bytes": view.token_bytes(tid),
        "top_logprobs": top,
    }


_ENTRY_CACHE_LIMIT = 200_000


def chat_logprobs(
    view: TokenizerView, ids: Sequence[int], top_n: int, as_ids: bool
) -> dict[str, Any]:
    """`choices[i].logprobs` of a chat completion: one entry per completion token.

    An entry depends only on the token id and the options, so its JSON text is
    built once and spliced into later responses: with logprobs on, encoding these
    entries was most of the cost of a response.
    """
    cache = view.entry_cache
    pieces = []
    for tid in ids:
        key = (tid, top_n, as_ids)
        text = cache.get(key)
        if text is None:
            text = _encode_json(_chat_entry(view, tid, top_n, as_ids))
            if len(cache) < _ENTRY_CACHE_LIMIT:
                cache[key] = text
        pieces.append(text)
    return {"content": RawJSON("[" + ",".join(pieces) + "]"), "refusal": None}


def completion_logprobs(
    view: TokenizerView, ids: Sequence[int], top_n: int, as_ids: bool
) -> dict[str, Any]:
    """`choices[i].logprobs` of a text completion, in the legacy parallel-list shape.

    Each `top_logprobs` dict holds the sampled token even for `logprobs=0`, as vLLM
    and OpenAI's legacy API answer (the chat API's `top_logprobs=0` is an empty list
    instead): a client reading the sampled token's logprob from there must find it.
    """
    vocab = view.vocab_size
    top_n = max(top_n, 1)
    tokens, token_logprobs, top_logprobs, offsets = [], [], [], []
    offset = 0
    for tid in ids:
        name = _token_name(view, tid, as_ids)
        tokens.append(name)
        token_logprobs.append(token_logprob(tid))
        top_logprobs.append(
            {_token_name(view, alt, as_ids): lp for alt, lp in _alternatives(tid, top_n, vocab)}
        )
        offsets.append(offset)
        offset += len(view.token_text(tid))
    return {
        "tokens": tokens,
        "token_logprobs": token_logprobs,
        "top_logprobs": top_logprobs,
        "text_offset": offsets,
    }


def find_stop(text: str, stop: Any) -> tuple[int, int] | None:
    """(start, end) of the earliest stop string in `text`, or None when none occurs."""
    if not stop:
        return None
    stops = [stop] if isinstance(stop, str) else stop
    found: tuple[int, int] | None = None
    for s in stops:
        if s:
            i = text.find(s)
            if i != -1 and (found is None or i < found[0]):
                found = (i, i + len(s))
    return found


def apply_stop(text: str, stop: Any) -> tuple[str, bool]:
    """Cut `text` before the earliest stop string; True when a stop string was found."""
    found = find_stop(text, stop)
    if found is None:
        return text, False
    return text[: found[0]], True


def _stopped_within(view: TokenizerView, text: str, stop: Any, limit: int) -> str | None:
    """`text` cut before its earliest stop string, when that string's last token fits
    in `limit`; None otherwise. A server notices a stop string only once it has sampled
    all of it, so a stop string that runs past `max_tokens` ends nothing: the reply is
    cut by length instead, with what of the stop string fitted."""
    found = find_stop(text, stop)
    if found is None or view.count(text[: found[1]]) > limit:
        return None
    return text[: found[0]]


def _length_or_stop(ids: Sequence[int], limit: int) -> str:
    """ "length" for a reply that used every token it was allowed: it had no room left
    for the end-of-turn token, so a server that samples (vLLM) stops it by length."""
    return "length" if len(ids) >= limit else "stop"


def finish_turn(
    view: TokenizerView,
    message: dict[str, Any],
    limit: int,
    stop: Any,
    *,
    parse_tool_calls: bool = True,
    named_tool_choice: bool = False,
) -> tuple[dict[str, Any], list[int], str]:
    """Apply stop strings and the token limit to an assistant message.

    Returns the message as the client sees it, its completion token ids (the ids
    the chat template gives this assistant turn) and the finish reason, as vLLM
    finishes a turn:

    - Stop strings are matched against everything the turn writes, tool-call markup
      included, and count only when they end within `limit` tokens. A stopped turn
      is the text before the stop string, without tool calls (a call cut short does
      not parse), and its ids are that text's: the turn's ids stay the ids the
      template gives its message, where vLLM would also return the stop string's.
    - A turn longer than `limit` is cut there and loses its tool calls: the cut text
      is what the model produced, as a server whose tool parser saw an unfinished
      call would answer. A text turn of exactly `limit` tokens is whole but finishes
      with "length" (no room for its end token); a whole tool call still parses.
    - With `parse_tool_calls` False (a request without tools, or with tool_choice
      "none") the calls stay the text the template renders them as, in `content`:
      vLLM runs no tool parser then, and OpenAI's model cannot call a tool.
    - Tool calls finish with "tool_calls", or "stop" for a forced named function
      (`named_tool_choice`), as OpenAI and vLLM answer one.
    """
    if not parse_tool_calls and message.get("tool_calls"):
        message = {"role": "assistant", "content": assistant_text(message)}
    content = message.get("content") or ""
    tool_calls = message.get("tool_calls")
    text = assistant_text({"content": content, "tool_calls": tool_calls}) if tool_calls else content
    before_stop = _stopped_within(view, text, stop, limit)
    if before_stop is not None:
        return {"role": "assistant", "content": before_stop}, view.encode(before_stop), "stop"
    ids = view.encode(text)
    if len(ids) > limit:
        ids = ids[: max(limit, 0)]
        return {"role": "assistant", "content": view.decode(ids)}, ids, "length"
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        out["tool_calls"] = tool_calls
        if not content:
            out["content"] = None
        return out, ids, "stop" if named_tool_choice else "tool_calls"
    return out, ids, _length_or_stop(ids, limit)


def finish_text(
    view: TokenizerView, text: str, limit: int, stop: Any
) -> tuple[str, list[int], str]:
    """`finish_turn` for a text completion."""
    before_stop = _stopped_within(view, text, stop, limit)
    if before_stop is not None:
        return before_stop, view.encode(before_stop), "stop"
    ids = view.encode(text)
    if len(ids) > limit:
        ids = ids[: max(limit, 0)]
        return view.decode(ids), ids, "length"
    return text, ids, _length_or_stop(ids, limit)


def reply_text(reply: dict[str, Any]) -> str:
    """The text of a policy reply used for a text completion (tool calls have no place there)."""
    return content_text(reply.get("content"))


# -- streaming ------------------------------------------------------------------------------
#
# A streamed answer is the whole answer, computed first (so every error is an HTTP
# status before the stream starts), then cut into the chunks OpenAI and vLLM send.
# The cutting follows the completion's token ids: a client that joins the deltas
# gets the non-streamed answer back, and one that joins the per-chunk `token_ids`
# or logprobs gets the non-streamed ones.


@dataclass(frozen=True)
class TokenOptions:
    """What a request asks to get back per completion token.

    top_n: alternatives per token when logprobs are wanted, None for no logprobs.
    as_ids: tokens named "token_id:N" (vLLM's `return_tokens_as_token_ids`).
    want_ids: `token_ids` (and `prompt_token_ids`) in the answer (vLLM's `return_token_ids`).
    """

    top_n: int | None
    as_ids: bool
    want_ids: bool


@dataclass(frozen=True)
class ResponseHead:
    """What an answer, and each chunk of a streamed one, carries besides its choices.

    With `include_usage` (a stream whose request asked for usage) each chunk
    carries `"usage": null` and a last chunk the usage, as OpenAI documents; without
    it a chunk leaves the field out, which the openai client reads as None, as vLLM
    sends it. A whole answer adds its usage itself.
    """

    id: str
    object: str
    created: int
    model: Any
    include_usage: bool

    def body(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        """An answer (or a chunk of one) holding `choices`."""
        out: dict[str, Any] = {
            "id": self.id,
            "object": self.object,
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if self.include_usage:
            out["usage"] = None
        return out

    def usage_chunk(self, usage: dict[str, int]) -> dict[str, Any]:
        """The last chunk when usage was asked for: no choices, the whole answer's usage."""
        return {**self.body([]), "usage": usage}


def completion_choice(
    index: int,
    text: str,
    logprobs: dict[str, Any] | None,
    finish: str | None,
    ids: list[int],
    opts: TokenOptions,
) -> dict[str, Any]:
    """A text completion's choice, whole or as one chunk of a stream (its piece of
    text, and the token ids of that piece when `return_token_ids` is set)."""
    choice: dict[str, Any] = {
        "index": index,
        "text": text,
        "logprobs": logprobs,
        "finish_reason": finish,
    }
    if opts.want_ids:
        choice["token_ids"] = ids
    return choice
