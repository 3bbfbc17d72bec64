"""Token-exact mode against vfgym's loopback server: what the rollout sees, what is sent,
and that every turn's ids are exactly the sequence a trainer gets.

The loopback server tokenizes with the tokenizer it is given; a "merging" vocabulary
(`MergingQwenTokenizer`, whose canonical encoding joins "ve" into one id while the
model samples the two bytes apart) makes a reply's text re-tokenize differently from
its sampled ids, the drift a real BPE model shows.
"""

from __future__ import annotations

from typing import Any

import pytest
from qwen_template import (
    IM_END,
    MERGED,
    FeedbackEnv,
    QwenStyleTokenizer,
    SamplingQwenStyleTokenizer,
    UnmergedSamplingTokenizer,
)

import vfgym as vf
from vfgym.inference.server import ByteTokenizer, ModelServer
from vfgym.inference.server.tokenizer import content_text, render_tool_calls
from vfgym.inference.tokens import completion_sampling_args
from vfgym.inference.tokens.samples import server_ids


def render_chatml(messages: Any, tools: Any, add_generation_prompt: bool) -> str:
    """Plain ChatML (the tiny vLLM model's template, tool calls in the byte notation):
    every turn rendered the same whatever follows it."""
    text = "".join(
        f"<|im_start|>{m['role']}\n{content_text(m.get('content'))}"
        f"{render_tool_calls(m.get('tool_calls'))}<|im_end|>\n"
        for m in messages
    )
    return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


class ChatMLTokenizer(QwenStyleTokenizer):
    """The client's side: the byte vocabulary with ChatML's two special tokens."""

    def render(self, conversation: Any, tools: Any, add_generation_prompt: bool) -> str:
        return render_chatml(conversation, tools, add_generation_prompt)


class SamplingChatMLTokenizer(SamplingQwenStyleTokenizer):
    """The server's side: a reply's ids end with the `<|im_end|>` the model sampled."""

    def render(self, conversation: Any, tools: Any, add_generation_prompt: bool) -> str:
        return render_chatml(conversation, tools, add_generation_prompt)


class MergingChatMLTokenizer(UnmergedSamplingTokenizer):
    """The server's side over the merging vocabulary: prompts are rendered canonically
    ("ve" as one id), replies are sampled byte by byte."""

    def render(self, conversation: Any, tools: Any, add_generation_prompt: bool) -> str:
        return render_chatml(conversation, tools, add_generation_prompt)


WANT_IDS = {"extra_body": {"return_token_ids": True}, "logprobs": True}
ROWS = [{"prompt": [{"role": "user", "content": "Move, and move again."}]}]


def text_turn(prompt: Any) -> int:
    """Which model turn a request asks for: the model's earlier turns in its prompt,
    counted in either form the server hands a policy (messages, or rendered text)."""
    if isinstance(prompt, str):
        return prompt.count("<|im_start|>assistant") - 1
    return sum(1 for m in prompt if m["role"] == "assistant")


def moving_policy(prompt: Any) -> str:
    """Replies with text holding "ve", which the merging vocabulary encodes as one id."""
    return f"move {text_turn(prompt)}, above"


def thinking_text_policy(prompt: Any) -> str:
    turn = text_turn(prompt)
    return f"<think>\nplan {turn}\n</think>\n\nmove {turn}"


def feedback_env(mode: str, turns: int = 3) -> FeedbackEnv:
    env = FeedbackEnv(dataset=ROWS, max_turns=turns)
    env.token_mode = mode  # type: ignore[assignment]
    return env


def assert_every_turn_exact(processed: vf.ProcessedOutputs, state: vf.State) -> None:
    """Each turn's prompt and sampled ids, as the server reported them, are a prefix of
    the row the turn belongs to; the mask is 1 exactly on sampled ids."""
    rows = [k for k, index in enumerate(processed.rollout_index) if index == 0]
    responses = state["responses"]
    assert len(rows) == state["token_samples"]
    sampled_all: list[int] = []
    for k in rows:
        pairs = zip(processed.completion_ids[k], processed.completion_mask[k], strict=True)
        sampled_all += [t for t, m in pairs if m]
        assert processed.completion_logprobs[k] and len(processed.completion_logprobs[k]) == len(
            processed.completion_ids[k]
        )
    position = 0
    for response in responses:
        reported = server_ids(response)
        assert reported is not None
        prompt_ids, generated = reported
        seen = prompt_ids + generated
        assert any(
            (processed.prompt_ids[k] + processed.completion_ids[k])[: len(seen)] == seen
            for k in rows
        ), "a turn whose ids are no row's prefix"
        assert sampled_all[position : position + len(generated)] == generated
        position += len(generated)
    assert position == len(sampled_all)  # nothing but sampled ids has mask 1


def test_exact_mode_keeps_one_exact_sequence_where_chat_mode_drifts() -> None:
    with ModelServer(moving_policy, tokenizer=MergingChatMLTokenizer()).running() as server:
        chat_env, exact_env = feedback_env("chat"), feedback_env("exact")
        chat = chat_env.evaluate_sync(server.sync_client(), "vfgym-test", sampling_args=WANT_IDS)
        exact = exact_env.evaluate_sync(
            server.sync_client(), "vfgym-test", sampling_args={"max_tokens": 40}
        )
        completions_sent = [r for r in server.requests if "prompt" in r]
    chat_state, exact_state = chat.state[0], exact.state[0]
    assert chat_state.get("error") is None and exact_state.get("error") is None
    # The same conversation either way; the rubric sees the same messages.
    assert chat.completion == exact.completion
    # Chat mode: the server re-tokenized "above" canonically (merged) on turn 2, not as
    # sampled, and vfgym says so instead of mislabelling the turns.
    assert MERGED in server_ids(chat_state["responses"][1])[0]  # type: ignore[index]
    assert chat_state["token_mode"] == "chat" and chat_state["token_samples"] == 3
    # Exact mode: the ids went back as sampled, as a token-id prompt, one sample.
    assert exact_state["token_mode"] == "exact" and exact_state["token_samples"] == 1
    assert len(completions_sent) == 3
    assert all(isinstance(r["prompt"], list) for r in completions_sent)
    assert all(r["return_token_ids"] is True for r in completions_sent)
    for env, out in ((chat_env, chat), (exact_env, exact)):
        processed = env.process_env_results(
            out.prompt,
            out.completion,
            out.state,
            out.reward,
            ChatMLTokenizer(),
            mask_env_responses=True,
        )
        assert_every_turn_exact(processed, out.state[0])
    assert processed.rollout_index == [0]  # (exact mode's)


def test_the_newline_the_template_adds_after_a_sampled_end_of_turn_is_bridged() -> None:
    with ModelServer(moving_policy, tokenizer=SamplingChatMLTokenizer()).running() as server:
        env = feedback_env("exact", turns=2)
        out = env.evaluate_sync(server.sync_client(), "vfgym-test")
    first, second = out.state[0]["responses"]
    sampled = list(first.choices[0].token_ids)
    assert sampled[-1] == IM_END
    sent = server_ids(second)[0]  # type: ignore[index]
    prefix = server_ids(first)[0] + sampled  # type: ignore[index]
    assert sent[: len(prefix)] == prefix
    bridge = QwenStyleTokenizer().decode(sent[len(prefix) :])
    assert bridge == "\n<|im_start|>user\nmove 0 noted<|im_end|>\n<|im_start|>assistant\n"


def test_a_template_that_rewrites_the_past_splits_the_rollout_into_exact_samples() -> None:
    with ModelServer(thinking_text_policy, tokenizer=SamplingQwenStyleTokenizer()).running() as s:
        env = feedback_env("exact")
        out = env.evaluate_sync(s.sync_client(), "vfgym-test")
    state = out.state[0]
    assert state.get("error") is None
    # Qwen3-style: a turn's reasoning is dropped once a user message follows it (and a last
    # turn gets an empty think block), so no sequence holds both what was sampled and
    # what the template shows the next turn: each turn is a sample of its own.
    assert state["token_samples"] == 3
    processed = env.process_env_results(
        out.prompt,
        out.completion,
        out.state,
        out.reward,
        QwenStyleTokenizer(),
        mask_env_responses=True,
    )
    assert processed.rollout_index == [0, 0, 0]
    assert processed.rewards == [out.reward[0]] * 3
    assert_every_turn_exact(processed, state)
    assert "plan 0" not in QwenStyleTokenizer().decode(processed.prompt_ids[1])


def adder_policy(prompt: Any) -> str:
    """Calls `add` in hermes format, then answers with what the tool said."""
    if isinstance(prompt, str) and "<|tool|>" in prompt:
        return "The sum is " + prompt.rsplit("<|tool|>", 1)[1].split("<|end|>")[0]
    return 'Adding.<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_tool_calls_are_read_from_the_sampled_text_and_answered() -> None:
    env = vf.ToolEnv(tools=[add], dataset=[{"prompt": [{"role": "user", "content": "2+3?"}]}])
    env.token_mode = "exact"
    with ModelServer(adder_policy, tokenizer=ByteTokenizer()).running() as server:
        out = env.evaluate_sync(server.sync_client(), "vfgym-test")
    state = out.state[0]
    assert state.get("error") is None, state.get("error")
    call_turn, tool_turn, answer = out.completion[0]
    assert call_turn["content"] == "Adding."
    (call,) = call_turn["tool_calls"]
    assert call["function"] == {"name": "add", "arguments": '{"a": 2, "b": 3}'}
    assert tool_turn == {"role": "tool", "content": "5", "tool_call_id": call["id"]}
    assert answer["content"] == "The sum is 5"
    assert state["responses"][0].choices[0].finish_reason == "tool_calls"
    assert state["token_samples"] == 1
    processed = env.process_env_results(
        out.prompt, out.completion, out.state, out.reward, ByteTokenizer(), mask_env_responses=True
    )
    assert_every_turn_exact(processed, state)


def test_a_stop_string_keeps_the_sampled_ids_and_the_sequence_exact() -> None:
    with ModelServer(moving_policy, tokenizer=SamplingChatMLTokenizer()).running() as server:
        env = feedback_env("exact")
        out = env.evaluate_sync(server.sync_client(), "vfgym-test", sampling_args={"stop": [","]})
    state = out.state[0]
    assert [m["content"] for m in out.completion[0] if m["role"] == "assistant"] == [
        "move 0",
        "move 1",
        "move 2",
    ]
    assert state["token_samples"] == 1
    processed = env.process_env_results(
        out.prompt,
        out.completion,
        out.state,
        out.reward,
        ChatMLTokenizer(),
        mask_env_responses=True,
    )
    assert_every_turn_exact(processed, state)


def test_chat_only_sampling_args_are_refused_with_what_to_use_instead() -> None:
    with pytest.raises(ValueError, match="structured outputs"):
        completion_sampling_args({"tool_choice": "required"})
    with pytest.raises(ValueError, match="structured_outputs"):
        completion_sampling_args({"response_format": {"type": "json_object"}})
    args = completion_sampling_args(
        {"max_completion_tokens": 9, "logprobs": True, "top_logprobs": 3, "tool_choice": "auto"}
    )
    assert args == {"max_tokens": 9, "logprobs": 3, "extra_body": {"return_token_ids": True}}


def test_auto_mode_sends_messages_to_a_server_that_is_not_vllm() -> None:
    with ModelServer(moving_policy).running() as server:
        out = feedback_env("auto", turns=1).evaluate_sync(server.sync_client(), "vfgym-test")
        assert all("messages" in r for r in server.requests)
    assert out.state[0]["token_mode"] == "chat"


def test_an_unknown_token_mode_errors_the_rollout_saying_which_there_are() -> None:
    with ModelServer(moving_policy).running() as server:
        out = feedback_env("tokens", turns=1).evaluate_sync(server.sync_client(), "vfgym-test")
    assert "token_mode must be one of 'auto', 'exact', 'chat'" in out.state[0]["error"]["message"]


def botched_call_policy(prompt: Any) -> str:
    return '<tool_call>{"name": "add", "arguments": {"a": 2,</tool_call>'


def test_a_tool_call_that_does_not_parse_is_kept_as_content_and_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    env = vf.ToolEnv(tools=[add], dataset=[{"prompt": [{"role": "user", "content": "2+3?"}]}])
    env.token_mode = "exact"
    with ModelServer(botched_call_policy, tokenizer=ByteTokenizer()).running() as server:
        out = env.evaluate_sync(server.sync_client(), "vfgym-test")
    (reply,) = out.completion[0]
    assert reply["content"] == botched_call_policy("") and "tool_calls" not in reply
    response = out.state[0]["responses"][0]
    assert "does not parse" in response.model_extra["tool_call_parse_error"]
    assert "kept as the message content" in caplog.text
