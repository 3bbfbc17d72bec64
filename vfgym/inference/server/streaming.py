"""Streaming answers: a whole answer cut into server-sent-event chunks, as vLLM sends them.

The answer is computed whole first (so every refusal is still an HTTP status), then
cut per token into deltas; with several choices the chunks take turns. Apart from
`protocol` because streaming is its own format with its own rules (see `app`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from vfgym.inference.server.protocol import (
    ResponseHead,
    TokenizerView,
    TokenOptions,
    chat_logprobs,
    completion_choice,
    completion_logprobs,
)
from vfgym.inference.server.tokenizer import (
    render_tool_calls,
)


@dataclass(frozen=True)
class EventStream:
    """An answer to send as server-sent events: each chunk, then `[DONE]`."""

    chunks: list[dict[str, Any]]


@dataclass(frozen=True)
class Piece:
    """One streamed delta: the text it adds and the completion tokens that make it."""

    text: str
    ids: list[int]


def text_pieces(view: TokenizerView, ids: Sequence[int], text: str) -> list[Piece]:
    """`text`, produced by `ids`, cut into one piece per token where possible.

    A token that ends inside a character (a byte of a multi-byte character with the
    byte-level tokenizer) is held back and joins the next piece, as vLLM's
    incremental detokenizer holds it, so no piece shows U+FFFD. When the pieces do
    not join back to `text` (a tokenizer whose tokens do not decode on their own),
    the text comes whole in one piece: the joined deltas must equal the answer.
    """
    if not ids:
        return [Piece(text, [])] if text else []
    pieces: list[Piece] = []
    start = 0
    for end in range(1, len(ids) + 1):
        piece = view.decode(ids[start:end])
        if piece.endswith("\ufffd") and end < len(ids):
            continue
        pieces.append(Piece(piece, list(ids[start:end])))
        start = end
    if "".join(p.text for p in pieces) != text:
        return [Piece(text, list(ids))]
    return pieces


def _tool_call_ids(
    view: TokenizerView, content: str, calls: list[dict[str, Any]], ids: list[int]
) -> tuple[list[int], list[list[int]]]:
    """The turn's token ids split into the content's and each tool call's.

    The template renders a turn as its content then each call, so with a tokenizer
    that keeps that split (the byte-level one does) each part gets its own ids;
    otherwise the first call carries them all, so the chunks still add up to `ids`.
    """
    content_ids = view.encode(content) if content else []
    sizes = [len(view.encode(render_tool_calls([call]))) for call in calls]
    k = len(content_ids)
    if ids[:k] != content_ids or k + sum(sizes) != len(ids):
        return [], [list(ids)] + [[] for _ in calls[1:]]
    bounds = list(itertools.accumulate(sizes, initial=k))
    return content_ids, [ids[a:b] for a, b in itertools.pairwise(bounds)]


def _tool_call_deltas(
    view: TokenizerView, index: int, call: dict[str, Any], ids: list[int]
) -> list[tuple[dict[str, Any], list[int]]]:
    """The deltas of one tool call as OpenAI streams them.

    The first names the call (id, type, name, empty arguments) and carries the
    call's token ids; the arguments follow in pieces, cut per token of their text.
    """
    function = call["function"]
    head = {
        "index": index,
        "id": call["id"],
        "type": "function",
        "function": {"name": function["name"], "arguments": ""},
    }
    deltas = [({"tool_calls": [head]}, ids)]
    arguments = function["arguments"]
    for piece in text_pieces(view, view.encode(arguments), arguments):
        part = {"index": index, "function": {"arguments": piece.text}}
        deltas.append(({"tool_calls": [part]}, []))
    return deltas


def chat_deltas(
    view: TokenizerView, message: dict[str, Any], ids: list[int]
) -> list[tuple[dict[str, Any], list[int]]]:
    """One chat choice's deltas and the completion ids each carries, finish excluded.

    First the role (with empty content, as OpenAI sends it), then the content per
    token, then each tool call; the ids of all deltas join to `ids`.
    """
    content = message.get("content") or ""
    calls = message.get("tool_calls") or []
    if calls:
        content_ids, call_ids = _tool_call_ids(view, content, calls, ids)
    else:
        content_ids, call_ids = ids, []
    deltas: list[tuple[dict[str, Any], list[int]]] = [({"role": "assistant", "content": ""}, [])]
    deltas += [({"content": p.text}, p.ids) for p in text_pieces(view, content_ids, content)]
    for index, (call, these) in enumerate(zip(calls, call_ids, strict=True)):
        deltas += _tool_call_deltas(view, index, call, these)
    return deltas


def chat_chunk_choices(
    view: TokenizerView,
    index: int,
    turn: tuple[dict[str, Any], list[int], str],
    opts: TokenOptions,
) -> list[dict[str, Any]]:
    """The `choices[0]` of each chunk streaming one chat choice, the finish last.

    A chunk's `logprobs.content` holds the entries of the tokens it carries (null
    when it carries none); with `want_ids` each carries its `token_ids`.
    """
    message, ids, finish = turn
    steps: list[tuple[dict[str, Any], list[int], str | None]] = [
        (delta, these, None) for delta, these in chat_deltas(view, message, ids)
    ]
    steps.append(({}, [], finish))
    out = []
    for delta, these, reason in steps:
        logprobs = None
        if opts.top_n is not None and these:
            logprobs = chat_logprobs(view, these, opts.top_n, opts.as_ids)
        choice: dict[str, Any] = {
            "index": index,
            "delta": delta,
            "logprobs": logprobs,
            "finish_reason": reason,
        }
        if opts.want_ids:
            choice["token_ids"] = these
        out.append(choice)
    return out


def _slice_logprobs(logprobs: dict[str, Any], start: int, end: int) -> dict[str, Any]:
    """Tokens `start:end` of completion logprobs; `text_offset` stays counted from the
    completion's start, as vLLM streams it."""
    return {key: values[start:end] for key, values in logprobs.items()}


def completion_chunk_choices(
    view: TokenizerView,
    index: int,
    result: tuple[str, list[int], str],
    opts: TokenOptions,
    prompt_ids: list[int] | None,
) -> list[dict[str, Any]]:
    """The `choices[0]` of each chunk streaming one text-completion choice.

    The text comes per token with its slice of the logprobs, then a last chunk
    with no text and the finish reason. With `want_ids` every chunk has its
    `token_ids` and the first the choice's `prompt_token_ids`, as vLLM streams them.
    """
    text, ids, finish = result
    whole = (
        completion_logprobs(view, ids, opts.top_n, opts.as_ids) if opts.top_n is not None else None
    )
    out = []
    start = 0
    for piece in text_pieces(view, ids, text):
        end = start + len(piece.ids)
        logprobs = _slice_logprobs(whole, start, end) if whole is not None else None
        out.append(completion_choice(index, piece.text, logprobs, None, piece.ids, opts))
        start = end
    out.append(completion_choice(index, "", None, finish, [], opts))
    if opts.want_ids:
        out[0]["prompt_token_ids"] = prompt_ids
    return out


def interleave(
    head: ResponseHead, per_choice: Iterable[list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """One chunk per choice step, the choices taking turns as a server sampling them
    together sends them: a client must tell them apart by `index`, not by order."""
    steps = itertools.zip_longest(*per_choice)
    return [head.body([choice]) for step in steps for choice in step if choice is not None]
