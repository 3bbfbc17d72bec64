"""JudgeRubric's per-rollout answer cache: one verdict per question *and* judge.

Two judges that see the same filled-in prompt but differ in model, server or
sampling arguments must each be asked and each keep their own verdict; the same
judge asked the same question twice in one rollout is asked once.
"""

from __future__ import annotations

import json
from typing import Any

from vfgym.inference.server import ModelServer
from vfgym.parsers import XMLParser
from vfgym.rubrics import REWARD_ERRORS, JudgeRubric, RubricGroup

PROMPT = [{"role": "user", "content": "What is 2+2?"}]
COMPLETION = [{"role": "assistant", "content": "<answer>4</answer>"}]


def says_yes(verdict: str) -> float:
    return 1.0 if verdict.strip().lower().startswith("yes") else 0.0


async def first_judge(judge: Any, prompt: Any, completion: Any, answer: Any, state: Any) -> float:
    return says_yes(await judge(prompt, completion, answer, state))


async def second_judge(judge: Any, prompt: Any, completion: Any, answer: Any, state: Any) -> float:
    return says_yes(await judge(prompt, completion, answer, state))


async def asks_twice(judge: Any, prompt: Any, completion: Any, answer: Any, state: Any) -> float:
    first = await judge(prompt, completion, answer, state)
    second = await judge(prompt, completion, answer, state)
    assert first == second
    return says_yes(second)


def pair(first: JudgeRubric, second: JudgeRubric) -> RubricGroup:
    """Two judge rubrics scoring one rollout, with metrics named apart."""
    first.add_reward_func(first_judge)
    second.add_reward_func(second_judge)
    return RubricGroup([first, second])


def judge(client: Any, model: str = "judge", **sampling: Any) -> JudgeRubric:
    return JudgeRubric(
        parser=XMLParser(["answer"]),
        judge_client=client,
        judge_model=model,
        judge_sampling_args=sampling or None,
    )


def agreeing_metrics(first: float, second: float) -> dict[str, float]:
    return {"first_judge": first, "second_judge": second, REWARD_ERRORS: 0.0}


# -- different judges, same question ------------------------------------------------------


async def test_judges_with_different_models_each_give_their_own_verdict() -> None:
    policies = {"lenient": lambda messages: "yes", "strict": lambda messages: "no"}
    async with ModelServer(policies) as server:
        group = pair(judge(server.client(), "lenient"), judge(server.client(), "strict"))
        state: dict = {}
        result = await group.score_rollout(PROMPT, COMPLETION, "4", state)
        assert result.metrics == agreeing_metrics(1.0, 0.0)
        assert [r["model"] for r in server.requests] == ["lenient", "strict"]


async def test_judges_on_different_servers_each_give_their_own_verdict() -> None:
    async with (
        ModelServer(lambda messages: "yes") as yes_server,
        ModelServer(lambda messages: "no") as no_server,
    ):
        group = pair(judge(yes_server.client()), judge(no_server.client()))
        state: dict = {}
        result = await group.score_rollout(PROMPT, COMPLETION, "4", state)
        assert result.metrics == agreeing_metrics(1.0, 0.0)
        assert len(yes_server.requests) == len(no_server.requests) == 1


def cold_says_yes(messages: list[dict], request: dict) -> str:
    """A judge whose verdict depends on its sampling temperature."""
    return "yes" if request.get("temperature") == 0.0 else "no"


async def test_judges_with_different_sampling_args_each_give_their_own_verdict() -> None:
    async with ModelServer(cold_says_yes) as server:
        client = server.client()
        group = pair(judge(client, temperature=0.0), judge(client, temperature=1.0))
        state: dict = {}
        result = await group.score_rollout(PROMPT, COMPLETION, "4", state)
        assert result.metrics == agreeing_metrics(1.0, 0.0)
        assert [r["temperature"] for r in server.requests] == [0.0, 1.0]


async def test_each_judge_keeps_its_verdict_when_a_rollout_is_scored_again() -> None:
    policies = {"lenient": lambda messages: "yes", "strict": lambda messages: "no"}
    async with ModelServer(policies) as server:
        group = pair(judge(server.client(), "lenient"), judge(server.client(), "strict"))
        state: dict = {}
        await group.score_rollout(PROMPT, COMPLETION, "4", state)
        result = await group.score_rollout(PROMPT, COMPLETION, "4", state)
        assert result.metrics == agreeing_metrics(1.0, 0.0)
        assert len(server.requests) == 2  # both answers came from the cache the second time


# -- the same judge, the same question -----------------------------------------------------


async def test_the_same_judge_in_two_rubrics_is_asked_once_per_rollout() -> None:
    async with ModelServer(lambda messages: "yes") as server:
        # Separate client objects for one server and model are still one judge; a
        # sampling argument left as None is not sent, so it does not make another.
        group = pair(
            judge(server.client(), temperature=0.0),
            judge(server.client(), temperature=0.0, top_p=None),
        )
        group.rubrics[0].add_reward_func(asks_twice)
        result = await group.score_rollout(PROMPT, COMPLETION, "4", {})
        assert result.metrics["first_judge"] == result.metrics["second_judge"] == 1.0
        assert result.metrics["asks_twice"] == 1.0
        assert len(server.requests) == 1


# -- what the State records ----------------------------------------------------------------


async def test_the_cache_names_each_judge_and_survives_a_json_round_trip() -> None:
    policies = {"lenient": lambda messages: "yes", "strict": lambda messages: "no"}
    async with ModelServer(policies) as server:
        lenient = judge(server.client(), "lenient", max_tokens=8)
        strict = judge(server.client(), "strict")
        group = pair(lenient, strict)
        state: dict = {}
        await group.score_rollout(PROMPT, COMPLETION, "4", state)
        [asked, _] = server.requests
        filled = asked["messages"][0]["content"]
        assert state["judge_response"] == {
            lenient.judge_key(): {filled: "yes"},
            strict.judge_key(): {filled: "no"},
        }
        assert json.loads(lenient.judge_key()) == {
            "model": "lenient",
            "base_url": str(server.client().base_url),
            "sampling_args": {"max_tokens": 8},
        }

        # States are written to results.jsonl; one read back still answers from the cache.
        reread = json.loads(json.dumps(state))
        result = await group.score_rollout(PROMPT, COMPLETION, "4", reread)
        assert result.metrics == agreeing_metrics(1.0, 0.0)
        assert len(server.requests) == 2
