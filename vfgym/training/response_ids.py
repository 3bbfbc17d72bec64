"""The token ids and logprobs a model server returned with each response.

Split from `processing.py`: the model's ids are never recomputed from its text,
they are read from the response (vLLM's `token_ids`, or logprob tokens of the
form `token_id:N`), from the openai client's objects or their plain-dict form in
a State read back from results.jsonl, with a clear error when they are missing.
"""

from __future__ import annotations

import math
from typing import Any

from vfgym.errors import LogprobCountError, MissingTokenIdsError


def response_field(obj: Any, key: str) -> Any:
    """A field of a server response (or one of its parts) that the openai client's
    models may not declare, such as vLLM's `token_ids`: an attribute, an extra field,
    or a dict key."""
    value = getattr(obj, key, None)
    if value is None:
        extra = getattr(obj, "model_extra", None) or {}
        value = extra.get(key)
    if value is None and isinstance(obj, dict):
        value = obj.get(key)
    return value


#: How to ask a server for the ids of what it generates, said whenever they are missing.
_ASK_FOR_IDS = (
    "ask the server for them with sampling_args={'extra_body': {'return_token_ids': True}} "
    "(vLLM >= 0.10.2), or {'logprobs': True, 'extra_body': {'return_tokens_as_token_ids': "
    "True}}"
)


def _id_from_token(token: Any) -> int:
    if not isinstance(token, str) or not token.startswith("token_id:"):
        raise MissingTokenIdsError(
            f"a model response carries logprobs whose tokens are text ({token!r}), not ids, "
            f"and no token ids; {_ASK_FOR_IDS}"
        )
    return int(token[len("token_id:") :])


def _first_choice(response: Any) -> Any:
    """The first choice of a response: an openai object, or the plain dict a State
    read back from results.jsonl holds in its place."""
    choices = response_field(response, "choices")
    if not choices:
        raise MissingTokenIdsError(
            f"a model response has no choices, so no token ids: {response!r:.120}"
        )
    return choices[0]


#: The logprob of a token the server gave none for (or none that is a number).
MISSING_LOGPROB = 0.0


def _logprob(value: Any) -> float:
    """One token's logprob as a float; `MISSING_LOGPROB` when there is none.

    None is what a server sends for a token it has no logprob for (the first token
    of a legacy completion), and what results.jsonl holds for a logprob that was
    not a finite number (strict JSON has no NaN or infinity). Read back or live, all
    of them are the same missing value, so a resumed run processes as the original.
    """
    if value is None:
        return MISSING_LOGPROB
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"a model response carries a logprob that is not a number ({value!r:.60}); "
            "check the server (or a proxy in front of it), or leave logprobs out of the "
            "sampling args to train without them"
        ) from None
    return number if math.isfinite(number) else MISSING_LOGPROB


def _logprob_values(logprobs: Any) -> tuple[list[float] | None, list[Any] | None]:
    """(logprobs, tokens) of a choice's `logprobs`, chat or legacy completions,
    or (None, None) when it has neither."""
    content = response_field(logprobs, "content")
    if content is not None:  # chat
        values = [_logprob(response_field(item, "logprob")) for item in content]
        return values, [response_field(item, "token") for item in content]
    tokens = response_field(logprobs, "tokens")
    if tokens is not None:  # legacy completions
        raw = response_field(logprobs, "token_logprobs") or []
        return [_logprob(v) for v in raw], list(tokens)
    return None, None


def response_tokens(response: Any) -> tuple[list[int], list[float]]:
    """The generated token ids and their logprobs, as the server returned them.

    Reads vLLM's `choices[0].token_ids` (with `return_token_ids`) or the ids in
    `choices[0].logprobs` (with `return_tokens_as_token_ids`), from the openai
    client's objects or from their plain-dict form (a State read back from
    results.jsonl). A logprob is 0.0 (`MISSING_LOGPROB`) when the server sent none:
    no logprobs at all, a null one, or one that is not a finite number (NaN,
    infinity), which results.jsonl writes as null, so a State read back from it
    gives the same logprobs as the live one. A count that does not match the ids
    is an error.
    """
    choice = _first_choice(response)
    ids = response_field(choice, "token_ids")
    values: list[float] | None = None
    logprobs = response_field(choice, "logprobs")
    if logprobs is not None:
        values, tokens = _logprob_values(logprobs)
        if ids is None and tokens is not None:
            ids = [_id_from_token(t) for t in tokens]
    if ids is None:
        raise MissingTokenIdsError(f"a model response carries no token ids; {_ASK_FOR_IDS}")
    ids = [int(i) for i in ids]
    if values is None:
        return ids, [MISSING_LOGPROB] * len(ids)
    if len(values) != len(ids):
        # Zeros would pass for logprobs, and a trainer's importance ratios would be
        # wrong with no sign of it.
        raise LogprobCountError(
            f"a model response carries {len(ids)} token ids but {len(values)} logprobs, "
            "which must pair one to one; check the server (or a proxy in front of it), or "
            "leave logprobs out of the sampling args to train without them"
        )
    return ids, values


def response_text(response: Any) -> str:
    """The text a completions response generated."""
    return response_field(_first_choice(response), "text") or ""
