"""Token processing on awkward rollouts: silent environments, hand-played turns,
per-row tools, errored rollouts and completion-mode prompts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from scripted_models import numbered_policy

import vfgym as vf
from vfgym.engine.state import new_state
from vfgym.errors import MissingTokenIdsError
from vfgym.inference.server import ByteTokenizer, ModelServer
from vfgym.training.processing import ServerTokenizer

TOKENIZER = ByteTokenizer()


WANT_IDS = {"extra_body": {"return_token_ids": True}, "logprobs": True}


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a word up.",
            "parameters": {"type": "object", "properties": {}},
        },
    }
]


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    with ModelServer(numbered_policy).running() as running:
        yield running


class TwoTurnEnv(vf.MultiTurnEnv):
    """Two model turns; the environment says `info["reply"]` (no messages when absent)."""

    def is_completed(self, messages: Any, state: vf.State, **kwargs: Any) -> bool:
        return state["turn"] >= 2

    def env_response(self, messages: Any, state: vf.State, **kwargs: Any):
        reply = state["info"].get("reply")
        return ([reply] if reply else []), state


def rollout(server: ModelServer, rows: list[dict[str, Any]]) -> tuple[TwoTurnEnv, Any]:
    env = TwoTurnEnv(dataset=rows, max_turns=2)
    return env, env.evaluate_sync(server.sync_client(), "vfgym-test", sampling_args=WANT_IDS)


def model_tokens(processed: vf.ProcessedOutputs, k: int = 0) -> list[int]:
    pairs = zip(processed.completion_ids[k], processed.completion_mask[k], strict=True)
    return [tid for tid, m in pairs if m]


@pytest.mark.parametrize("remote", [False, True], ids=["local", "server-tokenizer"])
def test_back_to_back_model_turns_keep_the_assistant_header_between_them(
    server: ModelServer, remote: bool
) -> None:
    env, out = rollout(server, [{"prompt": [{"role": "user", "content": "go"}]}])
    completion = out.completion[0]
    assert [m["role"] for m in completion] == ["assistant", "assistant"]
    tokenizer = ServerTokenizer(server.base_url, "vfgym-test") if remote else TOKENIZER
    processed = env.process_env_results(
        out.prompt, out.completion, out.state, out.reward, tokenizer, mask_env_responses=True
    )
    ids = processed.prompt_ids[0] + processed.completion_ids[0]
    assert TOKENIZER.decode(ids) == TOKENIZER.apply_chat_template(
        out.prompt[0] + completion, tokenize=False
    )
    # the second turn was generated after the header the server rendered
    second = out.state[0]["responses"][1]
    prefix = second.model_extra["prompt_token_ids"]
    assert ids[: len(prefix)] == prefix
    generated = [t for r in out.state[0]["responses"] for t in r.choices[0].token_ids]
    assert model_tokens(processed) == generated


def test_row_tools_in_info_render_the_prompt_the_server_saw(server: ModelServer) -> None:
    reply = {"role": "user", "content": "again"}
    row = {
        "prompt": [{"role": "user", "content": "go"}],
        "info": {"oai_tools": TOOLS, "reply": reply},
    }
    env, out = rollout(server, [row])
    assert env.oai_tools is None
    processed = env.process_env_results(
        out.prompt, out.completion, out.state, out.reward, TOKENIZER, mask_env_responses=True
    )
    responses = out.state[0]["responses"]
    assert processed.prompt_ids[0] == responses[0].model_extra["prompt_token_ids"]
    ids = processed.prompt_ids[0] + processed.completion_ids[0]
    assert (
        ids[: len(responses[1].model_extra["prompt_token_ids"])]
        == (responses[1].model_extra["prompt_token_ids"])
    )


def test_an_errored_rollout_with_unrenderable_messages_does_not_sink_the_batch(
    server: ModelServer,
) -> None:
    good = {
        "prompt": [{"role": "user", "content": "go"}],
        "info": {"reply": {"role": "user", "content": "ok"}},
    }
    bad_reply = {"role": "narrator", "content": "the template knows no such role"}
    bad = {"prompt": [{"role": "user", "content": "go"}], "info": {"reply": bad_reply}}
    env, out = rollout(server, [good, bad])
    assert not out.state[0].get("error") and out.state[1].get("error")
    # refused where it was made, not left in the completion
    assert "env_response" in out.state[1]["error"]["message"]
    assert "narrator" in out.state[1]["error"]["message"]
    assert bad_reply not in out.completion[1]
    processed = env.process_env_results(
        out.prompt, out.completion, out.state, out.reward, TOKENIZER
    )
    assert processed.rewards[1] == 0.0
    assert not any(processed.completion_mask[1])
    assert processed.prompt_ids[1] == TOKENIZER.apply_chat_template(
        out.prompt[1], add_generation_prompt=True
    )
    alone = env.process_env_results(
        out.prompt[:1], out.completion[:1], out.state[:1], out.reward[:1], TOKENIZER
    )
    assert processed.completion_ids[0] == alone.completion_ids[0]
    # a rollout that did not error, whose completion holds such a message (played by
    # hand), still fails loudly
    broken = dict(out.state[1])
    broken.pop("error")
    completion = out.completion[1] + [bad_reply]
    with pytest.raises(ValueError, match="narrator"):
        env.process_env_results(out.prompt[1:], [completion], [broken], [0.0], TOKENIZER)


class TextEnv(vf.MultiTurnEnv):
    def is_completed(self, messages: Any, state: vf.State, **kwargs: Any) -> bool:
        return state["turn"] >= 2

    def env_response(self, messages: Any, state: vf.State, **kwargs: Any):
        return "\nENV\n", state


def test_hand_played_completion_mode_turns_are_refused_not_mislabelled() -> None:
    env = TextEnv(dataset=[{"prompt": "Q: go\n"}], message_type="completion")
    state = new_state("Q: go\n", "", "", "default", {}, 0)
    env.text_turn_sync(state, "model0")  # the Gym adapter's step: no server response
    env.text_turn_sync(state, "model1")
    with pytest.raises(MissingTokenIdsError, match="server response"):
        env.process_env_results(["Q: go\n"], [state["completion"]], [state], [1.0], TOKENIZER)


BOS = 7  # a reserved id of the byte vocabulary


class BosTokenizer(ByteTokenizer):
    """Adds a BOS id when asked for special tokens, as Llama-family tokenizers do."""

    def encode(self, text: str, add_special_tokens: bool = False, **kwargs: Any) -> list[int]:
        ids = super().encode(text, **kwargs)
        return [BOS, *ids] if add_special_tokens else ids


def test_completion_mode_prompt_carries_the_special_tokens_the_server_adds() -> None:
    """vLLM's /v1/completions encodes the prompt with special tokens (BOS) by default;
    the environment's text between model turns is mid-sequence and gets none."""

    def text_policy(prompt: str) -> str:
        return "model" + str(prompt.count("ENV"))

    env = TextEnv(dataset=[{"prompt": "Q: go\n"}], message_type="completion")
    with ModelServer(text_policy).running() as text_server:
        out = env.evaluate_sync(
            text_server.sync_client(),
            "vfgym-test",
            sampling_args={"logprobs": 1, "extra_body": {"return_token_ids": True}},
        )
    processed = env.process_env_results(
        out.prompt, out.completion, out.state, out.reward, BosTokenizer(), mask_env_responses=True
    )
    assert processed.prompt_ids[0] == [BOS, *TOKENIZER.encode("Q: go\n")]
    assert BOS not in processed.completion_ids[0]
