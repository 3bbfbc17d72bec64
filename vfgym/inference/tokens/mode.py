"""Which caller a rollout gets: token-exact mode where the server supports it, chat
mode elsewhere.

`token_mode` is "auto" (the default: token-exact against vLLM, chat mode against
any other server, or when the sampling arguments use what only the chat endpoint
does, a forced `tool_choice` or a `response_format`), "exact" (always; a server
without the subset `caller.py` lists fails the rollout with a clear error) or
"chat" (never). vLLM is recognised by its model list (`owned_by: "vllm"`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal

from openai import AsyncOpenAI, OpenAI

from vfgym.inference.client import ModelCaller
from vfgym.inference.retry import RetryPolicy
from vfgym.inference.tokens.caller import TokenExactCaller
from vfgym.inference.tokens.render import LocalRenderer, Renderer, ServerRenderer
from vfgym.inference.tokens.samples import exact_samples
from vfgym.types import ChatCompletionToolParam, MessageType

TokenMode = Literal["auto", "exact", "chat"]
TOKEN_MODES: tuple[str, ...] = ("auto", "exact", "chat")


def checked_token_mode(mode: Any) -> TokenMode:
    """`mode` when it is one of `TOKEN_MODES`; a ValueError saying which otherwise."""
    if mode not in TOKEN_MODES:
        raise ValueError(
            f"token_mode must be one of {', '.join(map(repr, TOKEN_MODES))}, got {mode!r}: "
            "'exact' sends token ids (vLLM), 'chat' sends messages (any OpenAI-compatible "
            "server), 'auto' picks 'exact' against vLLM"
        )
    return mode  # type: ignore[no-any-return]


def needs_chat_endpoint(sampling_args: dict[str, Any] | None) -> bool:
    """True when the sampling arguments ask for what only the chat endpoint does."""
    args = sampling_args or {}
    return args.get("tool_choice") not in (None, "auto", "none") or bool(
        args.get("response_format")
    )


async def serves_token_ids(client: Any) -> bool:
    """Whether the server behind `client` is a vLLM (which speaks the token-exact
    subset). Any failure to tell (a wrapper client, a server that is down) says no:
    chat mode then reports whatever is wrong on the first model call."""
    if not isinstance(client, AsyncOpenAI | OpenAI):
        return False
    try:
        if isinstance(client, AsyncOpenAI):
            cards = (await client.models.list()).data
        else:
            cards = (await asyncio.to_thread(client.models.list)).data
        return any(getattr(card, "owned_by", None) == "vllm" for card in cards)
    except Exception:
        return False


async def rollout_caller(
    client: AsyncOpenAI | OpenAI,
    model: str,
    *,
    token_mode: TokenMode,
    message_type: MessageType,
    oai_tools: list[ChatCompletionToolParam] | None,
    sampling_args: dict[str, Any] | None,
    retry: RetryPolicy | None,
    tool_parser: str = "hermes",
    tokenizer: Any = None,
    known_servers: dict[str, asyncio.Task[bool]] | None = None,
) -> ModelCaller | TokenExactCaller:
    """The caller of one rollout in the mode `token_mode` picks (see the module docstring).

    `tokenizer` is a local Hugging Face-like tokenizer to render with instead of the
    server's `/tokenize`; `known_servers` holds, per base URL, the question whether
    the server is a vLLM, so "auto" asks once per environment and server.
    """
    exact = token_mode == "exact"
    if token_mode == "auto" and message_type == "chat" and not needs_chat_endpoint(sampling_args):
        url = str(getattr(client, "base_url", ""))
        cache = known_servers if known_servers is not None else {}
        asked = cache.get(url)
        # One question per server, shared by the rollouts that start together; a task
        # of an earlier event loop (an earlier evaluate_sync) is asked again.
        if asked is None or asked.get_loop() is not asyncio.get_running_loop():
            asked = cache[url] = asyncio.ensure_future(serves_token_ids(client))
        exact = await asyncio.shield(asked)
    if not exact or message_type != "chat":
        return ModelCaller(
            client,
            model,
            message_type=message_type,
            oai_tools=oai_tools,
            sampling_args=sampling_args,
            retry=retry,
        )
    renderer: Renderer = (
        LocalRenderer(tokenizer) if tokenizer is not None else ServerRenderer(client, model)
    )
    return TokenExactCaller(
        client,
        model,
        renderer,
        oai_tools=oai_tools,
        sampling_args=sampling_args,
        retry=retry,
        tool_parser_name=tool_parser,
    )


def note_token_samples(state: dict[str, Any], caller: Any, logger: logging.Logger) -> None:
    """Record a finished rollout's mode (`token_mode`) and how its ids split into exact
    samples (`token_samples`), and say so when they split: a trainer must never take
    a drifted turn for exact.

    The server's own ids decide (`prompt_token_ids`, compared turn by turn), as they
    do for `process_env_results`; without them a token-exact caller's own count is
    used, and in chat mode nothing can be said and nothing is recorded.
    """
    exact = isinstance(caller, TokenExactCaller)
    state["token_mode"] = "exact" if exact else "chat"
    grouped = exact_samples(state.get("responses") or [])
    samples = len(grouped) if grouped else (caller.samples if exact else None)
    if not samples:
        return
    state["token_samples"] = samples
    if samples > 1:
        logger.info(
            "rollout %s: its token ids split into %d exact samples (%s mode): the server "
            "saw a history other than the sequence kept; process_env_results gives one "
            "row per sample",
            state.get("example_id"),
            samples,
            state["token_mode"],
        )


__all__ = [
    "TOKEN_MODES",
    "TokenMode",
    "checked_token_mode",
    "needs_chat_endpoint",
    "note_token_samples",
    "rollout_caller",
    "serves_token_ids",
]
