"""The model client over real loopback HTTP: odd response bodies, Retry-After and backoff
caps, quotas that say not to retry, replies without a message, errors sent with status
200."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from types import SimpleNamespace
from typing import Any

import openai
import pytest
from loopback_http import Answer, chat_body
from transport_paths import client_path_fixture  # noqa: F401  (the fixture)

from vfgym.envs import SingleTurnEnv
from vfgym.errors import ContextLengthExceeded, ModelCallError
from vfgym.inference.client import RetryPolicy, request_model_response
from vfgym.inference.retry import retry_after as _retry_after
from vfgym.inference.server import ModelServer
from vfgym.rubrics import Rubric
from vfgym.types import Messages

HELLO = [{"role": "user", "content": "hello"}]


FAST = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.01, jitter=0.0)


OK: Answer = (200, chat_body("fine"), {})


@pytest.mark.usefixtures("client_path")
async def test_a_200_with_an_error_body_is_retried_then_answered(scripted) -> None:
    error = {"error": {"message": "upstream provider overloaded", "code": 502}}
    server = await scripted((200, error, {}), OK)
    response = await request_model_response(server.client(), "m", HELLO, retry=FAST)
    assert response.choices[0].message.content == "fine"
    assert len(server.bodies) == 2


@pytest.mark.usefixtures("client_path")
async def test_a_200_with_an_error_body_that_persists_is_a_model_call_error(scripted) -> None:
    error = {"error": {"message": "upstream provider overloaded", "code": 502}}
    server = await scripted((200, error, {}))
    with pytest.raises(ModelCallError) as caught:
        await request_model_response(server.client(), "m", HELLO, retry=FAST)
    assert "upstream provider overloaded" in str(caught.value)
    assert caught.value.attempts == 3
    assert len(server.bodies) == 3


@pytest.mark.usefixtures("client_path")
async def test_a_200_with_a_client_error_body_is_not_retried(scripted) -> None:
    error = {"error": {"message": "no such model 'x'", "code": 404}}
    server = await scripted((200, error, {}))
    with pytest.raises(ModelCallError) as caught:
        await request_model_response(server.client(), "m", HELLO, retry=FAST)
    assert "no such model" in str(caught.value)
    assert len(server.bodies) == 1


@pytest.mark.parametrize("client_kind", ["async", "sync"])
@pytest.mark.usefixtures("client_path")
async def test_a_200_with_empty_choices_is_retried_then_answered(scripted, client_kind) -> None:
    """Async and sync clients alike: an empty `choices` list is a server fault."""
    empty = {**chat_body(), "choices": []}
    server = await scripted((200, empty, {}), OK)
    client = server.client() if client_kind == "async" else server.sync_client()
    response = await request_model_response(client, "m", HELLO, retry=FAST)
    assert response.choices[0].message.content == "fine"
    assert len(server.bodies) == 2


@pytest.mark.usefixtures("client_path")
async def test_a_response_without_usage_is_returned_as_is(scripted) -> None:
    body = chat_body("no usage")
    del body["usage"]
    server = await scripted((200, body, {}))
    response = await request_model_response(server.client(), "m", HELLO, retry=FAST)
    assert response.usage is None
    assert response.choices[0].message.content == "no usage"


def http_date(seconds_from_now: float) -> str:
    return format_datetime(datetime.now(UTC) + timedelta(seconds=seconds_from_now), usegmt=True)


async def test_retry_after_as_an_http_date_is_read(scripted) -> None:
    server = await scripted(
        (429, {"error": {"message": "slow down"}}, {"Retry-After": http_date(30)})
    )
    with pytest.raises(openai.RateLimitError) as caught:
        await server.client().chat.completions.create(model="m", messages=HELLO)
    assert 25 <= (_retry_after(caught.value) or 0) <= 31


async def test_retry_after_as_a_past_http_date_means_now(scripted) -> None:
    server = await scripted((503, {"error": {"message": "busy"}}, {"Retry-After": http_date(-60)}))
    with pytest.raises(openai.InternalServerError) as caught:
        await server.client().chat.completions.create(model="m", messages=HELLO)
    assert _retry_after(caught.value) == 0.0


@pytest.mark.usefixtures("client_path")
async def test_an_http_date_retry_after_is_honoured_and_capped(scripted) -> None:
    later = (429, {"error": {"message": "slow down"}}, {"Retry-After": http_date(3600)})
    server = await scripted(later, OK)
    policy = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.3, jitter=0.0)
    await request_model_response(server.client(), "m", HELLO, retry=policy)
    waited = server.times[1] - server.times[0]
    assert 0.25 <= waited < 2.0  # the server's hour, capped at max_delay; not 1 ms


def test_jitter_never_takes_a_delay_past_max_delay() -> None:
    policy = RetryPolicy(initial_delay=1.0, max_delay=1.0, jitter=0.5)
    delays = [policy.delay(attempt) for attempt in (1, 2, 3) for _ in range(100)]
    assert max(delays) <= 1.0
    assert min(delays) >= 0.5


@pytest.mark.usefixtures("client_path")
async def test_cancelling_during_backoff_stops_at_once(scripted) -> None:
    server = await scripted((503, {"error": {"message": "busy"}}, {}))
    slow = RetryPolicy(max_retries=3, initial_delay=30.0, max_delay=30.0, jitter=0.0)
    task = asyncio.create_task(request_model_response(server.client(), "m", HELLO, retry=slow))
    while not server.times:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # now sleeping in the backoff
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 1.0
    assert len(server.bodies) == 1


@pytest.mark.usefixtures("client_path")
async def test_a_sync_client_does_not_block_the_loop(scripted) -> None:
    server = await scripted(OK)
    server.delay = 0.5
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    tick_task = asyncio.create_task(ticker())
    try:
        response = await request_model_response(server.sync_client(), "m", HELLO, retry=FAST)
    finally:
        tick_task.cancel()
    assert response.choices[0].message.content == "fine"
    assert ticks >= 10  # the loop kept running while the thread waited half a second


def overflow(message: str) -> Answer:
    error = {"message": message, "type": "invalid_request_error", "code": "context_length_exceeded"}
    return (400, {"error": error}, {})


@pytest.mark.usefixtures("client_path")
async def test_the_room_left_counts_the_tools_in_the_prompt(scripted) -> None:
    server = await scripted(
        overflow(
            "This model's maximum context length is 4096 tokens. However, you requested 4200 "
            "tokens (1000 in the messages, 200 in the functions, and 3000 in the completion). "
            "Please reduce the length of the messages, functions, or completion."
        ),
        OK,
    )
    await request_model_response(
        server.client(), "m", HELLO, sampling_args={"max_tokens": 3000}, retry=FAST
    )
    assert [body["max_completion_tokens"] for body in server.bodies] == [3000, 4096 - 1200]


@pytest.mark.usefixtures("client_path")
async def test_an_overflow_without_numbers_is_not_resent(scripted) -> None:
    server = await scripted(overflow("prompt is too long for this model"), OK)
    with pytest.raises(ContextLengthExceeded):
        await request_model_response(
            server.client(), "m", HELLO, sampling_args={"max_tokens": 3000}, retry=FAST
        )
    assert len(server.bodies) == 1


@pytest.mark.usefixtures("client_path")
async def test_an_overflow_with_no_room_left_is_not_resent(scripted) -> None:
    server = await scripted(
        overflow(
            "This model's maximum context length is 100 tokens. However, you requested 150 "
            "tokens (120 in the messages, 30 in the completion)."
        ),
        OK,
    )
    with pytest.raises(ContextLengthExceeded):
        await request_model_response(
            server.client(), "m", HELLO, sampling_args={"max_tokens": 30}, retry=FAST
        )
    assert len(server.bodies) == 1


@pytest.mark.usefixtures("client_path")
async def test_a_rollout_meeting_only_error_bodies_is_errored_not_scored(scripted) -> None:
    server = await scripted((200, {"error": {"message": "upstream timed out"}}, {}))
    rows = [{"question": "hello", "answer": "fine"}]
    rubric = Rubric(funcs=[lambda completion, answer: float(completion[-1]["content"] == answer)])
    env = SingleTurnEnv(dataset=rows, rubric=rubric, retry=FAST)
    out = await env.evaluate(server.client(), "m")
    assert out.state[0]["error"]["type"] == "ModelCallError"
    assert "upstream timed out" in out.state[0]["error"]["message"]
    assert math.isnan(out.reward[0])
    assert len(server.bodies) == FAST.max_retries + 1


def wrapped(create: Callable[..., Any]) -> SimpleNamespace:
    """A client-shaped wrapper (tracing, a gateway SDK) around someone's `create`."""
    return SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(create=create)))


async def test_a_wrapped_async_client_is_awaited(scripted) -> None:
    server = await scripted(OK)
    real = server.client()

    async def create(**kwargs: Any) -> Any:
        return await real.chat.completions.create(**kwargs)

    response = await request_model_response(wrapped(create), "m", HELLO, retry=FAST)
    assert response.choices[0].message.content == "fine"
    assert len(server.bodies) == 1


async def test_a_wrapped_sync_client_still_runs_in_a_thread(scripted) -> None:
    server = await scripted(OK)
    server.delay = 0.3
    real = server.sync_client()
    loop_thread = threading.get_ident()
    threads: list[int] = []

    def create(**kwargs: Any) -> Any:
        threads.append(threading.get_ident())
        return real.chat.completions.create(**kwargs)

    response = await request_model_response(wrapped(create), "m", HELLO, retry=FAST)
    assert response.choices[0].message.content == "fine"
    assert threads and loop_thread not in threads


@pytest.mark.parametrize(
    "bad",
    [
        {"jitter": 1.5},
        {"jitter": -0.1},
        {"max_retries": -1},
        {"initial_delay": -1.0},
        {"max_delay": float("nan")},
    ],
)
def test_a_retry_policy_that_would_wait_a_negative_time_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        RetryPolicy(**bad)


def chat_body_with_message(message: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }


FINE = (200, chat_body_with_message({"role": "assistant", "content": "fine"}), {})


@pytest.mark.usefixtures("client_path")
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


@pytest.mark.usefixtures("client_path")
async def test_vllms_decoder_prompt_overflow_errors_a_rollout_with_no_model_turn(
    scripted,
) -> None:
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
    assert state["error"]["type"] == "NoModelTurnError"
    assert "decoder prompt (length 5000)" in state["error"]["message"]  # the server's words
    assert state["stop_reason"] == "error"
    assert state["prompt_too_long"] is True
    assert math.isnan(out.reward[0])  # errored, never scored
    assert len(server.times) == 1


@pytest.mark.usefixtures("client_path")
async def test_a_choice_without_a_message_is_retried_as_a_malformed_answer(scripted) -> None:
    server = await scripted((200, chat_body_with_message(None), {}), FINE)
    response = await request_model_response(server.client(), "m", HELLO, retry=FAST)
    assert response.choices[0].message.content == "fine"
    assert len(server.times) == 2


@pytest.mark.usefixtures("client_path")
async def test_a_server_that_keeps_sending_choices_without_a_message_errors_the_rollout(
    scripted,
) -> None:
    server = await scripted((200, chat_body_with_message(None), {}))
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


def shout(messages: Messages) -> str:
    return messages[-1]["content"].upper()


def make_env(words: tuple[str, ...] = ("hello",)) -> SingleTurnEnv:
    rows = [{"question": w, "answer": w.upper()} for w in words]
    return SingleTurnEnv(dataset=rows, rubric=Rubric(funcs=[lambda completion: 1.0]), retry=FAST)


async def slow_echo(messages: Messages) -> str:
    await asyncio.sleep(0.05)  # long enough that a batch opens a connection per rollout
    return messages[-1]["content"]


async def test_evaluate_leaves_a_client_with_its_own_retries_open(model_server) -> None:
    """An `AsyncOpenAI` as made by default (max_retries=2) gets its retries turned off
    for the batch through a copy that shares its connections: closing that copy at the
    end closed the caller's client, and the next batch failed every rollout."""
    server = await model_server(shout)
    client = server.client(max_retries=2)
    env = make_env()
    first = await env.evaluate(client, "m")
    second = await env.evaluate(client, "m")
    assert not client.is_closed()
    assert first.metadata["num_errored"] == 0
    assert "error" not in second.state[0]
    assert second.reward == [1.0]
    response = await client.chat.completions.create(model="m", messages=HELLO)
    assert response.choices[0].message.content == "HELLO"


def test_a_client_used_under_an_earlier_asyncio_run_still_works() -> None:
    """`asyncio.run(env.evaluate(client, ...))` twice with one client is the usual
    script; the pooled connections of the first loop fail once each ("Event loop is
    closed") and are dropped, so a retry on a fresh connection gets the answer."""
    env = make_env(("a", "b", "c"))
    with ModelServer(shout).running() as server:
        client = server.client()
        first = asyncio.run(env.evaluate(client, "m"))
        second = asyncio.run(env.evaluate(client, "m"))
    assert first.metadata["num_errored"] == 0
    assert [s.get("error") for s in second.state] == [None, None, None]
    assert second.reward == [1.0, 1.0, 1.0]


def test_a_pool_full_of_an_earlier_loops_connections_does_not_use_up_the_retries() -> None:
    """Run one at a time, a rollout meets the earlier loop's connections one after
    another: each is dropped at once, without spending a retry of the policy."""
    words = tuple(f"w{i}" for i in range(3 * (FAST.max_retries + 1)))
    env = make_env(words)
    with ModelServer(slow_echo).running() as server:
        client = server.client()
        first = asyncio.run(env.evaluate(client, "m"))
        second = asyncio.run(env.evaluate(client, "m", max_concurrent=1))
    assert first.metadata["num_errored"] == 0
    assert second.metadata["num_errored"] == 0
    assert second.completion == [[{"role": "assistant", "content": w}] for w in words]


async def test_max_concurrent_none_means_no_limit(model_server) -> None:
    server = await model_server(shout)
    out = await make_env(("a", "b", "c")).evaluate(server.client(), "m", max_concurrent=None)
    assert out.reward == [1.0, 1.0, 1.0]
    assert out.metadata["num_errored"] == 0


@pytest.mark.parametrize("bad", [2.5, "4", True])
async def test_max_concurrent_that_is_no_whole_number_is_refused_clearly(
    model_server, bad: Any
) -> None:
    server = await model_server(shout)
    with pytest.raises(TypeError, match="max_concurrent must be a whole number") as caught:
        await make_env().evaluate(server.client(), "m", max_concurrent=bad)
    assert "-1" in str(caught.value)  # says how to ask for no limit
    assert server.requests == []


async def test_max_concurrent_as_a_whole_float_is_read_as_that_number(model_server) -> None:
    server = await model_server(shout)
    out = await make_env(("a", "b")).evaluate(server.client(), "m", max_concurrent=1.0)
    assert out.reward == [1.0, 1.0]


@pytest.mark.usefixtures("client_path")
async def test_a_400_that_says_retry_is_retried(scripted) -> None:
    """The README: the server's `x-should-retry` "decides for any status"."""
    told = (400, {"error": {"message": "shard restarting"}}, {"x-should-retry": "true"})
    server = await scripted(told, OK)
    response = await request_model_response(server.client(), "m", HELLO, retry=FAST)
    assert response.choices[0].message.content == "fine"
    assert len(server.bodies) == 2


@pytest.mark.usefixtures("client_path")
async def test_a_400_without_the_header_is_still_not_retried(scripted) -> None:
    server = await scripted((400, {"error": {"message": "bad 'temperature'"}}, {}), OK)
    with pytest.raises(ModelCallError, match="rejected the request"):
        await request_model_response(server.client(), "m", HELLO, retry=FAST)
    assert len(server.bodies) == 1


@pytest.mark.usefixtures("client_path")
async def test_a_200_carrying_vllms_error_object_says_what_the_server_said(scripted) -> None:
    """vLLM's ErrorResponse is a top-level object ("object": "error", "message",
    "code"); a gateway that passes it on with a 200 got it reported as "no choices",
    retried and blamed on an overloaded server."""
    error = {
        "object": "error",
        "message": "The model `m` does not exist.",
        "type": "NotFoundError",
        "param": None,
        "code": 404,
    }
    server = await scripted((200, error, {}))
    with pytest.raises(ModelCallError) as caught:
        await request_model_response(server.client(), "m", HELLO, retry=FAST)
    assert "does not exist" in str(caught.value)
    assert "overloaded" not in str(caught.value)
    assert len(server.bodies) == 1  # a 404 is the caller's to fix


@pytest.mark.usefixtures("client_path")
async def test_a_200_carrying_vllms_error_object_for_a_server_fault_is_retried(scripted) -> None:
    error = {"object": "error", "message": "engine dead", "code": 500}
    server = await scripted((200, error, {}), OK)
    response = await request_model_response(server.client(), "m", HELLO, retry=FAST)
    assert response.choices[0].message.content == "fine"
    assert len(server.bodies) == 2
