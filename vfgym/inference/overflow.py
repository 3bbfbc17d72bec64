"""Context-length overflow: recognising it in a server's 400, and reading what still fits.

Split from `client.py`: OpenAI, vLLM and SGLang each word the error differently;
the client uses these to shrink a request's max tokens once to what fits, or to
end the rollout as truncated (`ContextLengthExceeded`) when the prompt alone does
not. `cut_by_length` tells a reply cut at its token limit.
"""

from __future__ import annotations

import re
from typing import Any

import openai

_CONTEXT_MARKERS = (
    "maximum context length",
    "context_length_exceeded",
    "context length",
    "prompt is too long",
    "too many tokens",
    # vLLM's engine (not its OpenAI layer): "The decoder prompt (length N) is longer
    # than the maximum model length of M."
    "maximum model length",
)


def is_context_overflow(exc: BaseException) -> bool:
    """True when the server refused the request because the prompt is too long."""
    if not isinstance(exc, openai.BadRequestError):
        return False
    text = str(exc).lower()
    return any(marker in text for marker in _CONTEXT_MARKERS)


_WINDOW = re.compile(r"maximum context length (?:is|of) (\d+)")
# The prompt's size as each server words it: OpenAI and older vLLM "(P in the
# messages, C in the completion)"; vLLM 0.9-0.11 "your request has P input tokens";
# newer vLLM "your prompt contains at least P input tokens"; SGLang "P tokens
# from the input messages".
_PROMPT_SIZE = re.compile(
    r"(\d+) in the (?:messages|prompt)"
    r"|request has (\d+) input tokens"
    r"|prompt contains (?:at least )?(\d+) input tokens"
    r"|(\d+) tokens from the input"
)
# OpenAI counts tools apart: "you requested T tokens (M in the messages, F in the
# functions, and C in the completion)"; the prompt is then everything but C.
_REQUESTED = re.compile(r"you requested (\d+) tokens \([^)]*?(\d+) in the completion\)")


def completion_room(exc: BaseException) -> int | None:
    """Completion tokens that would still fit, read from a context-overflow error.

    OpenAI, vLLM and SGLang all give the window ("maximum context length is/of N
    tokens") and the prompt's size, in different words (see `_PROMPT_SIZE`; OpenAI
    counts tools apart, see `_REQUESTED`); None
    when the message does not say, or when the prompt alone fills the window.
    """
    text = str(exc)
    window = _WINDOW.search(text)
    prompt_tokens = _prompt_tokens(text)
    if window is None or prompt_tokens is None:
        return None
    room = int(window.group(1)) - prompt_tokens
    return room if room > 0 else None


def _prompt_tokens(text: str) -> int | None:
    """The prompt's size in an overflow message, tools included when counted apart."""
    requested = _REQUESTED.search(text)
    if requested is not None:
        return int(requested.group(1)) - int(requested.group(2))
    prompt = _PROMPT_SIZE.search(text)
    if prompt is None:
        return None
    return int(next(size for size in prompt.groups() if size is not None))


def cut_by_length(response: Any) -> bool:
    """True when the server stopped the reply at its token limit (finish_reason
    "length": `max_tokens`, or the context window): the text ends mid-answer, which a
    trainer must be able to tell apart from a reply the model ended itself."""
    choices = getattr(response, "choices", None)
    if not choices:
        return False
    return getattr(choices[0], "finish_reason", None) == "length"


def max_tokens_key(sampling_args: dict[str, Any] | None) -> str | None:
    for key in ("max_completion_tokens", "max_tokens"):
        if (sampling_args or {}).get(key) is not None:
            return key
    return None
