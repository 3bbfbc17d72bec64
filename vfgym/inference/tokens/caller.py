"""`TokenExactCaller`: one rollout's model calls sent as token ids, never re-rendered.

The chat endpoint re-renders the whole conversation from the assistant's *text* on
every turn and tokenizes it again; a reply's text does not always tokenize back to
the ids the model sampled (another BPE split, a stop string cut inside a token, an
added token such as `<tool_call>` sampled as characters). Then every later turn's
logprobs belong to a context a trainer never sees. This caller keeps the rollout's
sequence as ids instead:

    first prompt ids  (the template's rendering of the prompt, via the renderer)
    + sampled ids     (exactly as the server returns them in `token_ids`)
    + bridge ids      (the template's ids after that turn: the end of the turn the
                       model did not sample, the environment's messages, the next
                       assistant header; found by suffix difference and checked to
                       extend the rendering exactly)
    + sampled ids ...

and sends it to `/v1/completions` as a token-id prompt. When a bridge cannot be
found exactly (the template rewrites an earlier turn once more messages follow,
as Qwen3 drops past `<think>` blocks; or a `get_context_messages` that rewrites the
history) the caller starts a new sample from the template's rendering of the
whole context and counts it: `samples` is how many exact samples the rollout's
token data splits into, and `process_env_results` gives one row per sample.

The server subset it needs (vLLM serves it; vfgym's loopback server too):

- `POST /tokenize` with `{"model", "messages", "tools"?, "add_generation_prompt",
  "add_special_tokens": false}` answering `{"tokens": [int, ...]}` (not needed when
  a local tokenizer is given);
- `POST /v1/completions` with `"prompt": [int, ...]`, `"logprobs": N` and
  `"return_token_ids": true`, answering a choice with `text`, `token_ids` (the
  sampled ids, end-of-turn token included when sampled), `prompt_token_ids`,
  `logprobs.tokens` / `logprobs.token_logprobs` and `finish_reason`, plus `usage`.

What the rollout and the rubric see is a chat response as chat mode gives it:
`choices[0].message` with `content` and `tool_calls` (parsed from the sampled text
by the named tool parser, hermes by default), `choices[0].logprobs.content`,
`choices[0].token_ids`, `prompt_token_ids` (the server's own), `finish_reason`
(`tool_calls` when calls were parsed) and `usage`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

from openai import AsyncOpenAI, OpenAI
from openai.types.chat import ChatCompletion

from vfgym.errors import ModelCallError
from vfgym.inference.client import ModelCaller
from vfgym.inference.messages import assistant_message
from vfgym.inference.retry import RetryPolicy
from vfgym.inference.tokens.render import Renderer
from vfgym.inference.tokens.tool_parsers import tool_parser
from vfgym.types import ChatCompletionToolParam, Messages, ModelResponse

logger = logging.getLogger(__name__)

#: Two texts a template renders alike apart from the text itself (see `_closing`).
_PROBES = ("x", "y")

#: The finish reasons a chat response may carry (vLLM's "abort" reads as "stop").
_FINISHES = ("stop", "length", "tool_calls", "content_filter", "function_call")

#: Chat-only sampling keys that have no meaning for a token-id completion.
_CHAT_ONLY = ("tools", "parallel_tool_calls", "logprobs", "top_logprobs", "stream_options")


def completion_sampling_args(chat_args: dict[str, Any] | None) -> dict[str, Any]:
    """The rollout's (chat) sampling arguments as `/v1/completions` takes them.

    Logprobs are always asked for (`top_logprobs` alternatives, else only the
    sampled token's) and the ids with `return_token_ids`. What only the chat
    endpoint can do is refused with what to use instead.
    """
    args = dict(chat_args or {})
    choice = args.pop("tool_choice", None)
    if choice not in (None, "auto", "none"):
        raise ValueError(
            f"sampling_args tool_choice={choice!r}: a forced tool call is the chat endpoint's "
            "feature; in token-exact mode force the call's text with structured outputs "
            "(extra_body={'structured_outputs': {'regex': ...}} on vLLM), or use "
            "token_mode='chat'"
        )
    if args.pop("response_format", None) is not None:
        raise ValueError(
            "sampling_args response_format is the chat endpoint's; in token-exact mode use "
            "extra_body={'structured_outputs': {'json': SCHEMA}} (vLLM), or token_mode='chat'"
        )
    if (args.get("n") or 1) != 1:
        raise ValueError("token-exact mode samples one reply per request; drop sampling_args n")
    top = args.get("top_logprobs")
    for key in _CHAT_ONLY:
        args.pop(key, None)
    if "max_completion_tokens" in args:
        args["max_tokens"] = args.pop("max_completion_tokens")
    args["logprobs"] = int(top or 0)
    args["extra_body"] = {**(args.get("extra_body") or {}), "return_token_ids": True}
    return args


def _field(obj: Any, key: str) -> Any:
    """A field of a response part the openai models may not declare (vLLM's extras)."""
    value = getattr(obj, key, None)
    if value is None:
        value = (getattr(obj, "model_extra", None) or {}).get(key)
    return value


def _overlap(sampled: Sequence[int], closing: Sequence[int]) -> int:
    """How many ids at the end of `sampled` are the start of `closing` (the end-of-turn
    token the model sampled is the template's too; the newline after it is not)."""
    for k in range(min(len(sampled), len(closing)), 0, -1):
        if list(sampled[-k:]) == list(closing[:k]):
            return k
    return 0


def _common_suffix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


class TokenExactCaller:
    """The model calls of one rollout in token-exact mode (see the module docstring).

    Called like `ModelCaller`: `await caller(prompt_messages, sampling_args)` gives a
    chat response, so the turn loop and the rubrics are the same in both modes.
    """

    def __init__(
        self,
        client: AsyncOpenAI | OpenAI,
        model: str,
        renderer: Renderer,
        *,
        oai_tools: list[ChatCompletionToolParam] | None = None,
        sampling_args: dict[str, Any] | None = None,
        retry: RetryPolicy | None = None,
        tool_parser_name: str = "hermes",
    ) -> None:
        self.model = model
        self._renderer = renderer
        self._tools = oai_tools
        self._parse = tool_parser(tool_parser_name)
        self._sampling_args = sampling_args
        # With tools, the tool-call markers must reach the text the parser reads: they
        # are often special tokens, which a completion's text leaves out by default
        # (vLLM's own tool parsers ask the same of the chat endpoint).
        self._keep_special = bool(oai_tools) and tool_parser_name != "none"
        self._args = self._completion_args(sampling_args)
        self._inner = ModelCaller(
            client, model, message_type="completion", sampling_args=self._args, retry=retry
        )
        #: How many exact samples the rollout's ids split into so far.
        self.samples = 0
        self._messages: list[Any] = []  # the conversation `_sequence` holds
        self._sequence: list[int] | None = None  # its ids, ending with the sampled ones
        self._sampled: list[int] = []
        self._closing: list[int] | None = None
        self._client = client
        self._window: int | None = None

    def _completion_args(self, sampling_args: dict[str, Any] | None) -> dict[str, Any]:
        args = completion_sampling_args(sampling_args)
        if self._keep_special:
            args["extra_body"].setdefault("skip_special_tokens", False)
        return args

    async def _room(self, prompt_length: int) -> int:
        """The tokens left in the context window after a prompt of `prompt_length`.

        Without `max_tokens` the chat endpoint generates until the window is full,
        but `/v1/completions` stops after 16 tokens (OpenAI's default, and vLLM's):
        the same sampling arguments must mean the same in both modes. The window is
        the model's `max_model_len` from the server's model list (vLLM's and vfgym's
        servers give it).
        """
        if self._window is None:
            try:
                if isinstance(self._client, AsyncOpenAI):
                    cards = (await self._client.models.list()).data
                else:
                    cards = (await asyncio.to_thread(self._client.models.list)).data
            except Exception as exc:
                raise ModelCallError(
                    f"token-exact mode could not read the model's context window from the "
                    f"server's model list ({type(exc).__name__}: {exc}); give max_tokens in "
                    "the sampling arguments",
                    attempts=1,
                ) from exc
            windows = {card.id: _field(card, "max_model_len") for card in cards}
            window = windows.get(self.model) or next((w for w in windows.values() if w), None)
            if not isinstance(window, int):
                raise ModelCallError(
                    "the server's model list gives no max_model_len, so token-exact mode "
                    "cannot tell how long a reply may be; give max_tokens in the sampling "
                    "arguments",
                    attempts=1,
                )
            self._window = window
        return max(self._window - prompt_length, 1)

    async def __call__(
        self, prompt: Messages, sampling_args: dict[str, Any] | None = None
    ) -> ModelResponse:
        """One model turn: the context's ids sent as a token-id completion."""
        context = list(prompt)
        ids = await self._prompt_ids(context)
        args = self._args
        if sampling_args is not None and sampling_args is not self._sampling_args:
            args = self._completion_args(sampling_args)
        if args.get("max_tokens") is None:
            args = {**args, "max_tokens": await self._room(len(ids))}
        raw = await self._inner(ids, args)  # type: ignore[arg-type]  # a token-id prompt
        response = self._chat_response(raw, ids)
        self._messages = [*context, assistant_message(response)]
        self._sampled = list(response.choices[0].token_ids)  # type: ignore[attr-defined]
        self._sequence = ids + self._sampled
        return response

    async def _prompt_ids(self, context: list[Any]) -> list[int]:
        """The ids to send: the kept sequence and the bridge, or a new sample."""
        known = self._messages
        if self._sequence is not None and context[: len(known)] == known:
            bridge = await self._bridge(context[len(known) :])
            if bridge is not None:
                return self._sequence + bridge
        self.samples += 1
        return await self._renderer.render(context, self._tools, True)

    async def _bridge(self, added: list[Any]) -> list[int] | None:
        """The ids between the last sampled id and the next model turn, or None when
        the template does not extend the kept conversation exactly."""
        render = self._renderer.render
        before = await render(self._messages, self._tools, False)
        after = await render([*self._messages, *added], self._tools, True)
        if after[: len(before)] != before:
            return None  # the template rewrites the past once `added` follows
        closing = await self._closing_ids()
        if closing and before[-len(closing) :] != closing:
            return None  # the turn is closed unlike a plain reply: no safe glue
        glue = closing[_overlap(self._sampled, closing) :]
        return glue + after[len(before) :]

    async def _closing_ids(self) -> list[int]:
        """The ids the template puts after an assistant reply's text (ChatML's
        `<|im_end|>` and newline), found by rendering two replies that differ only in
        their text: what both renderings end with. Found once per rollout."""
        if self._closing is None:
            prefix = self._messages[:-1]
            first, second = [
                await self._renderer.render(
                    [*prefix, {"role": "assistant", "content": probe}], self._tools, False
                )
                for probe in _PROBES
            ]
            n = _common_suffix(first, second)
            self._closing = first[len(first) - n :] if n else []
        return self._closing

    def _chat_response(self, raw: Any, sent: list[int]) -> ChatCompletion:
        """The completion `raw` as the chat response chat mode would have given."""
        choice = raw.choices[0]
        generated = _field(choice, "token_ids")
        if generated is None:
            raise ModelCallError(
                "the model server's completion carries no token_ids; token-exact mode needs "
                "vLLM's return_token_ids (vLLM >= 0.10.2), or use token_mode='chat'",
                attempts=1,
            )
        prompt_ids = _field(choice, "prompt_token_ids") or _field(raw, "prompt_token_ids")
        text = choice.text or ""
        content, calls = self._parse(text)
        finish = choice.finish_reason if choice.finish_reason in _FINISHES else "stop"
        if calls and finish == "stop":
            finish = "tool_calls"
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        usage = raw.usage.model_dump() if raw.usage is not None else None
        body: dict[str, Any] = {
            "id": raw.id,
            "object": "chat.completion",
            "created": raw.created or int(time.time()),
            "model": raw.model or self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": finish,
                    "logprobs": _chat_logprobs(choice.logprobs),
                    "token_ids": [int(t) for t in generated],
                    "text": text,
                }
            ],
            "usage": usage,
            "prompt_token_ids": list(prompt_ids) if prompt_ids is not None else list(sent),
            "token_mode": "exact",
        }
        if not calls and self._keep_special and "<tool_call>" in text:
            # Left as content, as vLLM's parser leaves it, but said: a call the model
            # botched must not pass for a plain answer without a trace.
            body["tool_call_parse_error"] = (
                "the reply holds a <tool_call> block whose JSON does not parse into "
                '{"name": ..., "arguments": ...}; it is kept as the message content'
            )
            logger.warning("%s: %s", raw.id, body["tool_call_parse_error"])
        return ChatCompletion.model_validate(body)


def _chat_logprobs(logprobs: Any) -> dict[str, Any] | None:
    """A completion's logprobs (`tokens`, `token_logprobs`) in the chat form
    (`content`: one entry per sampled token); None when the server sent none."""
    if logprobs is None or logprobs.tokens is None:
        return None
    values = logprobs.token_logprobs or [None] * len(logprobs.tokens)
    return {
        "content": [
            {
                "token": token,
                "logprob": value if value is not None else float("nan"),
                "bytes": None,
                "top_logprobs": [],
            }
            for token, value in zip(logprobs.tokens, values, strict=False)
        ]
    }


__all__ = ["TokenExactCaller", "completion_sampling_args"]
