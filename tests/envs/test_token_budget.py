"""The rollout token budget against servers whose responses carry no `usage`.

Some OpenAI-compatible servers and gateways drop `usage`. The budget must then be
counted from what the response does carry (logprobs, token ids), and when it
carries nothing countable the environment must say so once rather than let the
budget silently do nothing. vfgym's ModelServer always reports usage, so these
tests answer from a small loopback server of their own that never does.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from endless_env import GO, Again
from loopback_http import serve_posts
from openai import AsyncOpenAI
from scripted_models import say_ok

from vfgym.envs import MultiTurnEnv
from vfgym.types import Messages, State

TOKENS_PER_TURN = 4


BUDGET = 10


HELLO = [{"role": "user", "content": "count with me"}]


class UsagelessServer:
    """Answers every turn with up to TOKENS_PER_TURN tokens ("a"), never with `usage`.

    Like a vLLM behind a gateway that strips `usage`: the turn is cut at the
    request's max tokens, logprobs come back when asked for, and token ids when
    `return_token_ids` is sent.
    """

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.clients: list[AsyncOpenAI] = []
        self.port = 0

    def _turn_length(self, body: dict[str, Any]) -> int:
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        return TOKENS_PER_TURN if limit is None else min(TOKENS_PER_TURN, int(limit))

    def _choice(self, body: dict[str, Any], n: int, *, chat: bool) -> dict[str, Any]:
        tokens = ["a"] * n
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
        if chat:
            choice["message"] = {"role": "assistant", "content": "".join(tokens)}
            entries = [
                {"token": t, "logprob": -0.5, "bytes": list(t.encode()), "top_logprobs": []}
                for t in tokens
            ]
            choice["logprobs"] = {"content": entries} if body.get("logprobs") else None
        else:
            choice["text"] = "".join(tokens)
            choice["logprobs"] = (
                {
                    "tokens": tokens,
                    "token_logprobs": [-0.5] * n,
                    "top_logprobs": [{t: -0.5} for t in tokens],
                    "text_offset": list(range(n)),
                }
                if body.get("logprobs") is not None
                else None
            )
        if body.get("return_token_ids"):
            choice["token_ids"] = [97] * n
        return choice

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        chat = request.path.endswith("/chat/completions")
        answer = {
            "id": f"cmpl-{len(self.bodies)}",
            "object": "chat.completion" if chat else "text_completion",
            "created": 0,
            "model": body.get("model", "m"),
            "choices": [self._choice(body, self._turn_length(body), chat=chat)],
        }
        return web.json_response(answer)

    def client(self) -> AsyncOpenAI:
        """A real openai client for this server, closed with the server."""
        client = AsyncOpenAI(
            base_url=f"http://127.0.0.1:{self.port}/v1", api_key="test", max_retries=0
        )
        self.clients.append(client)
        return client

    def max_tokens_sent(self) -> list[int]:
        return [b.get("max_completion_tokens", b.get("max_tokens")) for b in self.bodies]


@pytest.fixture
async def usageless() -> AsyncIterator[Callable[[], Awaitable[UsagelessServer]]]:
    """A factory: `server = await usageless()`, stopped after the test."""
    runners: list[web.AppRunner] = []
    servers: list[UsagelessServer] = []

    async def start() -> UsagelessServer:
        server = UsagelessServer()
        servers.append(server)
        runner, server.port = await serve_posts(
            server.handle, "/v1/chat/completions", "/v1/completions"
        )
        runners.append(runner)
        return server

    try:
        yield start
    finally:
        for client in (c for s in servers for c in s.clients):
            await client.close()
        for runner in runners:
            await runner.cleanup()


class GoOn(MultiTurnEnv):
    """Asks for more after every model turn; only the loop's limits end it."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("dataset", [{"prompt": "count with me"}])
        super().__init__(**kwargs)

    async def env_response(self, messages: Messages, state: State, **kwargs: Any):
        if self.message_type == "chat":
            return [{"role": "user", "content": "go on"}], state
        return " go on ", state


def budget_warnings(caplog: pytest.LogCaptureFixture, env: MultiTurnEnv) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == env.logger.name
        and r.levelno == logging.WARNING
        and "rollout_token_budget" in r.getMessage()
    ]


@pytest.mark.parametrize(
    "sampling_args",
    [{"logprobs": True}, {"extra_body": {"return_token_ids": True}}],
    ids=["chat-logprobs", "token-ids"],
)
async def test_a_usageless_chat_rollout_stops_at_the_budget(
    usageless, caplog: pytest.LogCaptureFixture, sampling_args: dict[str, Any]
) -> None:
    server = await usageless()
    env = GoOn(max_turns=10, rollout_token_budget=BUDGET)
    with caplog.at_level(logging.WARNING, logger=env.logger.name):
        _, state = await env.rollout(server.client(), "m", HELLO, sampling_args=sampling_args)
    assert state["stop_reason"] == "token_budget"
    assert state["is_truncated"] is True
    assert state["completion_tokens"] == BUDGET
    assert state["turn"] == 3
    # each turn's max tokens is what is left of the budget: 10, then 10-4, then 6-4
    assert server.max_tokens_sent() == [10, 6, 2]
    assert all(response.usage is None for response in state["responses"])
    assert budget_warnings(caplog, env) == []


async def test_a_usageless_completion_rollout_counts_legacy_logprobs(usageless) -> None:
    server = await usageless()
    env = GoOn(max_turns=10, rollout_token_budget=BUDGET, message_type="completion")
    _, state = await env.rollout(server.client(), "m", "count:", sampling_args={"logprobs": 1})
    assert state["stop_reason"] == "token_budget"
    assert state["completion_tokens"] == BUDGET
    assert server.max_tokens_sent() == [10, 6, 2]


async def test_with_nothing_to_count_the_rollout_runs_to_max_turns_and_warns_once(
    usageless, caplog: pytest.LogCaptureFixture
) -> None:
    server = await usageless()
    env = GoOn(max_turns=4, rollout_token_budget=BUDGET)
    with caplog.at_level(logging.WARNING, logger=env.logger.name):
        for _ in range(2):
            _, state = await env.rollout(server.client(), "m", HELLO)
            assert state["stop_reason"] == "max_turns"
            assert state["completion_tokens"] == 0
    assert len(server.bodies) == 8
    [warning] = budget_warnings(caplog, env)
    assert "GoOn" in warning and "usage" in warning
    assert "logprobs" in warning and "max_turns" in warning


async def test_each_environment_warns_on_its_own(
    usageless, caplog: pytest.LogCaptureFixture
) -> None:
    server = await usageless()
    first, second = (GoOn(max_turns=2, rollout_token_budget=BUDGET) for _ in range(2))
    with caplog.at_level(logging.WARNING, logger=first.logger.name):
        await first.rollout(server.client(), "m", HELLO)
        await second.rollout(server.client(), "m", HELLO)
    assert len(budget_warnings(caplog, first)) == 2


async def test_without_a_budget_nothing_is_warned(
    usageless, caplog: pytest.LogCaptureFixture
) -> None:
    server = await usageless()
    env = GoOn(max_turns=3)
    with caplog.at_level(logging.WARNING, logger=env.logger.name):
        _, state = await env.rollout(server.client(), "m", HELLO)
    assert state["stop_reason"] == "max_turns"
    assert [r for r in caplog.records if r.name == env.logger.name] == []


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
