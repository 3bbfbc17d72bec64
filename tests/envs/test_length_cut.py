"""A model reply cut by `max_tokens` ends its rollout as truncated, so trainers can mask it.

Everything runs through the real `openai` client against the project's own server on
loopback; the server's default tokenizer spends one token per byte, so a reply of N
ASCII characters is N tokens and `max_tokens` below N cuts it.
"""

from __future__ import annotations

from typing import Any

import pytest

from vfgym.envs import STOP_REASONS, MultiTurnEnv, SingleTurnEnv
from vfgym.envs.multiturn_env import TRUNCATING
from vfgym.inference.server import ByteTokenizer, policies
from vfgym.types import Messages, State

LONG = "the answer is forty two"  # 23 tokens


GO = [{"role": "user", "content": "go"}]


WANT_IDS = {"extra_body": {"return_token_ids": True}, "logprobs": True}


class Rounds(MultiTurnEnv):
    """Ends on its own after `rounds` model turns; says "next" after the others."""

    def __init__(self, rounds: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rounds = rounds

    def is_completed(self, messages: Messages, state: State, **kwargs: Any) -> bool:
        return state["turn"] >= self.rounds

    def env_response(self, messages: Messages, state: State, **kwargs: Any):
        return [{"role": "user", "content": "next"}], state


def finish_reasons(state: State) -> list[str]:
    return [r.choices[0].finish_reason for r in state["responses"]]


def test_length_is_a_known_stop_reason_that_truncates() -> None:
    assert "length" in STOP_REASONS
    assert "length" in TRUNCATING


@pytest.mark.parametrize("message_type", ["chat", "completion"])
async def test_a_single_turn_reply_cut_by_max_tokens_is_truncated(
    model_server, message_type: str
) -> None:
    server = await model_server(policies.constant(LONG))
    env = SingleTurnEnv(dataset=[{"question": "q"}], message_type=message_type)
    prompt: Any = GO if message_type == "chat" else "go"
    _, state = await env.rollout(server.client(), "m", prompt, sampling_args={"max_tokens": 5})
    assert "error" not in state
    assert state["stop_reason"] == "length"
    assert state["is_truncated"] is True


async def test_a_single_turn_reply_that_fits_is_not_truncated(model_server) -> None:
    server = await model_server(policies.constant(LONG))
    env = SingleTurnEnv(dataset=[{"question": "q"}])
    _, state = await env.rollout(server.client(), "m", GO, sampling_args={"max_tokens": 100})
    assert finish_reasons(state) == ["stop"]
    assert (state["stop_reason"], state["is_truncated"]) == ("completed", False)


async def test_mask_truncated_completions_masks_a_cut_single_turn_reply(model_server) -> None:
    """The trainer's view: the cut rollout's mask is zeroed, the whole one's is kept."""
    server = await model_server(policies.by_turn([LONG], then=LONG))
    env = SingleTurnEnv(dataset=[{"question": "q"}])
    client = server.client()
    cut = await env.generate(
        {"prompt": [GO]}, client, "m", sampling_args={**WANT_IDS, "max_tokens": 5}
    )
    whole = await env.generate({"prompt": [GO]}, client, "m", sampling_args=WANT_IDS)
    processed = env.process_env_results(
        cut.prompt + whole.prompt,
        cut.completion + whole.completion,
        cut.state + whole.state,
        cut.reward + whole.reward,
        ByteTokenizer(),
        mask_truncated_completions=True,
    )
    assert processed.is_truncated == [True, False]
    assert processed.completion_mask[0] and not any(processed.completion_mask[0])
    assert any(processed.completion_mask[1])


async def test_a_cut_final_turn_of_a_multi_turn_rollout_is_truncated(model_server) -> None:
    server = await model_server(policies.constant(LONG))
    env = Rounds(2, dataset=[{"question": "q"}])
    _, state = await env.rollout(server.client(), "m", GO, sampling_args={"max_tokens": 5})
    assert state["turn"] == 2  # a cut middle turn does not end the rollout
    assert finish_reasons(state) == ["length", "length"]
    assert (state["stop_reason"], state["is_truncated"]) == ("length", True)


async def test_a_cut_middle_turn_alone_leaves_the_rollout_completed(model_server) -> None:
    server = await model_server(policies.by_turn([LONG, "ok"]))
    env = Rounds(2, dataset=[{"question": "q"}])
    _, state = await env.rollout(server.client(), "m", GO, sampling_args={"max_tokens": 5})
    assert finish_reasons(state) == ["length", "stop"]
    assert (state["stop_reason"], state["is_truncated"]) == ("completed", False)


async def test_a_cut_final_turn_at_the_turn_limit_keeps_max_turns(model_server) -> None:
    server = await model_server(policies.constant(LONG))
    env = Rounds(5, dataset=[{"question": "q"}], max_turns=2)
    _, state = await env.rollout(server.client(), "m", GO, sampling_args={"max_tokens": 5})
    assert (state["stop_reason"], state["is_truncated"]) == ("max_turns", True)


async def test_a_final_turn_cut_by_the_token_budget_says_token_budget(model_server) -> None:
    """The budget lowered the turn's max tokens: the budget is why it was cut."""
    server = await model_server(policies.constant(LONG))
    env = SingleTurnEnv(dataset=[{"question": "q"}], rollout_token_budget=7)
    _, state = await env.rollout(server.client(), "m", GO)
    assert finish_reasons(state) == ["length"]
    assert state["completion_tokens"] == 7
    assert (state["stop_reason"], state["is_truncated"]) == ("token_budget", True)
