"""Model-client edges found by probing over real loopback HTTP with the real openai client."""

from __future__ import annotations

import math
from typing import Any

import pytest

from vfgym.envs import SingleTurnEnv
from vfgym.errors import ModelCallError
from vfgym.inference.client import RetryPolicy, request_model_response
from vfgym.rubrics import Rubric

HELLO = [{"role": "user", "content": "hello"}]
FAST = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.01, jitter=0.0)


def chat_body(message: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }


FINE = (200, chat_body({"role": "assistant", "content": "fine"}), {})


async def test_a_429_that_says_do_not_retry_is_not_retried(scripted) -> None:
    """`x-should-retry: false` decides for a 429 too, as in the openai client: an
    exhausted quota does not come back in a few seconds."""
    quota = {"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}}
    server = await scripted((429, quota, {"x-should-retry": "false"}), FINE)
    with pytest.raises(ModelCallError) as caught:
        await request_model_response(server.client(), "m", HELLO, retry=FAST)
    assert len(server.times) == 1
    assert "exceeded your current quota" in str(caught.value)
    assert "not overloaded" not in str(caught.value)  # not blamed on a struggling server


async def test_vllms_decoder_prompt_overflow_ends_the_rollout_as_truncated(scripted) -> None:
    """vLLM's engine words an overflowing prompt differently from its OpenAI layer."""
    message = (
        "The decoder prompt (length 5000) is longer than the maximum model length of 4096. "
        "Make sure that `max_model_len` is no smaller than the number of text tokens."
    )
    server = await scripted((400, {"error": {"message": message, "code": 400}}, {}))
    rubric = Rubric(funcs=[lambda completion: 1.0])
    env = SingleTurnEnv(dataset=[{"question": "q", "answer": "a"}], rubric=rubric, retry=FAST)
    out = await env.evaluate(server.client(), "m")
    state = out.state[0]
    assert "error" not in state
    assert state["stop_reason"] == "context_length"
    assert state["is_truncated"] is True
    assert out.reward == [1.0]  # scored, not errored
    assert len(server.times) == 1


async def test_a_choice_without_a_message_is_retried_as_a_malformed_answer(scripted) -> None:
    server = await scripted((200, chat_body(None), {}), FINE)
    response = await request_model_response(server.client(), "m", HELLO, retry=FAST)
    assert response.choices[0].message.content == "fine"
    assert len(server.times) == 2


async def test_a_server_that_keeps_sending_choices_without_a_message_errors_the_rollout(
    scripted,
) -> None:
    server = await scripted((200, chat_body(None), {}))
    env = SingleTurnEnv(
        dataset=[{"question": "q", "answer": "a"}],
        rubric=Rubric(funcs=[lambda completion: 1.0]),
        retry=FAST,
    )
    out = await env.evaluate(server.client(), "m")
    error = out.state[0]["error"]
    assert error["type"] == "ModelCallError"
    assert "no message" in error["message"]
    assert math.isnan(out.reward[0])
    assert len(server.times) == FAST.max_retries + 1
