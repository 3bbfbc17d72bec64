"""Token processing under chat templates that are not prefix-stable.

Qwen3's template rewrites history: an assistant turn before the last user
message loses its `<think>...</think>` block, and every turn's `<|im_end|>` is
followed by a newline the model never sampled. The template below reproduces
both behaviours over a byte vocabulary, so the tests run offline against the
project's loopback server.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from openai.types.chat import ChatCompletion
from qwen_template import (
    IM_END,
    MERGED,
    FeedbackEnv,
    MergingQwenTokenizer,
    QwenStyleTokenizer,
    SamplingQwenStyleTokenizer,
    UnmergedSamplingTokenizer,
    feedback,
    plain_policy,
    render_qwen_style,
    thinking_policy,
)
from scripted_models import numbered_policy

import vfgym as vf
from vfgym.errors import LogprobCountError, TemplateAlignmentError
from vfgym.inference.server import ByteTokenizer, ModelServer
from vfgym.training.processing import ServerTokenizer, response_tokens

WANT_IDS = {"extra_body": {"return_token_ids": True}, "logprobs": True}


QWEN = QwenStyleTokenizer()


@pytest.fixture(scope="module")
def thinking_server() -> Iterator[ModelServer]:
    with ModelServer(thinking_policy, tokenizer=SamplingQwenStyleTokenizer()).running() as server:
        yield server


def play_feedback(server: ModelServer, turns: int = 3, sampling: dict[str, Any] | None = None):
    env = FeedbackEnv(
        dataset=[
            {
                "prompt": [
                    {"role": "system", "content": "Play."},
                    {"role": "user", "content": "Your move."},
                ]
            }
        ],
        max_turns=turns,
    )
    args = {**WANT_IDS, **(sampling or {})}
    out = env.evaluate_sync(server.sync_client(), "vfgym-test", sampling_args=args)
    assert not out.state[0].get("error"), out.state[0].get("error")
    return env, out


def env_ids(reply: str, *, after_cut: bool = False, more: bool = True) -> list[int]:
    """The template's ids between a model turn and the next: the newline after the
    model's `<|im_end|>` (or the whole `<|im_end|>` when the turn was cut), the user
    message, and the next assistant header."""
    text = ("<|im_end|>" if after_cut else "") + f"\n<|im_start|>user\n{reply}<|im_end|>\n"
    return QWEN.encode(text + ("<|im_start|>assistant\n" if more else ""))


def prompt_token_ids(response: Any) -> list[int]:
    return list(response.model_extra["prompt_token_ids"])


def sampled_ids_only(states: Sequence[vf.State]) -> list[vf.State]:
    """The states as a server that reports only the sampled ids leaves them (no
    `prompt_token_ids`): processing then has to place the environment's ids by the
    template itself, which is what these tests check. With the prompt ids, a
    rewritten history splits the rollout into exact samples instead (see
    test_processing_samples.py)."""
    stripped = []
    for state in states:
        responses = []
        for response in state["responses"]:
            copy = response.model_copy(deep=True)
            copy.model_extra.pop("prompt_token_ids", None)
            responses.append(copy)
        stripped.append({**state, "responses": responses})
    return stripped


def server_tokenizer(server: ModelServer, remote: bool) -> Any:
    return ServerTokenizer(server.base_url, "vfgym-test") if remote else QWEN


@pytest.mark.parametrize("remote", [False, True], ids=["local", "server-tokenizer"])
def test_stripped_reasoning_keeps_the_model_ids_and_places_the_env_ids(
    thinking_server: ModelServer, remote: bool
) -> None:
    env, out = play_feedback(thinking_server)
    responses = out.state[0]["responses"]
    assert [m["role"] for m in out.completion[0]] == ["assistant", "user"] * 3
    # the template did rewrite history: the second request no longer shows turn 0's plan
    assert "plan 0" not in QWEN.decode(prompt_token_ids(responses[1]))
    processed = env.process_env_results(
        out.prompt,
        out.completion,
        sampled_ids_only(out.state),
        out.reward,
        server_tokenizer(thinking_server, remote),
        mask_env_responses=True,
    )
    assert processed.prompt_ids[0] == prompt_token_ids(responses[0])
    want_ids: list[int] = []
    want_mask: list[int] = []
    want_logprobs: list[float] = []
    for k, response in enumerate(responses):
        generated = list(response.choices[0].token_ids)
        assert generated[-1] == IM_END  # the model ended its turn itself
        between = env_ids(feedback(k + 1), more=k + 1 < len(responses))
        want_ids += generated + between
        want_mask += [1] * len(generated) + [0] * len(between)
        want_logprobs += [e.logprob for e in response.choices[0].logprobs.content]
        want_logprobs += [0.0] * len(between)
    assert QWEN.decode(processed.completion_ids[0]) == QWEN.decode(want_ids)
    assert processed.completion_ids[0] == want_ids
    assert processed.completion_mask[0] == want_mask
    assert processed.completion_logprobs[0] == want_logprobs
    # what the server saw after each (rewritten) model turn is exactly the env ids
    for k in range(1, len(responses)):
        between = env_ids(feedback(k))
        assert prompt_token_ids(responses[k])[-len(between) :] == between


def test_a_turn_cut_by_max_tokens_leaves_the_end_of_turn_token_to_the_template(
    thinking_server: ModelServer,
) -> None:
    """Without a sampled `<|im_end|>`, the template's one is not the model's."""
    full = len(QWEN.encode(thinking_policy([]))) + 1  # with the end-of-turn token
    env, out = play_feedback(thinking_server, turns=2, sampling={"max_tokens": full - 2})
    responses = out.state[0]["responses"]
    assert [r.choices[0].finish_reason for r in responses] == ["length", "length"]
    processed = env.process_env_results(
        out.prompt,
        out.completion,
        sampled_ids_only(out.state),
        out.reward,
        QWEN,
        mask_env_responses=True,
    )
    first, second = (list(r.choices[0].token_ids) for r in responses)
    assert QWEN.decode(first).endswith("move ")  # cut inside the answer
    between = env_ids(feedback(1), after_cut=True)
    last = env_ids(feedback(2), after_cut=True, more=False)
    assert processed.completion_ids[0] == first + between + second + last
    assert processed.completion_mask[0] == (
        [1] * len(first) + [0] * len(between) + [1] * len(second) + [0] * len(last)
    )
    assert prompt_token_ids(responses[1])[-len(between) :] == between


class QuietFirstEnv(vf.MultiTurnEnv):
    """Says nothing after the first model turn, then answers with feedback."""

    def env_response(self, messages: Any, state: vf.State, **kwargs: Any):
        if state["turn"] == 1:
            return [], state
        return [{"role": "user", "content": feedback(state["turn"])}], state


def test_two_model_turns_stripped_by_one_user_message(thinking_server: ModelServer) -> None:
    """Back-to-back model turns both lose their reasoning once feedback follows them."""
    env = QuietFirstEnv(dataset=[{"prompt": [{"role": "user", "content": "go"}]}], max_turns=3)
    out = env.evaluate_sync(thinking_server.sync_client(), "vfgym-test", sampling_args=WANT_IDS)
    roles = [m["role"] for m in out.completion[0]]
    assert roles == ["assistant", "assistant", "user", "assistant", "user"]
    responses = out.state[0]["responses"]
    assert "plan 1" not in QWEN.decode(prompt_token_ids(responses[2]))
    processed = env.process_env_results(
        out.prompt,
        out.completion,
        sampled_ids_only(out.state),
        out.reward,
        QWEN,
        mask_env_responses=True,
    )
    first, second, third = (list(r.choices[0].token_ids) for r in responses)
    header = QWEN.encode("\n<|im_start|>assistant\n")
    middle = env_ids(feedback(2))
    last = env_ids(feedback(3), more=False)
    assert processed.completion_ids[0] == first + header + second + middle + third + last
    assert processed.completion_mask[0] == (
        [1] * len(first)
        + [0] * len(header)
        + [1] * len(second)
        + [0] * len(middle)
        + [1] * len(third)
        + [0] * len(last)
    )
    sequence = processed.prompt_ids[0] + processed.completion_ids[0]
    second_prompt = prompt_token_ids(responses[1])  # nothing rewritten yet
    assert sequence[: len(second_prompt)] == second_prompt
    assert prompt_token_ids(responses[2])[-len(middle) :] == middle


class ReclosingTokenizer(QwenStyleTokenizer):
    """Strips reasoning like Qwen3 and also ends a final assistant turn with another token."""

    def render(
        self, conversation: Sequence[dict[str, Any]], tools: Any, add_generation_prompt: bool
    ) -> str:
        text = render_qwen_style(conversation, tools, add_generation_prompt)
        if conversation[-1]["role"] == "assistant" and not add_generation_prompt:
            text = text.removesuffix("<|im_end|>\n") + "<|endoftext|>"
        return text


def test_a_template_that_recloses_a_rewritten_turn_is_refused(
    thinking_server: ModelServer,
) -> None:
    env, out = play_feedback(thinking_server, turns=2)
    with pytest.raises(TemplateAlignmentError, match="closes an assistant turn the same way"):
        env.process_env_results(
            out.prompt,
            out.completion,
            sampled_ids_only(out.state),
            out.reward,
            ReclosingTokenizer(),
        )


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def tool_policy(messages: list[dict[str, Any]]) -> Any:
    """Thinks, calls `add`, thinks again and answers: all after the one user query."""
    if not any(m["role"] == "tool" for m in messages):
        call = {
            "id": "c1",
            "type": "function",
            "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
        }
        return {
            "role": "assistant",
            "content": "<think>\nuse the tool\n</think>\n\n",
            "tool_calls": [call],
        }
    return "<think>\nthe tool said 5\n</think>\n\n5"


@pytest.mark.parametrize("scenario", ["tool-turns-keep-reasoning", "no-reasoning"])
def test_every_request_prefix_is_rebuilt_when_the_template_allows(scenario: str) -> None:
    """Qwen3 keeps the reasoning of turns after the last user query (tool chains) and
    has nothing to strip from turns without reasoning: there the sequence must be
    exactly what the server tokenized for each request, newline glue included."""
    if scenario == "tool-turns-keep-reasoning":
        policy: Any = tool_policy
        env: vf.MultiTurnEnv = vf.ToolEnv(
            tools=[add], dataset=[{"prompt": [{"role": "user", "content": "2+3?"}]}]
        )
    else:
        policy = plain_policy
        env = FeedbackEnv(dataset=[{"prompt": [{"role": "user", "content": "go"}]}], max_turns=3)
    with ModelServer(policy, tokenizer=SamplingQwenStyleTokenizer()).running() as server:
        out = env.evaluate_sync(server.sync_client(), "vfgym-test", sampling_args=WANT_IDS)
    state = out.state[0]
    assert not state.get("error"), state.get("error")
    responses = state["responses"]
    assert len(responses) >= 2
    processed = env.process_env_results(
        out.prompt, out.completion, out.state, out.reward, QWEN, mask_env_responses=True
    )
    ids = processed.prompt_ids[0] + processed.completion_ids[0]
    for response in responses:
        prefix = prompt_token_ids(response)
        assert ids[: len(prefix)] == prefix
    generated = [t for r in responses for t in r.choices[0].token_ids]
    pairs = zip(processed.completion_ids[0], processed.completion_mask[0], strict=True)
    assert [t for t, m in pairs if m] == generated
    # the whole conversation rendered at once is the sequence (nothing was rewritten),
    # but for the newline after a final model turn, which no request ever contained
    decoded = QWEN.decode(ids)
    rendered = render_qwen_style(out.prompt[0] + out.completion[0], env.oai_tools, False)
    assert rendered.startswith(decoded) and rendered[len(decoded) :] in ("", "\n")


TOKENIZER = ByteTokenizer()


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    with ModelServer(numbered_policy).running() as running:
        yield running


def model_tokens(processed: vf.ProcessedOutputs, k: int = 0) -> list[int]:
    pairs = zip(processed.completion_ids[k], processed.completion_mask[k], strict=True)
    return [tid for tid, m in pairs if m]


class IntroEnv(vf.MultiTurnEnv):
    """Opens the completion with a message of its own (`init_completion`), then gives feedback."""

    async def init_completion(self) -> Any:
        return [{"role": "user", "content": "intro"}]

    def is_completed(self, messages: Any, state: vf.State, **kwargs: Any) -> bool:
        return state["turn"] >= 2

    def env_response(self, messages: Any, state: vf.State, **kwargs: Any):
        return [{"role": "user", "content": "feedback"}], state


class PrefilledTextEnv(vf.MultiTurnEnv):
    """A completion-mode game that opens the completion with text of its own."""

    async def init_completion(self) -> Any:
        return "Board: ..x\n"

    def is_completed(self, messages: Any, state: vf.State, **kwargs: Any) -> bool:
        return state["turn"] >= 2

    def env_response(self, messages: Any, state: vf.State, **kwargs: Any):
        return "\nENV\n", state


def _chat_completion(ids: list[int], logprobs: list[float]) -> ChatCompletion:
    """A chat completion as the openai client parses one: `return_token_ids` ids, and
    one logprob entry per element of `logprobs`."""
    return ChatCompletion.model_validate(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "ab"},
                    "logprobs": {
                        "content": [
                            {"token": "x", "logprob": v, "bytes": None, "top_logprobs": []}
                            for v in logprobs
                        ]
                    },
                    "token_ids": ids,
                }
            ],
        }
    )


def test_a_completion_that_opens_with_environment_messages_is_the_sequence_the_server_saw(
    server: ModelServer,
) -> None:
    env = IntroEnv(dataset=[{"prompt": [{"role": "user", "content": "go"}]}], max_turns=2)
    out = env.evaluate_sync(server.sync_client(), "vfgym-test", sampling_args=WANT_IDS)
    state = out.state[0]
    assert not state.get("error"), state.get("error")
    assert [m["role"] for m in out.completion[0]] == ["user", "assistant", "user", "assistant"]
    processed = env.process_env_results(
        out.prompt, out.completion, out.state, out.reward, TOKENIZER, mask_env_responses=True
    )
    ids = processed.prompt_ids[0] + processed.completion_ids[0]
    assert TOKENIZER.decode(ids) == TOKENIZER.apply_chat_template(
        out.prompt[0] + out.completion[0], tokenize=False
    )
    for response in state["responses"]:
        prefix = response.model_extra["prompt_token_ids"]
        assert ids[: len(prefix)] == prefix
    # the prompt is the first request's rendering, as the module docstring promises
    assert processed.prompt_ids[0] == state["responses"][0].model_extra["prompt_token_ids"]
    generated = [t for r in state["responses"] for t in r.choices[0].token_ids]
    assert model_tokens(processed) == generated


@pytest.mark.parametrize("policy", [plain_policy, thinking_policy], ids=["plain", "thinking"])
def test_a_non_canonical_sampled_tokenization_keeps_the_newline_after_the_end_of_turn(
    policy: Any,
) -> None:
    """The model's own ids never line up with the template's re-tokenization of its text;
    the ids the template adds after the sampled `<|im_end|>` are still the environment's."""
    merging = MergingQwenTokenizer()
    env = FeedbackEnv(dataset=[{"prompt": [{"role": "user", "content": "go"}]}], max_turns=2)
    with ModelServer(policy, tokenizer=UnmergedSamplingTokenizer()).running() as server:
        out = env.evaluate_sync(server.sync_client(), "vfgym-test", sampling_args=WANT_IDS)
    state = out.state[0]
    assert not state.get("error"), state.get("error")
    responses = state["responses"]
    processed = env.process_env_results(
        out.prompt,
        out.completion,
        sampled_ids_only(out.state),
        out.reward,
        merging,
        mask_env_responses=True,
    )
    want_ids: list[int] = []
    want_mask: list[int] = []
    for k, response in enumerate(responses):
        generated = list(response.choices[0].token_ids)
        assert MERGED not in generated and generated[-1] == IM_END
        text = f"\n<|im_start|>user\n{feedback(k + 1)}<|im_end|>\n"
        between = merging.encode(text + ("<|im_start|>assistant\n" if k == 0 else ""))
        want_ids += generated + between
        want_mask += [1] * len(generated) + [0] * len(between)
    assert processed.completion_ids[0] == want_ids
    assert processed.completion_mask[0] == want_mask
    # what the server saw after the first model turn ends with exactly those env ids
    between = merging.encode(
        f"\n<|im_start|>user\n{feedback(1)}<|im_end|>\n<|im_start|>assistant\n"
    )
    assert list(responses[1].model_extra["prompt_token_ids"])[-len(between) :] == between


def test_completion_mode_text_before_the_first_model_turn_is_part_of_the_prompt() -> None:
    def text_policy(prompt: str) -> str:
        return "model" + str(prompt.count("ENV"))

    env = PrefilledTextEnv(dataset=[{"prompt": "Q: go\n"}], message_type="completion")
    with ModelServer(text_policy).running() as text_server:
        out = env.evaluate_sync(
            text_server.sync_client(),
            "vfgym-test",
            sampling_args={"logprobs": 1, "extra_body": {"return_token_ids": True}},
        )
    state = out.state[0]
    assert out.completion[0] == "Board: ..x\nmodel0\nENV\nmodel1"
    processed = env.process_env_results(
        out.prompt, out.completion, out.state, out.reward, TOKENIZER, mask_env_responses=True
    )
    first_prompt = state["responses"][0].choices[0].model_extra["prompt_token_ids"]
    assert processed.prompt_ids[0] == first_prompt
    ids = processed.prompt_ids[0] + processed.completion_ids[0]
    assert TOKENIZER.decode(ids) == "Q: go\nBoard: ..x\nmodel0\nENV\nmodel1"
    assert TOKENIZER.decode(model_tokens(processed)) == "model0model1"


def test_logprobs_that_do_not_pair_with_the_ids_are_an_error_not_zeros() -> None:
    """Three ids and two logprobs were read as three zeros: a trainer's importance
    ratios were then wrong with no sign of it."""
    assert response_tokens(_chat_completion([7, 8], [-0.5, -1.0])) == ([7, 8], [-0.5, -1.0])
    with pytest.raises(LogprobCountError, match="3 token ids but 2 logprobs"):
        response_tokens(_chat_completion([7, 8, 9], [-0.5, -1.0]))
