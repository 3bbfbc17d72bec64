"""Token-level training data from finished rollouts.

The ids and logprobs of everything the model generated come from the server's
responses (vLLM returns them when asked: `extra_body={"return_token_ids": True}`
or `logprobs=True` with `return_tokens_as_token_ids`). They are never recomputed
by tokenizing the model's text again: a chat template may rewrite history (drop
a reasoning block, normalise whitespace), and retokenized text is not what the
model sampled. Only the prompt and the environment's turns are tokenized, by a
pluggable tokenizer: a Hugging Face tokenizer, vfgym's `ByteTokenizer`, or the
server's own `/tokenize` endpoint (`ServerTokenizer`).

A rollout becomes `prompt_ids` (the first request's rendering, with any messages
the environment opened the completion with) followed by, per turn, the model's
ids exactly as sampled (mask 1) and the environment's ids (mask 0 with
`mask_env_responses`). The environment's ids are everything the
template renders between the model's last sampled token and the next model
turn, taken from the conversation as the next request renders it: the
environment's messages, the next assistant header, and any id the template adds
after the model's end-of-turn token (the newline after ChatML's `<|im_end|>`, or
the end-of-turn token itself when `max_tokens` cut the turn) — the model never
sampled those.

When the template renders each turn the same whatever follows it, the sequence
up to each model turn is exactly the prompt the server tokenized for it. Some
templates rewrite an earlier turn once more messages follow: Qwen3's drops the
`<think>...</think>` reasoning of every assistant turn before the last user
message. No sequence can then hold both what the model sampled and what the
server showed it later. vfgym keeps the model's own ids for its turns (the
logprobs and the policy gradient belong to what was sampled) and places the
environment's ids, rendered in the rewritten conversation, right after them; the
later requests' view of the rewritten turns is not reproduced. To find where the
environment's ids start in a rewritten rendering, the model turn's text is
rendered with two different endings: what both renderings end with is the rest
of the turn, then the environment. A template that also closes the turn
differently once it is no longer the last one is refused
(`TemplateAlignmentError`) rather than mislabelled.
"""

from __future__ import annotations

import json
import logging
import math
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from vfgym.errors import (
    LogprobCountError,
    MissingTokenIdsError,
    ServerTokenizerError,
    TemplateAlignmentError,
)
from vfgym.types import ChatCompletionToolParam, Messages, MessageType, ProcessedOutputs, State

logger = logging.getLogger(__name__)


@runtime_checkable
class Tokenizer(Protocol):
    """What processing needs of a tokenizer (Hugging Face's surface)."""

    def apply_chat_template(self, conversation: Any, tools: Any = None, **kwargs: Any) -> Any: ...

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...


#: What to do when the server cannot tokenize, said by every `ServerTokenizerError`.
_LOCAL_TOKENIZER = (
    "vLLM and vfgym's server answer /tokenize (OpenAI's API does not); otherwise pass "
    "the model's Hugging Face tokenizer as processing_class instead"
)


class ServerTokenizer:
    """Tokenize with the model server's own `/tokenize` endpoint (vLLM, vfgym's server).

    Use it when the trainer has no local copy of the model's tokenizer: the server
    applies the exact chat template it serves with.
    """

    def __init__(
        self, base_url: str, model: str, *, api_key: str | None = None, timeout: float = 30.0
    ):
        root = base_url.rstrip("/")
        self.root = root[: -len("/v1")] if root.endswith("/v1") else root
        self.model = model
        self.timeout = timeout
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"

    def close(self) -> None:
        """Nothing to release: each call is one short HTTP request."""

    def __enter__(self) -> ServerTokenizer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _tokenize(self, body: dict[str, Any]) -> list[int]:
        url = f"{self.root}/tokenize"
        data = json.dumps({"model": self.model, **body}).encode()
        request = urllib.request.Request(url, data=data, headers=self._headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:200].decode("utf-8", "replace")
            missing = " (the server has no such endpoint)" if exc.code in (404, 405) else ""
            raise ServerTokenizerError(
                f"{url} answered HTTP {exc.code}{missing}: {detail}; {_LOCAL_TOKENIZER}"
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServerTokenizerError(
                f"could not reach {url} ({reason}); check that the model server is running "
                f"there and answers within {self.timeout:g} s (ServerTokenizer(timeout=...)); "
                f"{_LOCAL_TOKENIZER}"
            ) from None
        return _token_list(url, raw)

    def apply_chat_template(
        self,
        conversation: Any,
        tools: Any = None,
        *,
        add_generation_prompt: bool = False,
        tokenize: bool = True,
        **_: Any,
    ) -> list[int]:
        if not tokenize:
            raise ValueError("ServerTokenizer only returns token ids (tokenize=True)")
        body: dict[str, Any] = {
            "messages": list(conversation),
            "add_generation_prompt": add_generation_prompt,
            "add_special_tokens": False,
        }
        if tools:
            body["tools"] = tools
        return self._tokenize(body)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self._tokenize({"prompt": text, "add_special_tokens": add_special_tokens})


def _token_list(url: str, raw: bytes) -> list[int]:
    """The ids of a `/tokenize` answer (`{"tokens": [...], ...}`, as vLLM sends)."""
    try:
        tokens = json.loads(raw)["tokens"]
        return [int(t) for t in tokens]
    except (ValueError, TypeError, KeyError):
        detail = raw[:200].decode("utf-8", "replace")
        raise ServerTokenizerError(
            f"{url} answered with no token ids (a 'tokens' list of integers was expected): "
            f"{detail}; {_LOCAL_TOKENIZER}"
        ) from None


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


def _response_text(response: Any) -> str:
    """The text a completions response generated."""
    return response_field(_first_choice(response), "text") or ""


def _chat_ids(tokenizer: Tokenizer, messages: list[Any], tools: Any, generation: bool) -> list[int]:
    ids = tokenizer.apply_chat_template(
        messages, tools=tools or None, tokenize=True, add_generation_prompt=generation
    )
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # a BatchEncoding
        ids = ids["input_ids"]
    return list(ids)


_PROBES = ("x", "y")  # two texts a template renders alike apart from the text itself
_GLUE_WINDOW = 8  # at most this many template ids follow a turn's last sampled id
_GLUE_EVIDENCE = 4  # sampled ids that must line up before the glue is trusted


def _common_suffix(a: list[int], b: list[int], a_end: int | None = None) -> int:
    """How many ids `a[:a_end]` and `b` end with in common."""
    a_end = len(a) if a_end is None else a_end
    n = 0
    limit = min(a_end, len(b))
    while n < limit and a[a_end - 1 - n] == b[-1 - n]:
        n += 1
    return n


def _probed(message: Any, probe: str) -> Any:
    """`message` with `probe` added to the end of its text."""
    content = message.get("content")
    if isinstance(content, list):
        return {**message, "content": [*content, {"type": "text", "text": probe}]}
    return {**message, "content": (content or "") + probe}


def _after_text(
    tokenizer: Tokenizer, conversation: list[Any], turn: int, tools: Any, generation: bool
) -> list[int]:
    """The ids the template renders after the text of message `turn`, to the end.

    Found by rendering the conversation twice with different text appended to
    that message: whatever both renderings end with comes after the text
    (tool calls, the end-of-turn token, and everything later).
    """
    first, second = (
        _chat_ids(
            tokenizer,
            [*conversation[:turn], _probed(conversation[turn], probe), *conversation[turn + 1 :]],
            tools,
            generation,
        )
        for probe in _PROBES
    )
    n = _common_suffix(first, second)
    return first[len(first) - n :]


def _glue(before: list[int], generated: list[int], closing: Callable[[], list[int]]) -> list[int]:
    """The ids the template renders after the model's last sampled id, at the end of
    `before` (a rendering that ends with that model turn).

    A template often closes a turn with more than the model sampled: a newline
    after the end-of-turn token (ChatML, Qwen), or the end-of-turn token itself
    when the turn was cut by `max_tokens`. Those ids were never generated, so they
    belong to the environment's side. They are found by lining the end of the
    model's ids up with the end of the rendering. When that fails (the model
    sampled its text in another tokenization than the template's, or the template
    rewrote the end of the turn), the model's ids are lined up with `closing()`,
    the ids the template puts after the turn's text alone.
    """
    if not generated:
        return []
    best_end, best = _line_up(before, generated)
    if best >= min(len(generated), _GLUE_EVIDENCE):
        return before[best_end:]
    after_text = closing()
    best_end, best = _line_up(after_text, generated)
    return after_text[best_end:] if best else after_text


def _line_up(rendered: list[int], generated: list[int]) -> tuple[int, int]:
    """Where in the last `_GLUE_WINDOW` ids of `rendered` the end of `generated` fits
    best: (end, matched ids), the latest end winning a tie."""
    best_end, best = len(rendered), 0
    for end in range(len(rendered), max(len(rendered) - _GLUE_WINDOW, 0) - 1, -1):
        matched = _common_suffix(rendered, generated[-_GLUE_EVIDENCE:], end)
        if matched > best:
            best_end, best = end, matched
    return best_end, best


def _template_ids(
    tokenizer: Tokenizer,
    conversation: list[Any],
    added: int,
    tools: Any,
    generation: bool,
    seq: list[int],
    generated: list[int] | None,
) -> list[int]:
    """The ids the chat template puts after `seq` once the last `added` messages
    (and, with `generation`, the next assistant header) join the conversation.

    `generated` is what the model sampled for the message before them (None when
    that message is not the model's). See the module docstring for why the
    model's ids stay as sampled when the template renders its turn differently.
    """
    after = _chat_ids(tokenizer, conversation, tools, generation)
    if after[: len(seq)] == seq:  # the template extends what the server saw
        return after[len(seq) :]
    turn = len(conversation) - added - 1
    before = _chat_ids(tokenizer, conversation[: turn + 1], tools, False)

    rendered: list[list[int]] = []  # rendered once, for the glue and the alignment check

    def closing() -> list[int]:
        if not rendered:
            rendered.append(_after_text(tokenizer, conversation[: turn + 1], turn, tools, False))
        return rendered[0]

    glue = _glue(before, generated, closing) if generated is not None else []
    if after[: len(before)] == before:  # only the model's own turn reads differently
        return glue + after[len(before) :]
    if generated is None:
        return after[len(before) :]
    # The template rewrites the model's turn (or an earlier one) once the
    # environment answers, e.g. Qwen3 dropping reasoning before a user message:
    # place the environment's ids by what follows the turn's text instead.
    tail = _after_text(tokenizer, conversation, turn, tools, generation)
    closed = closing()
    if tail[: len(closed)] != closed:
        raise TemplateAlignmentError(
            f"the chat template ends the model's turn (message {turn}) differently once the "
            "messages after it are added, so vfgym cannot tell where the environment's tokens "
            "start; pass a tokenizer whose chat template closes an assistant turn the same way "
            "whether or not it is the last message"
        )
    return glue + tail[len(closed) :]


def _leading_env_messages(completion: list[Any]) -> int:
    """How many messages open the completion before the model's first turn."""
    for index, message in enumerate(completion):
        if message.get("role") == "assistant":
            return index
    return len(completion)


def _process_chat(
    tokenizer: Tokenizer,
    prompt: list[Any],
    completion: list[Any],
    state: State,
    tools: Any,
    mask_env: bool,
) -> tuple[list[int], list[int], list[int], list[float]]:
    # Messages the environment put before the model's first turn
    # (`init_completion`) were part of the first request: they belong to the
    # prompt, which the server rendered with them and then the assistant header.
    first = _leading_env_messages(completion)
    conversation = [*prompt, *completion[:first]]
    completion = completion[first:]
    prompt_ids = _chat_ids(tokenizer, conversation, tools, True)
    seq = list(prompt_ids)
    ids: list[int] = []
    mask: list[int] = []
    logprobs: list[float] = []
    responses = iter(state.get("responses") or [])
    env_mask = 0 if mask_env else 1
    generated: list[int] | None = None  # the ids of the model's latest turn

    def add_env(env_ids: list[int]) -> None:
        ids.extend(env_ids)
        mask.extend([env_mask] * len(env_ids))
        logprobs.extend([0.0] * len(env_ids))
        seq.extend(env_ids)

    i = 0
    while i < len(completion):
        message = completion[i]
        if message.get("role") == "assistant":
            response = next(responses, None)
            if response is None:
                raise MissingTokenIdsError(
                    f"completion turn {i} is an assistant message with no server response in "
                    "state['responses'], so its token ids are unknown: it was written by hand "
                    "(a Gym action), or the State was read back from results.jsonl, which keeps "
                    "the responses only of a run given state_columns=['responses']"
                )
            if i > 0 and completion[i - 1].get("role") == "assistant":
                # No environment turn in between (env_response returned no
                # messages): the server still rendered the next assistant
                # header before generating, and those ids belong in the sequence.
                add_env(_template_ids(tokenizer, conversation, 0, tools, True, seq, generated))
            generated, values = response_tokens(response)
            ids += generated
            mask += [1] * len(generated)
            logprobs += values
            seq += generated
            conversation.append(message)
            i += 1
            continue
        j = i
        while j < len(completion) and completion[j].get("role") != "assistant":
            j += 1
        conversation.extend(completion[i:j])
        more = j < len(completion)
        add_env(_template_ids(tokenizer, conversation, j - i, tools, more, seq, generated))
        generated = None
        i = j
    return prompt_ids, ids, mask, logprobs


def _process_text(
    tokenizer: Tokenizer, prompt: str, completion: str, state: State, mask_env: bool
) -> tuple[list[int], list[int], list[int], list[float]]:
    starts = list(state.get("responses_start_idx") or [])
    responses = list(state.get("responses") or [])
    if len(starts) != len(responses):
        # Pairing them anyway would label the model's text as environment text.
        raise MissingTokenIdsError(
            f"the completion has {len(starts)} model turn(s) (state['responses_start_idx']) "
            f"but state['responses'] holds {len(responses)} server response(s); turns "
            "written by hand (e.g. Gym actions) have no token ids: generate the rollout "
            "against a server to train on it. A State read back from results.jsonl has "
            "both only from a run given state_columns=['responses', 'responses_start_idx']"
        )
    # Text the environment opened the completion with (`init_completion`) was
    # part of the first request's prompt, which the server tokenized as one
    # string. vLLM's /v1/completions adds the tokenizer's special tokens (BOS)
    # to that prompt by default; text later in the sequence gets none.
    position = starts[0] if starts else len(completion)
    prompt_ids = list(tokenizer.encode(prompt + completion[:position], add_special_tokens=True))
    ids: list[int] = []
    mask: list[int] = []
    logprobs: list[float] = []
    env_mask = 0 if mask_env else 1
    for start, response in zip(starts, responses, strict=False):
        if start > position:
            env_ids = list(tokenizer.encode(completion[position:start], add_special_tokens=False))
            ids += env_ids
            mask += [env_mask] * len(env_ids)
            logprobs += [0.0] * len(env_ids)
        generated, values = response_tokens(response)
        ids += generated
        mask += [1] * len(generated)
        logprobs += values
        position = start + len(_response_text(response))
    if position < len(completion):
        env_ids = list(tokenizer.encode(completion[position:], add_special_tokens=False))
        ids += env_ids
        mask += [env_mask] * len(env_ids)
        logprobs += [0.0] * len(env_ids)
    return prompt_ids, ids, mask, logprobs


def _rollout_tools(state: State, default: Any) -> Any:
    """The tools the rollout was generated with: a dataset row's own
    `info["oai_tools"]` wins over the environment's, as it does in the rollout,
    so the prompt is rendered with the tool list the server actually saw."""
    info = state.get("info")
    own = info.get("oai_tools") if isinstance(info, dict) else None
    return own or default


def _check_message_type(prompt: Any, completion: Any, message_type: MessageType) -> None:
    """Refuse a rollout of the other message type: chat messages read as text (or text
    as messages) would be tokenized as something no server was ever sent."""
    texts = [isinstance(part, str) for part in (prompt, completion)]
    if message_type == "chat" and any(texts):
        raise TypeError(
            "the rollout's prompt or completion is text (completion-mode outputs), but "
            "message_type='chat'; pass message_type='completion', or call the environment's "
            "own process_env_results, which passes its message_type"
        )
    if message_type != "chat" and not all(texts):
        raise TypeError(
            f"the rollout's prompt or completion is a list of messages (chat outputs), but "
            f"message_type={message_type!r}; pass message_type='chat', or call the "
            "environment's own process_env_results, which passes its message_type"
        )


def _tools_by_rollout(oai_tools: Any, n: int) -> list[Any]:
    """The tool list of each of `n` rollouts: `oai_tools` is one list for all (of tool
    dicts) or one per rollout (lists or None); the two never look alike, as a tool is
    never a list. A per-rollout form of another length would pair tools with the
    wrong rollouts, or render a list of lists as the tools."""
    items = list(oai_tools or [])
    if not items or not all(t is None or isinstance(t, list) for t in items):
        return [oai_tools] * n
    if len(items) != n:
        raise ValueError(
            f"oai_tools holds {len(items)} tool lists but there are {n} rollouts; pass one "
            "tool list (or None) per rollout, or a single list of tools for all of them"
        )
    return items


def _tokenize_rollout(
    tokenizer: Tokenizer,
    prompt: Messages,
    completion: Messages,
    state: State,
    tools: Any,
    message_type: MessageType,
    mask_env: bool,
) -> tuple[list[int], list[int], list[int], list[float]]:
    """One rollout's prompt ids, completion ids, mask and logprobs.

    A rollout that errored is often one whose messages the template cannot
    render (that is why the server refused it); it carries no training signal
    anyway, so it becomes an empty completion instead of failing the batch.
    """
    try:
        _check_message_type(prompt, completion, message_type)
        if message_type == "chat":
            return _process_chat(tokenizer, list(prompt), list(completion), state, tools, mask_env)
        return _process_text(tokenizer, str(prompt), str(completion), state, mask_env)
    except Exception as exc:
        if not state.get("error"):
            raise
        logger.warning("errored rollout kept with an empty completion: %s", exc)
    try:
        if message_type == "chat":
            return _chat_ids(tokenizer, list(prompt), tools, True), [], [], []
        if isinstance(prompt, str):
            return list(tokenizer.encode(prompt, add_special_tokens=True)), [], [], []
    except Exception:
        pass
    return [], [], [], []


def _reward(value: Any, k: int) -> float:
    """Rollout `k`'s reward as a float; None (how results.jsonl writes a NaN or
    infinite reward) is NaN, a reward that carries no training signal."""
    if value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"rewards[{k}] is {value!r}, not a number; pass the rubric's rewards "
            "(GenerateOutputs.reward), one float per rollout"
        ) from None


def _checked_max_seq_len(value: Any) -> int:
    """`max_seq_len` as an int, -1 for no limit (None, 0 or a negative number)."""
    if value is None:
        return -1
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"max_seq_len must be a whole number of tokens (or None for no limit), not {value!r}"
        )
    return value


def process_env_results(
    prompts: Sequence[Messages],
    completions: Sequence[Messages],
    states: Sequence[State],
    rewards: Sequence[float],
    processing_class: Tokenizer,
    max_seq_len: int | None = -1,
    mask_env_responses: bool = False,
    mask_truncated_completions: bool = False,
    zero_truncated_completions: bool = False,
    message_type: MessageType = "chat",
    oai_tools: list[ChatCompletionToolParam] | Sequence[Any] | None = None,
) -> ProcessedOutputs:
    """Ids, masks, logprobs and rewards of each rollout, ready for a trainer.

    `completion_mask` is 1 on tokens the model generated and, unless
    `mask_env_responses`, on environment tokens too. Sequences longer than
    `max_seq_len` lose the end of their completion and count as truncated; so do
    rollouts that ended truncated (turn limit, token budget, context, or a last
    model reply the server cut at its token limit: stop reason "length"). Truncated
    rollouts can have their mask (`mask_truncated_completions`) or reward
    (`zero_truncated_completions`) zeroed. A rollout that errored, or whose reward
    is not a finite number (NaN, infinity, or None as results.jsonl writes those),
    contributes no training signal: mask all 0, reward 0.0.

    `completion_logprobs` are the server's; a token it gave no logprob for (the
    environment's tokens, and a model token whose logprob is missing, null or not
    a finite number, live or read back from results.jsonl) has 0.0.

    `oai_tools` is the tool list of every rollout, or one list per rollout.
    `max_seq_len` of None, 0 or a negative number is no limit.
    """
    max_seq_len = _checked_max_seq_len(max_seq_len)
    n = len(prompts)
    if not (len(completions) == len(states) == len(rewards) == n):
        raise ValueError(
            f"prompts, completions, states and rewards must have one entry per rollout; got "
            f"{n}, {len(completions)}, {len(states)}, {len(rewards)}"
        )
    tools_by_rollout = _tools_by_rollout(oai_tools, n)
    out: dict[str, list[Any]] = {
        k: []
        for k in (
            "prompt_ids",
            "prompt_mask",
            "completion_ids",
            "completion_mask",
            "completion_logprobs",
            "rewards",
            "is_truncated",
        )
    }
    for k in range(n):
        state = states[k]
        tools = _rollout_tools(state, tools_by_rollout[k])
        p_ids, c_ids, c_mask, c_lps = _tokenize_rollout(
            processing_class,
            prompts[k],
            completions[k],
            state,
            tools,
            message_type,
            mask_env_responses,
        )
        truncated = bool(state.get("is_truncated"))
        if max_seq_len > 0 and len(p_ids) + len(c_ids) > max_seq_len:
            truncated = True
            keep = max(0, max_seq_len - len(p_ids))
            p_ids = p_ids[:max_seq_len]
            c_ids, c_mask, c_lps = c_ids[:keep], c_mask[:keep], c_lps[:keep]
        reward = _reward(rewards[k], k)
        if state.get("error") or not math.isfinite(reward):
            c_mask = [0] * len(c_ids)
            reward = 0.0
        if truncated and mask_truncated_completions:
            c_mask = [0] * len(c_ids)
        if truncated and zero_truncated_completions:
            reward = 0.0
        out["prompt_ids"].append(p_ids)
        out["prompt_mask"].append([0] * len(p_ids))
        out["completion_ids"].append(c_ids)
        out["completion_mask"].append(c_mask)
        out["completion_logprobs"].append(c_lps)
        out["rewards"].append(reward)
        out["is_truncated"].append(truncated)
    return ProcessedOutputs(**out)


__all__ = [
    "MISSING_LOGPROB",
    "LogprobCountError",
    "MissingTokenIdsError",
    "ServerTokenizer",
    "ServerTokenizerError",
    "TemplateAlignmentError",
    "Tokenizer",
    "process_env_results",
    "response_tokens",
]
