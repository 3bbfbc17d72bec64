"""A deterministic byte-level tokenizer with a prefix-stable chat template.

The test server, the token-processing code and trainers all need to agree on
token ids without downloading a real model. Byte-level tokens make that exact:
every string has one tokenization, `decode(encode(s)) == s` for every `str`,
and the chat template below is built so that a conversation's token ids can be
rebuilt from the ids a server returned for each assistant turn.

Vocabulary
    ids 0..15 are special tokens (only the first seven are named, the rest are
    reserved); id ``16 + b`` is the byte ``b``. Special-token names that appear in
    text are encoded as the special token (as Hugging Face tokenizers do); pass
    ``split_special_tokens=True`` to encode them as plain bytes instead.

Chat template
    A conversation is a sequence of *segments* separated by ``<|end|>``::

        [<|tools|> TOOLS <|end|>] <|role|> BODY <|end|> <|role|> BODY ... [<|end|> <|assistant|>]

    - ``TOOLS`` is ``json.dumps(tools, sort_keys=True, ensure_ascii=False,
      separators=(",", ":"))``, present only when tools are given.
    - ``<|role|>`` is ``<|system|>`` (also for ``developer``), ``<|user|>``,
      ``<|assistant|>`` or ``<|tool|>``.
    - ``BODY`` is ``encode(text)`` where ``text`` is the message content (a list of
      text parts is concatenated; ``None`` is empty). For an assistant message each
      tool call is appended after the content as
      ``<tool_call>{"name": NAME, "arguments": ARGS}</tool_call>``, where ``NAME``
      is JSON-quoted and ``ARGS`` is the call's argument string verbatim when it is
      valid JSON, JSON-quoted otherwise (see `assistant_text`).
    - ``add_generation_prompt=True`` appends ``<|end|> <|assistant|>`` (just
      ``<|assistant|>`` for an empty conversation without tools).

    Because ``<|end|>`` *separates* segments instead of closing them, rendering
    is prefix-stable in both directions a trainer needs:

    - ``render(msgs[:k], add_generation_prompt=True) + encode(assistant_text(msgs[k]))
      == render(msgs[:k + 1])`` when ``msgs[k]`` is an assistant message, so the
      completion ids a server returns are exactly the assistant turn's ids;
    - ``render(msgs[:k])`` is a prefix of ``render(msgs[:k + j], add_generation_prompt=True)``,
      so the ids of environment turns are the difference of two renderings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

PAD = "<|pad|>"
END = "<|end|>"
SYSTEM = "<|system|>"
USER = "<|user|>"
ASSISTANT = "<|assistant|>"
TOOL = "<|tool|>"
TOOLS = "<|tools|>"

SPECIAL_TOKENS: tuple[str, ...] = (PAD, END, SYSTEM, USER, ASSISTANT, TOOL, TOOLS)
BYTE_OFFSET = 16
VOCAB_SIZE = BYTE_OFFSET + 256

_SPECIAL_ID: dict[str, int] = {name: i for i, name in enumerate(SPECIAL_TOKENS)}
_ROLE_TOKEN: dict[str, str] = {
    "system": SYSTEM,
    "developer": SYSTEM,
    "user": USER,
    "assistant": ASSISTANT,
    "tool": TOOL,
}
_SPECIAL_RE = re.compile("(" + "|".join(re.escape(name) for name in SPECIAL_TOKENS) + ")")
_BYTE_TO_ID: tuple[int, ...] = tuple(b + BYTE_OFFSET for b in range(256))


def _to_utf8(text: str) -> bytes:
    """UTF-8 bytes of `text`; lone surrogates are kept (surrogatepass) so every str encodes."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def _from_utf8(data: bytes) -> str:
    """Inverse of `_to_utf8`; bytes that are not UTF-8 (a token cut mid-character) become U+FFFD."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        try:
            return data.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            return data.decode("utf-8", "replace")


def _as_dict(obj: Any, what: str) -> Mapping[str, Any]:
    """Accept plain dicts and pydantic objects (e.g. the openai client's message types)."""
    if isinstance(obj, Mapping):
        return obj
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True)
    raise TypeError(f"{what} must be a dict, got {type(obj).__name__}: {obj!r:.80}")


def content_text(content: Any) -> str:
    """The text of a message's `content`: a string, None, or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces = []
        for part in content:
            part = _as_dict(part, "a content part")
            if part.get("type", "text") != "text" or not isinstance(part.get("text"), str):
                raise ValueError(
                    "only text content parts ({'type': 'text', 'text': ...}) can be tokenized, "
                    f"got {dict(part)!r:.120}"
                )
            pieces.append(part["text"])
        return "".join(pieces)
    raise TypeError(
        f"message content must be a str, None or a list of text parts, got {type(content).__name__}"
    )


def render_tool_calls(tool_calls: Iterable[Any] | None) -> str:
    """The template's text for an assistant message's tool calls (empty when there are none)."""
    if not tool_calls:
        return ""
    pieces = []
    for call in tool_calls:
        call = _as_dict(call, "a tool call")
        function = _as_dict(call.get("function") or {}, "a tool call's function")
        name = function.get("name")
        if not isinstance(name, str):
            raise ValueError(
                f"a tool call needs function.name as a string, got {dict(call)!r:.120}"
            )
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        try:
            json.loads(arguments)
            args_text = arguments
        except ValueError:
            args_text = json.dumps(arguments, ensure_ascii=False)
        pieces.append(
            f'<tool_call>{{"name": {json.dumps(name, ensure_ascii=False)}, '
            f'"arguments": {args_text}}}</tool_call>'
        )
    return "".join(pieces)


def assistant_text(message: Mapping[str, Any]) -> str:
    """The text the template encodes as an assistant message's body: content, then tool calls."""
    return content_text(message.get("content")) + render_tool_calls(message.get("tool_calls"))


def tools_text(tools: Sequence[Any]) -> str:
    """The canonical JSON of a tool list as the template renders it."""
    return json.dumps(list(tools), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class ByteTokenizer:
    """A byte-level tokenizer with the Hugging Face surface the project's code calls.

    Pluggable wherever a Hugging Face tokenizer is accepted for token processing:
    `encode`, `decode`, `batch_decode`, `apply_chat_template`, `convert_ids_to_tokens`,
    `eos_token_id`, `pad_token_id`, `vocab_size`. See the module docstring for the
    vocabulary and the chat template.
    """

    name_or_path = "vfgym/byte-tokenizer"
    eos_token = END
    pad_token = PAD
    bos_token = None
    bos_token_id = None
    eos_token_id = _SPECIAL_ID[END]
    pad_token_id = _SPECIAL_ID[PAD]
    vocab_size = VOCAB_SIZE
    all_special_tokens: list[str] = list(SPECIAL_TOKENS)
    all_special_ids: list[int] = list(range(len(SPECIAL_TOKENS)))

    def __len__(self) -> int:
        return VOCAB_SIZE

    def __repr__(self) -> str:
        return f"ByteTokenizer(vocab_size={VOCAB_SIZE})"

    # -- plain text ---------------------------------------------------------

    def encode(
        self,
        text: str,
        add_special_tokens: bool = False,
        *,
        split_special_tokens: bool = False,
    ) -> list[int]:
        """Token ids of `text`: one per UTF-8 byte, special-token names as their ids.

        `add_special_tokens` exists for Hugging Face compatibility; this vocabulary
        has no BOS token, so it changes nothing.
        """
        if not isinstance(text, str):
            raise TypeError(f"encode() takes a str, got {type(text).__name__}")
        if split_special_tokens or "<|" not in text:
            return [_BYTE_TO_ID[b] for b in _to_utf8(text)]
        ids: list[int] = []
        for piece in _SPECIAL_RE.split(text):
            special = _SPECIAL_ID.get(piece)
            if special is not None:
                ids.append(special)
            elif piece:
                ids.extend(_BYTE_TO_ID[b] for b in _to_utf8(piece))
        return ids

    def __call__(self, text: str | list[str], **kwargs: Any) -> dict[str, Any]:
        """`tokenizer(text)["input_ids"]`, as Hugging Face tokenizers are called."""
        if isinstance(text, str):
            ids = self.encode(text, **kwargs)
            return {"input_ids": ids, "attention_mask": [1] * len(ids)}
        batch = [self.encode(t, **kwargs) for t in text]
        return {"input_ids": batch, "attention_mask": [[1] * len(ids) for ids in batch]}

    def count(self, text: str) -> int:
        """`len(encode(text))` without building the list (the server counts every prompt)."""
        if "<|" not in text:
            return len(_to_utf8(text))
        return len(self.encode(text))

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False, **_: Any) -> str:
        """Text of `ids`; incomplete UTF-8 (ids cut mid-character) decodes to U+FFFD."""
        out: list[str] = []
        buf = bytearray()
        for tid in ids:
            tid = int(tid)
            if BYTE_OFFSET <= tid < VOCAB_SIZE:
                buf.append(tid - BYTE_OFFSET)
                continue
            if not 0 <= tid < VOCAB_SIZE:
                raise ValueError(f"token id {tid} is outside the vocabulary (0..{VOCAB_SIZE - 1})")
            if buf:
                out.append(_from_utf8(bytes(buf)))
                buf.clear()
            if not skip_special_tokens:
                out.append(self.id_to_token(tid))
        if buf:
            out.append(_from_utf8(bytes(buf)))
        return "".join(out)

    def batch_decode(self, sequences: Iterable[Iterable[int]], **kwargs: Any) -> list[str]:
        """`decode` for each sequence."""
        return [self.decode(ids, **kwargs) for ids in sequences]

    def id_to_token(self, tid: int) -> str:
        """One token's text: a special token's name, or its byte decoded (U+FFFD if partial)."""
        if tid >= BYTE_OFFSET:
            return _from_utf8(bytes((tid - BYTE_OFFSET,)))
        if tid < len(SPECIAL_TOKENS):
            return SPECIAL_TOKENS[tid]
        return f"<|reserved_{tid}|>"

    def token_bytes(self, tid: int) -> bytes:
        """The raw bytes one token stands for (a special token's name in UTF-8)."""
        if tid >= BYTE_OFFSET:
            return bytes((tid - BYTE_OFFSET,))
        return self.id_to_token(tid).encode("utf-8")

    def convert_ids_to_tokens(self, ids: int | Iterable[int]) -> str | list[str]:
        """Hugging Face name for `id_to_token`, on one id or many."""
        if isinstance(ids, int):
            return self.id_to_token(ids)
        return [self.id_to_token(int(t)) for t in ids]

    # -- chat ---------------------------------------------------------------

    def _segments(
        self, conversation: Sequence[Any], tools: Sequence[Any] | None, add_generation_prompt: bool
    ) -> list[tuple[str, str]]:
        """The template as (special token, body text) segments, joined by `<|end|>`."""
        if isinstance(conversation, str) or not isinstance(conversation, Sequence):
            raise TypeError(
                "a chat conversation must be a list of message dicts, "
                f"got {type(conversation).__name__}"
            )
        segments: list[tuple[str, str]] = []
        if tools:
            segments.append((TOOLS, tools_text(tools)))
        for i, raw in enumerate(conversation):
            message = _as_dict(raw, f"message {i}")
            role = message.get("role")
            marker = _ROLE_TOKEN.get(role)  # type: ignore[arg-type]
            if marker is None:
                raise ValueError(
                    f"message {i} has role {role!r}; the chat template knows {sorted(_ROLE_TOKEN)}"
                )
            if role == "assistant":
                body = assistant_text(message)
            else:
                body = content_text(message.get("content"))
            segments.append((marker, body))
        if add_generation_prompt:
            segments.append((ASSISTANT, ""))
        return segments

    def apply_chat_template(
        self,
        conversation: Sequence[Any] | None = None,
        tools: Sequence[Any] | None = None,
        *,
        tokenize: bool = True,
        add_generation_prompt: bool = False,
        messages: Sequence[Any] | None = None,
        **template_kwargs: Any,
    ) -> list[int] | str:
        """Render a conversation with the template described in the module docstring.

        `messages=` is accepted as another name for `conversation`. Other keyword
        arguments are template variables in Hugging Face; this template uses none,
        so they are accepted and ignored, except options that change the return
        type (`return_dict`, `return_tensors`), which are refused.
        """
        if conversation is None:
            conversation = messages
        elif messages is not None:
            raise TypeError("pass the conversation once, as `conversation` or as `messages`")
        if conversation is None:
            raise TypeError("apply_chat_template() needs a conversation (a list of messages)")
        for option in ("return_dict", "return_tensors"):
            if template_kwargs.get(option):
                raise TypeError(f"ByteTokenizer.apply_chat_template does not support {option}")
        segments = self._segments(conversation, tools, add_generation_prompt)
        if not tokenize:
            return END.join(marker + body for marker, body in segments)
        end_id = _SPECIAL_ID[END]
        ids: list[int] = []
        for i, (marker, body) in enumerate(segments):
            if i:
                ids.append(end_id)
            ids.append(_SPECIAL_ID[marker])
            ids.extend(self.encode(body))
        return ids

    def count_chat_tokens(
        self,
        conversation: Sequence[Any],
        tools: Sequence[Any] | None = None,
        add_generation_prompt: bool = True,
    ) -> int:
        """`len(apply_chat_template(...))` without building the id list."""
        segments = self._segments(conversation, tools, add_generation_prompt)
        if not segments:
            return 0
        return 2 * len(segments) - 1 + sum(self.count(body) for _, body in segments)
