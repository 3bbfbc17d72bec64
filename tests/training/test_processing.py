"""Token-level outputs: ids come from the server, masks mark what the model generated."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vfgym as vf
from vfgym.errors import MissingTokenIdsError
from vfgym.inference.server import ByteTokenizer, ModelServer
from vfgym.training.processing import ServerTokenizer

TOKENIZER = ByteTokenizer()
WANT_IDS = {"extra_body": {"return_token_ids": True}, "logprobs": True}


class ScriptedEnv(vf.MultiTurnEnv):
    """Replies with the scripted environment texts in `info["env"]`, one per turn."""

    def is_completed(self, messages: Any, state: vf.State, **kwargs: Any) -> bool:
        return state["turn"] >= len(state["info"]["model"])

    def env_response(self, messages: Any, state: vf.State, **kwargs: Any):
        text = state["info"]["env"][state["turn"] - 1]
        return [{"role": "user", "content": text}], state


def scripted_policy(messages: list[dict[str, Any]], request: dict[str, Any]) -> Any:
    """Plays the scripted model texts; a turn given as a dict is a tool call."""
    script = json.loads(messages[0]["content"])
    turn = sum(1 for m in messages if m["role"] == "assistant")
    return script[turn]


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    with ModelServer(scripted_policy).running() as running:
        yield running


def run_scripted(server: ModelServer, model_turns: list[str], env_turns: list[str]) -> Any:
    env = ScriptedEnv(
        dataset=[
            {
                "prompt": [
                    {"role": "system", "content": json.dumps(model_turns)},
                    {"role": "user", "content": "start"},
                ],
                "info": {"model": model_turns, "env": env_turns},
            }
        ],
        max_turns=len(model_turns),
    )
    outputs = env.evaluate_sync(server.sync_client(), "vfgym-test", sampling_args=WANT_IDS)
    return env, outputs


def full_render(prompt: list[Any], completion: list[Any], tools: Any = None) -> str:
    return TOKENIZER.apply_chat_template(prompt + completion, tools=tools, tokenize=False)


texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(turns=st.lists(st.tuples(texts, texts), min_size=1, max_size=4))
def test_ids_decode_to_the_conversation_and_mask_marks_model_tokens(
    server: ModelServer, turns: list[tuple[str, str]]
) -> None:
    model_turns = [m for m, _ in turns]
    env_turns = [e for _, e in turns]
    env, out = run_scripted(server, model_turns, env_turns)
    state = out.state[0]
    assert not state.get("error"), state.get("error")
    processed = env.process_env_results(
        out.prompt, out.completion, out.state, out.reward, TOKENIZER, mask_env_responses=True
    )
    ids = processed.prompt_ids[0] + processed.completion_ids[0]
    assert TOKENIZER.decode(ids) == full_render(out.prompt[0], out.completion[0])
    # With env responses masked, the mask is 1 exactly on the ids the server generated.
    generated = [tid for r in state["responses"] for tid in r.choices[0].token_ids]
    masked = [
        t
        for t, m in zip(processed.completion_ids[0], processed.completion_mask[0], strict=True)
        if m
    ]
    assert masked == generated
    assert len(processed.completion_logprobs[0]) == len(processed.completion_ids[0])
    assert all(lp <= 0.0 for lp in processed.completion_logprobs[0])


def test_env_tokens_count_when_not_masked(server: ModelServer) -> None:
    env, out = run_scripted(server, ["a", "b"], ["x", "y"])
    processed = env.process_env_results(
        out.prompt, out.completion, out.state, out.reward, TOKENIZER, mask_env_responses=False
    )
    assert all(m == 1 for m in processed.completion_mask[0])
    assert processed.prompt_mask[0] == [0] * len(processed.prompt_ids[0])


def test_logprob_token_ids_are_read_when_token_ids_are_absent(server: ModelServer) -> None:
    env = ScriptedEnv(
        dataset=[
            {
                "prompt": [{"role": "system", "content": json.dumps(["hello"])}],
                "info": {"model": ["hello"], "env": ["ok"]},
            }
        ],
    )
    args = {"logprobs": True, "extra_body": {"return_tokens_as_token_ids": True}}
    out = env.evaluate_sync(server.sync_client(), "vfgym-test", sampling_args=args)
    processed = env.process_env_results(
        out.prompt, out.completion, out.state, out.reward, TOKENIZER
    )
    assert processed.completion_ids[0][:5] == TOKENIZER.encode("hello")


def test_tool_calls_are_taken_from_the_server_ids(server: ModelServer) -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
            }
        ],
    }
    script = [call, "5"]
    env = vf.ToolEnv(
        tools=[add],
        dataset=[
            {
                "prompt": [
                    {"role": "system", "content": json.dumps(script)},
                    {"role": "user", "content": "2+3?"},
                ]
            }
        ],
    )
    out = env.evaluate_sync(server.sync_client(), "vfgym-test", sampling_args=WANT_IDS)
    assert out.state[0]["tools_called"] == ["add"]
    processed = env.process_env_results(
        out.prompt, out.completion, out.state, out.reward, TOKENIZER, mask_env_responses=True
    )
    ids = processed.prompt_ids[0] + processed.completion_ids[0]
    assert TOKENIZER.decode(ids) == full_render(out.prompt[0], out.completion[0], env.oai_tools)
    tool_message = TOKENIZER.encode("5")
    assert tool_message == processed.completion_ids[0][-1:]  # the final answer, model-made
    assert processed.completion_mask[0][-1] == 1


class ReasoningStrippingTokenizer(ByteTokenizer):
    """A template that rewrites history: earlier assistant turns lose their text."""

    def apply_chat_template(self, conversation: Any = None, tools: Any = None, **kwargs: Any):
        rewritten = [
            {**m, "content": "[earlier turn]"} if m.get("role") == "assistant" else m
            for m in conversation
        ]
        return super().apply_chat_template(rewritten, tools, **kwargs)


def test_model_ids_survive_a_template_that_rewrites_history(server: ModelServer) -> None:
    env, out = run_scripted(server, ["first answer", "second"], ["next", "done"])
    processed = env.process_env_results(
        out.prompt,
        out.completion,
        out.state,
        out.reward,
        ReasoningStrippingTokenizer(),
        mask_env_responses=True,
    )
    masked = [
        t
        for t, m in zip(processed.completion_ids[0], processed.completion_mask[0], strict=True)
        if m
    ]
    assert TOKENIZER.decode(masked) == "first answersecond"


def test_server_tokenizer_matches_the_local_one(server: ModelServer) -> None:
    messages = [{"role": "user", "content": "héllo"}, {"role": "assistant", "content": "hi"}]
    with ServerTokenizer(server.base_url, "vfgym-test") as remote:
        assert remote.encode("héllo") == TOKENIZER.encode("héllo")
        assert remote.apply_chat_template(messages, add_generation_prompt=True) == (
            TOKENIZER.apply_chat_template(messages, add_generation_prompt=True)
        )
    env, out = run_scripted(server, ["a", "b"], ["x", "y"])
    with ServerTokenizer(server.base_url, "vfgym-test") as remote:
        via_server = env.process_env_results(
            out.prompt, out.completion, out.state, out.reward, remote
        )
    local = env.process_env_results(out.prompt, out.completion, out.state, out.reward, TOKENIZER)
    assert via_server == local


def test_missing_token_ids_is_a_clear_error(server: ModelServer) -> None:
    env = ScriptedEnv(
        dataset=[
            {
                "prompt": [{"role": "system", "content": json.dumps(["x"])}],
                "info": {"model": ["x"], "env": ["y"]},
            }
        ]
    )
    out = env.evaluate_sync(server.sync_client(), "vfgym-test")  # ids not asked for
    with pytest.raises(MissingTokenIdsError, match="return_token_ids"):
        env.process_env_results(out.prompt, out.completion, out.state, out.reward, TOKENIZER)


def test_max_seq_len_truncates_and_masks_or_zeroes(server: ModelServer) -> None:
    env, out = run_scripted(server, ["a" * 40, "b" * 40], ["x" * 10, "y"])
    full = env.process_env_results(out.prompt, out.completion, out.state, [1.0], TOKENIZER)
    total = len(full.prompt_ids[0]) + len(full.completion_ids[0])
    limit = len(full.prompt_ids[0]) + 20
    cut = env.process_env_results(
        out.prompt, out.completion, out.state, [1.0], TOKENIZER, max_seq_len=limit
    )
    assert total > limit
    assert len(cut.prompt_ids[0]) + len(cut.completion_ids[0]) == limit
    assert cut.completion_ids[0] == full.completion_ids[0][:20]
    assert cut.is_truncated == [True] and full.is_truncated == [False]
    assert cut.rewards == [1.0] and any(cut.completion_mask[0])
    masked = env.process_env_results(
        out.prompt,
        out.completion,
        out.state,
        [1.0],
        TOKENIZER,
        max_seq_len=limit,
        mask_truncated_completions=True,
    )
    assert not any(masked.completion_mask[0])
    zeroed = env.process_env_results(
        out.prompt,
        out.completion,
        out.state,
        [1.0],
        TOKENIZER,
        max_seq_len=limit,
        zero_truncated_completions=True,
    )
    assert zeroed.rewards == [0.0]


def test_completion_format(server: ModelServer) -> None:
    class TextEnv(vf.MultiTurnEnv):
        def is_completed(self, messages: Any, state: vf.State, **kwargs: Any) -> bool:
            return state["turn"] >= 2

        def env_response(self, messages: Any, state: vf.State, **kwargs: Any):
            return "\nENV\n", state

    def text_policy(prompt: str) -> str:
        return "model" + str(prompt.count("ENV"))

    env = TextEnv(dataset=[{"prompt": "Q: go\n"}], message_type="completion")
    with ModelServer(text_policy).running() as text_server:
        out = env.evaluate_sync(
            text_server.sync_client(),
            "vfgym-test",
            sampling_args={"logprobs": 1, "extra_body": {"return_token_ids": True}},
        )
    assert out.completion[0] == "model0\nENV\nmodel1"
    processed = env.process_env_results(
        out.prompt, out.completion, out.state, out.reward, TOKENIZER, mask_env_responses=True
    )
    ids = processed.prompt_ids[0] + processed.completion_ids[0]
    assert TOKENIZER.decode(ids) == "Q: go\nmodel0\nENV\nmodel1"
    masked = [
        t
        for t, m in zip(processed.completion_ids[0], processed.completion_mask[0], strict=True)
        if m
    ]
    assert TOKENIZER.decode(masked) == "model0model1"
