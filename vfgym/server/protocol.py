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
from typing import Any

from vfgym.server.tokenizer import ByteTokenizer, assistant_text, content_text

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
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.err_type = err_type or _ERROR_TYPES.get(status, "APIError")
        self.param = param
        self.headers = headers

    def body(self) -> dict[str, Any]:
        """The JSON body: `{"error": {message, type, param, code}}` as OpenAI sends it."""
        return {
            "error": {
                "message": self.message,
                "type": self.err_type,
                "param": self.param,
                "code": self.status,
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
    """`choices[i].logprobs` of a text completion, in the legacy parallel-list shape."""
    vocab = view.vocab_size
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


def apply_stop(text: str, stop: Any) -> tuple[str, bool]:
    """Cut `text` before the earliest stop string; True when a stop string was found."""
    if not stop:
        return text, False
    stops = [stop] if isinstance(stop, str) else stop
    cut = -1
    for s in stops:
        if s:
            i = text.find(s)
            if i != -1 and (cut == -1 or i < cut):
                cut = i
    if cut == -1:
        return text, False
    return text[:cut], True


def finish_turn(
    view: TokenizerView,
    message: dict[str, Any],
    limit: int,
    stop: Any,
    *,
    parse_tool_calls: bool = True,
) -> tuple[dict[str, Any], list[int], str]:
    """Apply stop strings and the token limit to an assistant message.

    Returns the message as the client sees it, its completion token ids (the ids
    the chat template gives this assistant turn) and the finish reason. A turn cut
    by the limit loses its tool calls: the cut text is what the model produced, as
    a server whose tool parser saw an unfinished call would answer. With
    `parse_tool_calls` False (a request without tools, or with tool_choice "none")
    the calls stay the text the template renders them as, in `content`: vLLM runs
    no tool parser then, and OpenAI's model cannot call a tool.
    """
    if not parse_tool_calls and message.get("tool_calls"):
        message = {"role": "assistant", "content": assistant_text(message)}
    content = message.get("content") or ""
    tool_calls = message.get("tool_calls")
    content, stopped = apply_stop(content, stop)
    if stopped:
        tool_calls = None
    text = content
    if tool_calls:
        text = assistant_text({"content": content, "tool_calls": tool_calls})
    ids = view.encode(text)
    if len(ids) > limit:
        ids = ids[: max(limit, 0)]
        return {"role": "assistant", "content": view.decode(ids)}, ids, "length"
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        out["tool_calls"] = tool_calls
        if not content:
            out["content"] = None
        return out, ids, "tool_calls"
    return out, ids, "stop"


def finish_text(
    view: TokenizerView, text: str, limit: int, stop: Any
) -> tuple[str, list[int], str]:
    """`finish_turn` for a text completion."""
    text, _ = apply_stop(text, stop)
    ids = view.encode(text)
    if len(ids) > limit:
        ids = ids[: max(limit, 0)]
        return view.decode(ids), ids, "length"
    return text, ids, "stop"


def reply_text(reply: dict[str, Any]) -> str:
    """The text of a policy reply used for a text completion (tool calls have no place there)."""
    return content_text(reply.get("content"))
