"""Token processing defects found by feeding vfgym's rollouts to a trainer's eyes:
the sequence a trainer gets must be what the server saw, model ids and all."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from openai.types.chat import ChatCompletion
from scripted_models import numbered_policy
from qwen_template import (
    IM_END,
    FeedbackEnv,
    QwenStyleTokenizer,
    feedback,
    plain_policy,
    thinking_policy,
)

import vfgym as vf
from vfgym.errors import LogprobCountError
from vfgym.inference.server import ByteTokenizer, ModelServer
from vfgym.training.processing import response_tokens

TOKENIZER = ByteTokenizer()
WANT_IDS = {"extra_body": {"return_token_ids": True}, "logprobs": True}


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


MERGED = 10  # a reserved id of the byte vocabulary, standing for the two bytes "ve"
V, E = (TOKENIZER.encode(c)[0] for c in "ve")


def merge_ve(ids: list[int]) -> list[int]:
    """Byte ids with every "v" "e" pair merged into MERGED, as a BPE vocabulary would."""
    out: list[int] = []
    for tid in ids:
        if out and out[-1] == V and tid == E:
            out[-1] = MERGED
        else:
            out.append(tid)
    return out


class MergingQwenTokenizer(QwenStyleTokenizer):
    """Qwen's template over a vocabulary whose canonical encoding merges "ve"."""

    def text_ids(self, text: str) -> list[int]:
        return merge_ve(super().text_ids(text))

    def decode(self, ids: Any, skip_special_tokens: bool = False, **_: Any) -> str:
        spelled: list[int] = []
        for tid in ids:
            spelled += [V, E] if tid == MERGED else [tid]
        return super().decode(spelled, skip_special_tokens=skip_special_tokens)


class UnmergedSamplingTokenizer(MergingQwenTokenizer):
    """The server's side: prompts are rendered canonically, but the model samples "v" and
    "e" as two tokens (a non-canonical tokenization, which sampling produces) and ends
    its turn with `<|im_end|>`."""

    def encode(self, text: str, add_special_tokens: bool = False, **_: Any) -> list[int]:
        return [*QwenStyleTokenizer.text_ids(self, text), IM_END]


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
        out.prompt, out.completion, out.state, out.reward, merging, mask_env_responses=True
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


class PrefilledTextEnv(vf.MultiTurnEnv):
    """A completion-mode game that opens the completion with text of its own."""

    async def init_completion(self) -> Any:
        return "Board: ..x\n"

    def is_completed(self, messages: Any, state: vf.State, **kwargs: Any) -> bool:
        return state["turn"] >= 2

    def env_response(self, messages: Any, state: vf.State, **kwargs: Any):
        return "\nENV\n", state


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


# -- logprobs that do not pair with the ids -------------------------------------------------


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


def test_logprobs_that_do_not_pair_with_the_ids_are_an_error_not_zeros() -> None:
    """Three ids and two logprobs were read as three zeros: a trainer's importance
    ratios were then wrong with no sign of it."""
    assert response_tokens(_chat_completion([7, 8], [-0.5, -1.0])) == ([7, 8], [-0.5, -1.0])
    with pytest.raises(LogprobCountError, match="3 token ids but 2 logprobs"):
        response_tokens(_chat_completion([7, 8, 9], [-0.5, -1.0]))
