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

This module assembles `process_env_results`' output, rollout by rollout; the
tokenizers are in `tokenizers.py`, the reading of the server's ids in
`response_ids.py` and the template alignment in `alignment.py`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

from vfgym.errors import (
    LogprobCountError,
    MissingTokenIdsError,
    ServerTokenizerError,
    TemplateAlignmentError,
)
from vfgym.inference.tokens.samples import exact_samples, server_ids
from vfgym.training.alignment import chat_ids, template_ids
from vfgym.training.response_ids import (
    MISSING_LOGPROB,
    response_field,
    response_text,
    response_tokens,
)
from vfgym.training.tokenizers import ServerTokenizer, Tokenizer
from vfgym.types import ChatCompletionToolParam, Messages, MessageType, ProcessedOutputs, State

logger = logging.getLogger(__name__)


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
    prompt_ids = chat_ids(tokenizer, conversation, tools, True)
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
                add_env(template_ids(tokenizer, conversation, 0, tools, True, seq, generated))
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
        add_env(template_ids(tokenizer, conversation, j - i, tools, more, seq, generated))
        generated = None
        i = j
    return prompt_ids, ids, mask, logprobs


def _process_server_ids(
    tokenizer: Tokenizer,
    prompt: list[Any],
    completion: list[Any],
    state: State,
    tools: Any,
    mask_env: bool,
    groups: list[list[int]],
) -> list[tuple[list[int], list[int], list[int], list[float]]]:
    """The rollout's exact samples, built from the ids the server reported.

    Each response's `prompt_token_ids` are what the model was conditioned on; within
    a sample every turn's prompt extends the previous turn's prompt and sampled ids,
    and what it adds (the end of the turn the model did not sample, the environment's
    messages, the next header) is the environment's. Nothing is rendered, so nothing
    can drift, except the environment's messages after the last model turn, which no
    request carried: those are rendered with the tokenizer after the last sample.
    """
    responses = list(state.get("responses") or [])
    env_mask = 0 if mask_env else 1
    rows: list[tuple[list[int], list[int], list[int], list[float]]] = []
    sequence: list[int] = []
    generated: list[int] = []
    for group in groups:
        prompt_ids: list[int] | None = None
        ids: list[int] = []
        mask: list[int] = []
        logprobs: list[float] = []
        for index in group:
            reported = server_ids(responses[index])
            assert reported is not None  # (`exact_samples` checked every response)
            sent, _ = reported
            if prompt_ids is None:
                prompt_ids = sent
            else:
                bridge = sent[len(sequence) :]
                ids += bridge
                mask += [env_mask] * len(bridge)
                logprobs += [0.0] * len(bridge)
            generated, values = response_tokens(responses[index])
            ids += generated
            mask += [1] * len(generated)
            logprobs += values
            sequence = sent + generated
        rows.append((prompt_ids or [], ids, mask, logprobs))
    last_model_turn = max(
        (i for i, m in enumerate(completion) if m.get("role") == "assistant"), default=-1
    )
    trailing = len(completion) - last_model_turn - 1
    if rows and trailing and last_model_turn >= 0:
        conversation = [*prompt, *completion]
        try:
            env_ids = template_ids(
                tokenizer, conversation, trailing, tools, False, sequence, generated
            )
        except (TemplateAlignmentError, ServerTokenizerError) as exc:
            logger.warning(
                "the environment's %d message(s) after the last model turn are left out of "
                "the training data: %s",
                trailing,
                exc,
            )
        else:
            last = rows[-1]
            rows[-1] = (
                last[0],
                last[1] + env_ids,
                last[2] + [env_mask] * len(env_ids),
                last[3] + [0.0] * len(env_ids),
            )
    return rows


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
        position = start + len(response_text(response))
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
) -> list[tuple[list[int], list[int], list[int], list[float]]]:
    """One rollout's samples: prompt ids, completion ids, mask and logprobs of each.

    A rollout is one sample unless the server's own ids (vLLM's `prompt_token_ids`)
    show it saw another history than the sample holds: then each exact part is one
    (see `vfgym.inference.tokens.samples`). A rollout that errored is often one
    whose messages the template cannot render (that is why the server refused it);
    it carries no training signal anyway, so it becomes an empty completion instead
    of failing the batch.
    """
    try:
        _check_message_type(prompt, completion, message_type)
        if message_type == "chat":
            groups = exact_samples(state.get("responses") or [])
            if groups:
                return _process_server_ids(
                    tokenizer, list(prompt), list(completion), state, tools, mask_env, groups
                )
            return [
                _process_chat(tokenizer, list(prompt), list(completion), state, tools, mask_env)
            ]
        return [_process_text(tokenizer, str(prompt), str(completion), state, mask_env)]
    except Exception as exc:
        if not state.get("error"):
            raise
        logger.warning("errored rollout kept with an empty completion: %s", exc)
    try:
        if message_type == "chat":
            return [(chat_ids(tokenizer, list(prompt), tools, True), [], [], [])]
        if isinstance(prompt, str):
            return [(list(tokenizer.encode(prompt, add_special_tokens=True)), [], [], [])]
    except Exception:
        pass
    return [([], [], [], [])]


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

    There is one row per rollout, unless the server's own ids (`prompt_token_ids`,
    which vLLM returns with `return_token_ids`) show that a later turn was generated
    from a history other than the row's ids (chat mode re-tokenizing a reply's text,
    a template rewriting the past): such a rollout gives one exact row per part, and
    `rollout_index` says which rollout every row came from (rewards are copied).

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
            "rollout_index",
        )
    }
    for k in range(n):
        state = states[k]
        tools = _rollout_tools(state, tools_by_rollout[k])
        samples = _tokenize_rollout(
            processing_class,
            prompts[k],
            completions[k],
            state,
            tools,
            message_type,
            mask_env_responses,
        )
        reward = _reward(rewards[k], k)
        for p_ids, c_ids, c_mask, c_lps in samples:
            truncated = bool(state.get("is_truncated"))
            if max_seq_len > 0 and len(p_ids) + len(c_ids) > max_seq_len:
                truncated = True
                keep = max(0, max_seq_len - len(p_ids))
                p_ids = p_ids[:max_seq_len]
                c_ids, c_mask, c_lps = c_ids[:keep], c_mask[:keep], c_lps[:keep]
            row_reward = reward
            if state.get("error") or not math.isfinite(reward):
                c_mask = [0] * len(c_ids)
                row_reward = 0.0
            if truncated and mask_truncated_completions:
                c_mask = [0] * len(c_ids)
            if truncated and zero_truncated_completions:
                row_reward = 0.0
            out["prompt_ids"].append(p_ids)
            out["prompt_mask"].append([0] * len(p_ids))
            out["completion_ids"].append(c_ids)
            out["completion_mask"].append(c_mask)
            out["completion_logprobs"].append(c_lps)
            out["rewards"].append(row_reward)
            out["is_truncated"].append(truncated)
            out["rollout_index"].append(k)
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
    "response_field",
    "response_tokens",
]
