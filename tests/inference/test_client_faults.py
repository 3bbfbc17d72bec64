"""Server failures over real HTTP: retries, errored rollouts, context overflow."""

from __future__ import annotations

import math
from typing import Any

import openai
import pytest
from transport_paths import ClientPath, client_path_fixture  # noqa: F401  (the fixture)

from vfgym.envs import MultiTurnEnv, SingleTurnEnv
from vfgym.errors import ContextLengthExceeded, ModelCallError
from vfgym.inference.client import RetryPolicy, is_transient, request_model_response
from vfgym.inference.retry import retry_after as _retry_after
from vfgym.rubrics import Rubric
from vfgym.types import Messages, State

HELLO = [{"role": "user", "content": "hello"}]


def shout(messages: Messages) -> str:
    return messages[-1]["content"].upper()


def matches(completion: Messages, answer: str) -> float:
    return 1.0 if completion and completion[-1]["content"] == answer else 0.0


def make_env(retry: RetryPolicy, words: tuple[str, ...] = ("hello",), **kwargs: Any):
    rows = [{"question": w, "answer": w.upper()} for w in words]
    return SingleTurnEnv(dataset=rows, rubric=Rubric(funcs=[matches]), retry=retry, **kwargs)


@pytest.mark.parametrize("fault", ["429", "500", "503", "drop", "malformed"])
async def test_transient_faults_are_retried_and_the_rollout_succeeds(
    model_server, client_path: ClientPath, fast_retry, fault
) -> None:
    server = await model_server(shout)
    server.inject_faults(fault, fault)
    out = await make_env(fast_retry).evaluate(client_path.client(server), "m")
    assert len(server.requests) == 3  # two failures, then the answer
    assert server.pending_faults == 0
    assert "error" not in out.state[0]
    assert out.completion[0] == [{"role": "assistant", "content": "HELLO"}]
    assert out.reward == [1.0]
    assert out.metadata["num_errored"] == 0


async def test_a_slow_answer_times_out_and_is_retried(
    model_server, client_path: ClientPath, fast_retry
) -> None:
    server = await model_server(shout)
    server.inject_faults(("slow", 30))
    out = await make_env(fast_retry).evaluate(client_path.client(server, timeout=1.0), "m")
    assert server.pending_faults == 0
    assert len(server.requests) >= 2  # the slow one, then at least one answered retry
    assert "error" not in out.state[0]
    assert out.reward == [1.0]


async def test_a_server_that_keeps_failing_errors_that_rollout_only(
    model_server, client_path: ClientPath
) -> None:
    def policy(messages: Messages) -> str:
        if messages[-1]["content"] == "cursed":
            raise RuntimeError("GPU fell off the bus")
        return shout(messages)

    server = await model_server(policy)
    retry = RetryPolicy(max_retries=2, initial_delay=0.01, max_delay=0.02)
    env = make_env(retry, ("hello", "cursed", "world"))
    out = await env.evaluate(client_path.client(server), "m")

    failed = out.state[1]
    assert failed["error"]["type"] == "ModelCallError"
    # A policy that raised is no flaky server: the 500 says not to retry.
    assert "model call failed: InternalServerError" in failed["error"]["message"]
    assert "GPU fell off the bus" in failed["error"]["message"]
    assert failed["error"]["cause"]["type"] == "InternalServerError"
    assert failed["stop_reason"] == "error"
    assert failed["is_truncated"] is False
    assert math.isnan(out.reward[1])  # not scored as a wrong answer
    assert math.isnan(out.metrics["matches"][1])
    assert [out.reward[0], out.reward[2]] == [1.0, 1.0]
    assert out.metadata["num_errored"] == 1
    assert out.metadata["avg_reward"] == 1.0
    assert out.metadata["status"] == "complete_with_errors"  # says the run had errors
    cursed = [r for r in server.requests if r["messages"][-1]["content"] == "cursed"]
    assert len(cursed) == 1


async def test_every_rollout_failing_still_completes_the_batch(
    model_server, client_path: ClientPath, fast_retry
) -> None:
    server = await model_server(shout)
    server.fail_always("503")
    out = await make_env(fast_retry, ("a", "b", "c")).evaluate(client_path.client(server), "m")
    assert out.metadata["num_errored"] == 3
    assert out.metadata["avg_reward"] is None
    assert all(math.isnan(r) for r in out.reward)
    assert all(s["error"]["type"] == "ModelCallError" for s in out.state)
    assert len(server.requests) == 3 * (fast_retry.max_retries + 1)


async def test_a_client_error_is_not_retried(
    model_server, client_path: ClientPath, fast_retry
) -> None:
    server = await model_server({"known-model": shout})
    out = await make_env(fast_retry).evaluate(client_path.client(server), "unknown-model")
    error = out.state[0]["error"]
    assert error["type"] == "ModelCallError"
    assert "known-model" in error["message"]
    assert len(server.requests) == 1
    assert math.isnan(out.reward[0])


async def test_a_client_without_a_chat_api_errors_the_rollout(fast_retry) -> None:
    class NotAClient:
        pass

    _, state = await make_env(fast_retry).rollout(NotAClient(), "m", list(HELLO), answer="HELLO")
    assert state["stop_reason"] == "error"
    assert "chat" in state["error"]["message"]


async def test_request_model_response_raises_with_the_attempt_count(
    model_server, client_path: ClientPath
) -> None:
    server = await model_server(shout)
    server.fail_always("500")
    with pytest.raises(ModelCallError) as caught:
        await request_model_response(
            client_path.client(server),
            "m",
            HELLO,
            retry=RetryPolicy(max_retries=1, initial_delay=0.001),
        )
    assert caught.value.attempts == 2
    assert isinstance(caught.value.cause or caught.value.__cause__, openai.InternalServerError)


async def test_retry_after_of_a_429_is_read_to_the_millisecond(model_server) -> None:
    server = await model_server(shout)
    server.inject_faults(("429", 0.02))
    with pytest.raises(openai.RateLimitError) as caught:
        await server.client().chat.completions.create(model="m", messages=HELLO)
    assert is_transient(caught.value)
    assert _retry_after(caught.value) == pytest.approx(0.02)
    assert RetryPolicy(max_delay=8).delay(1, _retry_after(caught.value)) == pytest.approx(0.02)
    assert RetryPolicy(max_delay=0.01).delay(1, 5.0) == 0.01


def test_backoff_grows_and_is_capped() -> None:
    policy = RetryPolicy(initial_delay=0.1, max_delay=0.5, jitter=0.0)
    assert [policy.delay(n) for n in (1, 2, 3, 4)] == [0.1, 0.2, 0.4, 0.5]


# -- context overflow --------------------------------------------------------------------


async def test_context_overflow_on_the_first_turn_is_an_errored_rollout(
    model_server, client_path: ClientPath, fast_retry
) -> None:
    """A prompt that never fit is no wrong answer: the rollout errored (reward NaN), and
    the server's message is kept."""
    server = await model_server(shout, max_model_len=64)
    env = make_env(fast_retry, ("x" * 100, "short"))
    out = await env.evaluate(client_path.client(server), "m")
    long = out.state[0]
    assert long["stop_reason"] == "error"
    assert long["prompt_too_long"] is True
    assert long["error"]["type"] == "NoModelTurnError"
    assert "maximum context length is 64 tokens" in long["error"]["message"]
    assert out.completion[0] == []
    assert math.isnan(out.reward[0]) and out.reward[1] == 1.0  # not scored 0.0
    assert out.metadata["num_errored"] == 1
    assert len(server.requests) == 2  # no retries of an overflow


class Chatty(MultiTurnEnv):
    """Never ends by itself: the conversation grows until it no longer fits."""

    async def env_response(self, messages: Messages, state: State, **kwargs: Any):
        return [{"role": "user", "content": "tell me more " * 3}], state


async def test_context_overflow_later_in_the_episode_keeps_the_turns(
    model_server, client_path: ClientPath, fast_retry
) -> None:
    server = await model_server(lambda messages: "more words here", max_model_len=200)
    env = Chatty(dataset=[{"prompt": HELLO}], retry=fast_retry)
    completion, state = await env.rollout(client_path.client(server), "m", HELLO)
    assert state["stop_reason"] == "context_length"
    assert state["is_truncated"] is True
    assert "error" not in state
    assert state["turn"] >= 2
    assert len(completion) == 2 * state["turn"]
    assert len(server.requests) == state["turn"] + 1


async def test_an_injected_context_error_on_the_first_turn_errors_the_rollout(
    model_server, client_path: ClientPath, fast_retry
) -> None:
    server = await model_server(shout)
    server.inject_faults("context")
    with pytest.raises(ContextLengthExceeded):
        await request_model_response(client_path.client(server), "m", HELLO, retry=fast_retry)
    server.inject_faults("context")
    _, state = await make_env(fast_retry).rollout(client_path.client(server), "m", HELLO)
    assert state["stop_reason"] == "error"
    assert state["error"]["type"] == "NoModelTurnError"


async def test_max_tokens_past_the_window_is_shrunk_to_what_fits(
    model_server, client_path: ClientPath, fast_retry
) -> None:
    server = await model_server(lambda messages: "fits", max_model_len=200)
    env = make_env(fast_retry, ("hi",), rollout_token_budget=1000)
    out = await env.evaluate(client_path.client(server), "m")
    state = out.state[0]
    assert state["stop_reason"] == "completed"
    assert out.completion[0] == [{"role": "assistant", "content": "fits"}]
    prompt_tokens = state["responses"][0].usage.prompt_tokens
    asked = [r["max_completion_tokens"] for r in server.requests]
    assert asked == [1000, 200 - prompt_tokens]


async def test_the_overflow_error_says_how_much_room_is_left(model_server) -> None:
    from vfgym.inference.client import completion_room

    server = await model_server(shout, max_model_len=100)
    with pytest.raises(openai.BadRequestError) as caught:
        await server.client().chat.completions.create(
            model="m", messages=HELLO, max_completion_tokens=500
        )
    assert completion_room(caught.value) == 100 - server.tokenizer.count_chat_tokens(HELLO)
    with pytest.raises(openai.BadRequestError) as too_long:
        await server.client().chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x" * 200}]
        )
    assert completion_room(too_long.value) is None
