"""JudgeRubric shares one in-flight request among concurrent identical asks about one rollout.

Two rubrics (or reward functions) that put the same question about one rollout to the
same judge at the same instant must send one request: the later ask awaits the earlier
one's answer. If the earlier ask fails, the waiter gets that failure instead of waiting
forever; if it is cancelled, the waiter is not cancelled with it but asks again itself.
Other rollouts ask for themselves, so a sampling judge samples each. The judge is a
real loopback HTTP server that counts the requests it gets.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from loopback_http import Answer, ScriptedServer
from openai import AsyncOpenAI

from vfgym.parsers import XMLParser
from vfgym.rubrics import REWARD_ERRORS, JudgeRubric

PROMPT = [{"role": "user", "content": "What is 2+2?"}]
COMPLETION = [{"role": "assistant", "content": "<answer>4</answer>"}]
#: How long the judge server holds each request: long enough to overlap asks.
HOLD = 0.3
#: A bound on every wait, so a waiter left hanging fails the test instead of stalling it.
LIMIT = 10.0


def chat_body(text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "judge",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }


YES: Answer = (200, chat_body("yes"), {})
BROKEN: Answer = (
    400,
    {"error": {"message": "judge is broken", "type": "invalid_request_error", "code": None}},
    {},
)


@pytest.fixture
async def rubric() -> AsyncIterator[Callable[[ScriptedServer], JudgeRubric]]:
    """A factory of judge rubrics, each with a client of its own as each rubric of a run
    has; the clients are closed after the test."""
    clients: list[AsyncOpenAI] = []

    def make(server: ScriptedServer) -> JudgeRubric:
        clients.append(server.client())
        return JudgeRubric(
            parser=XMLParser(["answer"]), judge_client=clients[-1], judge_model="judge"
        )

    try:
        yield make
    finally:
        for client in clients:
            await client.close()


@pytest.fixture
async def held(scripted: Any) -> Callable[..., Awaitable[ScriptedServer]]:
    """A factory of scripted judge servers that hold each request for HOLD seconds."""

    async def start(*answers: Answer) -> ScriptedServer:
        server = await scripted(*answers)
        server.delay = HOLD
        return server

    return start


async def until_requests(server: ScriptedServer, count: int) -> None:
    """Wait until the server has received `count` requests (the first ask is in flight)."""
    async with asyncio.timeout(LIMIT):
        while len(server.times) < count:
            await asyncio.sleep(0.005)


def ask(judge: JudgeRubric, state: dict | None) -> asyncio.Task[str]:
    return asyncio.create_task(judge.judge(PROMPT, COMPLETION, "4", state))


async def test_two_rubrics_asking_at_once_share_one_request(held, rubric) -> None:
    server = await held(YES)
    first, second = rubric(server), rubric(server)
    state: dict = {}
    async with asyncio.timeout(LIMIT):
        answers = await asyncio.gather(ask(first, state), ask(second, state))
    assert answers == ["yes", "yes"]
    assert len(server.times) == 1


async def test_two_rollouts_with_the_same_answer_each_ask_and_cache(held, rubric) -> None:
    """A sampling judge must sample each rollout: identical rollouts are not merged."""
    server = await held(YES, YES)
    judge = rubric(server)
    states: list[dict] = [{}, {}]
    async with asyncio.timeout(LIMIT):
        answers = await asyncio.gather(*(ask(judge, s) for s in states))
    assert answers == ["yes", "yes"]
    assert len(server.times) == 2
    key = judge.judge_key()
    assert [list(s["judge_response"][key].values()) for s in states] == [["yes"], ["yes"]]


async def test_two_rubrics_scoring_a_group_ask_once_per_rollout(held, rubric) -> None:
    n = 4
    server = await held(*[YES] * n)
    rubrics = [rubric(server), rubric(server)]

    async def agrees(judge: Any, prompt: Any, completion: Any, answer: Any, state: Any) -> float:
        return 1.0 if (await judge(prompt, completion, answer, state)) == "yes" else 0.0

    for judge in rubrics:
        judge.add_reward_func(agrees)
    states: list[dict] = [{} for _ in range(n)]
    async with asyncio.timeout(LIMIT):
        scores = await asyncio.gather(
            *(
                judge.score_rollouts(
                    [PROMPT] * n, [COMPLETION] * n, ["4"] * n, states, ["t"] * n, [{}] * n
                )
                for judge in rubrics
            )
        )
    for score in scores:
        assert score.reward == [1.0] * n
        assert score.metrics[REWARD_ERRORS] == [0.0] * n
    assert len(server.times) == n


async def test_asks_without_state_each_send_a_request(held, rubric) -> None:
    """Without a State there is no rollout to share with (nor a cache)."""
    server = await held(YES, YES)
    judge = rubric(server)
    async with asyncio.timeout(LIMIT):
        answers = await asyncio.gather(ask(judge, None), ask(judge, None))
    assert answers == ["yes", "yes"]
    assert len(server.times) == 2


async def test_different_questions_are_not_shared(held, rubric) -> None:
    server = await held(YES)
    judge = rubric(server)
    other = [{"role": "assistant", "content": "<answer>5</answer>"}]
    async with asyncio.timeout(LIMIT):
        await asyncio.gather(
            ask(judge, {}), asyncio.create_task(judge.judge(PROMPT, other, "4", {}))
        )
    assert len(server.times) == 2


async def test_a_failed_first_ask_fails_the_waiter_too_instead_of_hanging(held, rubric) -> None:
    server = await held(BROKEN, YES)
    first, second = rubric(server), rubric(server)
    state: dict = {}
    owner = ask(first, state)
    await until_requests(server, 1)
    waiter = ask(second, state)
    async with asyncio.timeout(LIMIT):
        results = await asyncio.gather(owner, waiter, return_exceptions=True)
    for result in results:
        assert isinstance(result, RuntimeError)
        assert "judge model 'judge' could not answer" in str(result)
        assert "judge is broken" in str(result)
    assert len(server.times) == 1
    # nothing was cached or left in flight: the next ask is a new request
    async with asyncio.timeout(LIMIT):
        assert await ask(second, state) == "yes"
    assert len(server.times) == 2


async def test_a_cancelled_first_ask_leaves_the_waiter_to_ask_itself(held, rubric) -> None:
    server = await held(YES)
    first, second = rubric(server), rubric(server)
    waiter_state: dict = {}
    owner = ask(first, waiter_state)
    await until_requests(server, 1)
    waiter = ask(second, waiter_state)
    await asyncio.sleep(0.02)  # the waiter is now waiting on the owner's request
    owner.cancel()
    async with asyncio.timeout(LIMIT):
        assert await waiter == "yes"
    assert owner.cancelled()
    assert not waiter.cancelled()
    assert len(server.times) == 2
    assert list(waiter_state["judge_response"][second.judge_key()].values()) == ["yes"]


async def test_a_cancelled_first_ask_in_one_rollout_does_not_cancel_its_twin(held, rubric) -> None:
    """Two reward functions of one rollout ask one rubric at once; the first is cancelled."""
    server = await held(YES)
    judge = rubric(server)
    state: dict = {}
    owner = ask(judge, state)
    await until_requests(server, 1)
    waiter = ask(judge, state)
    await asyncio.sleep(0.02)
    owner.cancel()
    async with asyncio.timeout(LIMIT):
        assert await waiter == "yes"
    assert owner.cancelled()
    assert len(server.times) == 2


async def test_a_cancelled_waiter_does_not_cancel_the_request_it_waited_on(held, rubric) -> None:
    server = await held(YES)
    judge = rubric(server)
    owner_state: dict = {}
    owner = ask(judge, owner_state)
    await until_requests(server, 1)
    waiter = ask(judge, owner_state)
    await asyncio.sleep(0.02)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    async with asyncio.timeout(LIMIT):
        assert await owner == "yes"
    assert len(server.times) == 1
    assert list(owner_state["judge_response"][judge.judge_key()].values()) == ["yes"]


async def test_many_waiters_after_a_cancelled_first_ask_send_one_more_request(held, rubric) -> None:
    server = await held(YES)
    judge = rubric(server)
    state: dict = {}
    owner = ask(judge, state)
    await until_requests(server, 1)
    waiters = [ask(judge, state) for _ in range(5)]
    await asyncio.sleep(0.02)
    owner.cancel()
    async with asyncio.timeout(LIMIT):
        assert await asyncio.gather(*waiters) == ["yes"] * 5
    assert len(server.times) == 2


async def test_sequential_asks_from_new_rollouts_are_not_shared(held, rubric) -> None:
    """Only asks in flight together share: a finished request answers no later rollout."""
    server = await held(YES)
    server.delay = 0.0
    judge = rubric(server)
    async with asyncio.timeout(LIMIT):
        assert await ask(judge, {}) == "yes"
        assert await ask(judge, {}) == "yes"
    assert len(server.times) == 2
