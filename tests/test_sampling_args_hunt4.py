"""Sampling arguments as the server receives them, through the real openai client."""

from __future__ import annotations

import pytest
from endless_env import GO, Again
from scripted_models import say_ok

from vfgym.envs import SingleTurnEnv


def _limit(request: dict) -> int | None:
    """The turn's token limit as sent (a chat request names it max_completion_tokens)."""
    return request.get("max_completion_tokens", request.get("max_tokens"))


async def test_the_token_budget_clamps_the_limit_that_is_set_not_a_null_one(model_server) -> None:
    """`max_completion_tokens: None` beside `max_tokens: 50` made the budget ask for its
    whole remainder instead of 50 tokens."""
    server = await model_server(say_ok)
    env = Again(dataset=[{"question": "q"}], max_turns=1, rollout_token_budget=1000)
    args = {"max_tokens": 50, "max_completion_tokens": None}
    _, state = await env.rollout(server.client(), "m", GO, sampling_args=args)
    assert "error" not in state, state.get("error")
    assert _limit(server.requests[0]) == 50


async def test_the_token_budget_still_clamps_a_limit_above_what_is_left(model_server) -> None:
    server = await model_server(say_ok)
    env = Again(dataset=[{"question": "q"}], max_turns=1, rollout_token_budget=30)
    _, state = await env.rollout(server.client(), "m", GO, sampling_args={"max_tokens": 50})
    assert "error" not in state, state.get("error")
    assert _limit(server.requests[0]) == 30


async def test_a_callers_extra_body_value_overrides_the_environments_top_level_one(
    model_server,
) -> None:
    server = await model_server(say_ok)
    env = SingleTurnEnv(dataset=[{"question": "q"}], sampling_args={"top_k": 20})
    await env.evaluate(server.client(), "m", sampling_args={"extra_body": {"top_k": 50}})
    assert server.requests[0]["top_k"] == 50


async def test_a_callers_top_level_value_overrides_the_environments_extra_body_one(
    model_server,
) -> None:
    server = await model_server(say_ok)
    env = SingleTurnEnv(dataset=[{"question": "q"}], sampling_args={"extra_body": {"top_k": 20}})
    await env.evaluate(server.client(), "m", sampling_args={"top_k": 50})
    assert server.requests[0]["top_k"] == 50


async def test_run_rollouts_checks_max_concurrent_as_generate_does(model_server) -> None:
    server = await model_server(say_ok)
    env = SingleTurnEnv(dataset=[{"question": "q"}])
    with pytest.raises(TypeError, match="max_concurrent must be a whole number"):
        await env.run_rollouts(server.client(), "m", [GO], max_concurrent="4")
    done = await env.run_rollouts(server.client(), "m", [GO], max_concurrent=None)
    assert done[0][1]["stop_reason"] == "completed"
