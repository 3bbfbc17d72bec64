"""Model-client and batch edges met by a user of vLLM or the OpenAI API, over real
loopback HTTP with the real openai client."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from loopback_http import Answer
from loopback_http import chat_body

from vfgym.envs import SingleTurnEnv
from vfgym.errors import ModelCallError
from vfgym.inference.client import RetryPolicy, request_model_response
from vfgym.inference.server import ModelServer
from vfgym.rubrics import Rubric
from vfgym.types import Messages

HELLO = [{"role": "user", "content": "hello"}]
FAST = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.01, jitter=0.0)


def shout(messages: Messages) -> str:
    return messages[-1]["content"].upper()


OK: Answer = (200, chat_body("fine"), {})


def make_env(words: tuple[str, ...] = ("hello",)) -> SingleTurnEnv:
    rows = [{"question": w, "answer": w.upper()} for w in words]
    return SingleTurnEnv(dataset=rows, rubric=Rubric(funcs=[lambda completion: 1.0]), retry=FAST)


# -- the caller's client is the caller's ---------------------------------------------


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


async def slow_echo(messages: Messages) -> str:
    await asyncio.sleep(0.05)  # long enough that a batch opens a connection per rollout
    return messages[-1]["content"]


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


# -- max_concurrent -------------------------------------------------------------------


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


# -- x-should-retry decides for a 400 too ---------------------------------------------


async def test_a_400_that_says_retry_is_retried(scripted) -> None:
    """The README: the server's `x-should-retry` "decides for any status"."""
    told = (400, {"error": {"message": "shard restarting"}}, {"x-should-retry": "true"})
    server = await scripted(told, OK)
    response = await request_model_response(server.client(), "m", HELLO, retry=FAST)
    assert response.choices[0].message.content == "fine"
    assert len(server.bodies) == 2


async def test_a_400_without_the_header_is_still_not_retried(scripted) -> None:
    server = await scripted((400, {"error": {"message": "bad 'temperature'"}}, {}), OK)
    with pytest.raises(ModelCallError, match="rejected the request"):
        await request_model_response(server.client(), "m", HELLO, retry=FAST)
    assert len(server.bodies) == 1


# -- vLLM's error object, sent with a 200 -----------------------------------------------


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


async def test_a_200_carrying_vllms_error_object_for_a_server_fault_is_retried(scripted) -> None:
    error = {"object": "error", "message": "engine dead", "code": 500}
    server = await scripted((200, error, {}), OK)
    response = await request_model_response(server.client(), "m", HELLO, retry=FAST)
    assert response.choices[0].message.content == "fine"
    assert len(server.bodies) == 2
