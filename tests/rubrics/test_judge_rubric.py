"""JudgeRubric against the project's model server: one question per rollout, sync clients,
replies of odd shapes (content parts, no text, no message, errors sent with status 200),
sampling settings that would break every request, judge prompts that cannot be filled,
and failures recorded as errors."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from loopback_http import ScriptedServer

from vfgym.inference.server import ModelServer
from vfgym.parsers import XMLParser
from vfgym.rubrics import (
    DEFAULT_JUDGE_PROMPT,
    REWARD_ERRORS,
    JudgeRubric,
    Rubric,
    RubricGroup,
    ToolRubric,
)

PROMPT = [{"role": "user", "content": "What is 2+2?"}]


COMPLETION = [{"role": "assistant", "content": "<answer>4</answer>"}]


Scripted = Callable[..., Awaitable[ScriptedServer]]


def completion_body(message: Any) -> dict[str, Any]:
    """A chat-completion body whose one choice holds `message` as it is."""
    choice: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
    if message is not ...:
        choice["message"] = message
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "j", "choices": [choice]}


async def says_yes(judge: Any, prompt: Any, completion: Any, answer: Any, state: Any) -> float:
    verdict = await judge(prompt, completion, answer, state)
    return 1.0 if verdict.strip().lower().startswith("yes") else 0.0


async def judged_by(server: ScriptedServer) -> tuple[float, dict[str, Any]]:
    """The `says_yes` metric of one rollout judged by `server`, and the rollout's State."""
    rubric = JudgeRubric(judge_client=server.client(), judge_model="j", funcs=[says_yes])
    state: dict[str, Any] = {}
    score = await rubric.score_rollout(PROMPT, COMPLETION, "4", state)
    return score.metrics["says_yes"], state


async def test_a_judge_reply_in_content_parts_is_read_as_its_text(scripted: Scripted) -> None:
    """A server that sends content as a list of parts said "yes": the reward functions
    get that text, not the list's Python repr (which reads as a "no")."""
    parts = [{"type": "text", "text": "ye"}, {"type": "text", "text": "s"}]
    server = await scripted((200, completion_body({"role": "assistant", "content": parts}), {}))
    value, state = await judged_by(server)
    assert value == 1.0
    [answers] = state["judge_response"].values()
    assert list(answers.values()) == ["yes"]


@pytest.mark.parametrize("content", [7, {"text": "yes"}, [{"type": "image_url", "image_url": {}}]])
async def test_a_judge_reply_without_text_is_a_recorded_error(
    scripted: Scripted, content: Any
) -> None:
    server = await scripted((200, completion_body({"role": "assistant", "content": content}), {}))
    value, state = await judged_by(server)
    assert math.isnan(value)
    [error] = state[REWARD_ERRORS]
    assert "judge model 'j'" in error["message"] and "text" in error["message"]
    assert state["judge_response"] == {}  # nothing cached: a later call asks again


@pytest.mark.parametrize("message", [..., None])
async def test_a_judge_choice_without_a_message_says_so(scripted: Scripted, message: Any) -> None:
    server = await scripted((200, completion_body(message), {}))
    value, state = await judged_by(server)
    assert math.isnan(value)
    [error] = state[REWARD_ERRORS]
    assert "AttributeError" not in error["message"]
    assert "no message" in error["message"] and "judge server" in error["message"]


async def test_an_error_sent_with_status_200_is_named_in_the_judge_error(
    scripted: Scripted,
) -> None:
    server = await scripted((200, {"error": {"message": "judge overloaded"}}, {}))
    value, state = await judged_by(server)
    assert math.isnan(value)
    [error] = state[REWARD_ERRORS]
    assert "no choices" in error["message"] and "judge overloaded" in error["message"]


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        ({"model": "other"}, "judge_model="),
        ({"messages": []}, "judge_prompt="),
        ({"stream": True}, "stream"),
    ],
)
def test_sampling_args_that_make_the_request_itself_are_refused(
    args: dict[str, Any], hint: str
) -> None:
    """Passed on, each would fail every judge call ("got multiple values for keyword
    argument 'model'", "returned no choices" for a stream) blamed on the server."""
    with pytest.raises(ValueError, match="judge_sampling_args") as caught:
        JudgeRubric(judge_client=object(), judge_sampling_args=args)
    assert hint in str(caught.value)


async def test_sampling_args_changed_later_are_checked_before_asking() -> None:
    async with ModelServer(lambda messages: "yes") as server:
        rubric = JudgeRubric(judge_client=server.client(), funcs=[says_yes])
        rubric.judge_sampling_args["model"] = "other"
        state: dict[str, Any] = {}
        score = await rubric.score_rollout(PROMPT, COMPLETION, "4", state)
        assert math.isnan(score.metrics["says_yes"])
        [error] = state[REWARD_ERRORS]
        assert "judge_model=" in error["message"]
        assert "multiple values" not in error["message"]
        assert server.requests == []  # nothing was sent
        rubric.judge_sampling_args["stream"] = False  # harmless: not a stream
        del rubric.judge_sampling_args["model"]
        score = await rubric.score_rollout(PROMPT, COMPLETION, "4", {})
        assert score.metrics["says_yes"] == 1.0


@pytest.mark.parametrize(
    "template",
    [
        "{answer!x}",  # no such conversion: every fill would raise
        "{answer:{response}}",  # the model's text as a format spec
        "{answer!r:^{0}}",  # a positional field inside a format spec
        "{question:d}",  # the question is text: an integer format fails on it
    ],
)
def test_judge_prompts_that_cannot_be_filled_are_refused_when_given(template: str) -> None:
    with pytest.raises(ValueError, match="judge_prompt"):
        JudgeRubric(judge_client=object(), judge_prompt=template)


async def test_a_judge_prompt_set_later_is_checked_and_used() -> None:
    async with ModelServer(lambda messages: "yes") as server:
        rubric = JudgeRubric(judge_client=server.client(), funcs=[says_yes])
        with pytest.raises(ValueError, match="unknown placeholder"):
            rubric.judge_prompt = "Grade {reply}"
        rubric.judge_prompt = "Is {response} the same as {answer}?"
        assert rubric.class_objects["judge_prompt"] == rubric.judge_prompt
        score = await rubric.score_rollout(PROMPT, COMPLETION, "4", {})
        assert score.metrics["says_yes"] == 1.0
        [request] = server.requests
        assert request["messages"][-1]["content"] == "Is <answer>4</answer> the same as 4?"


def grading_policy(messages: list[dict]) -> str:
    """A judge that says yes when the answer to grade block holds the reference answer."""
    text = messages[-1]["content"]
    reference = text.split("Reference answer:\n```\n")[1].split("\n```")[0]
    graded = text.split("Answer to grade:\n```\n")[1].split("\n```")[0]
    return "yes" if graded.strip() == reference.strip() else "no"


async def yes_reward(judge, prompt, completion, answer, state) -> float:
    verdict = await judge(prompt, completion, answer, state)
    return 1.0 if verdict.strip().lower().startswith("yes") else 0.0


async def verdict_length(judge, prompt, completion, answer, state) -> float:
    return float(len(await judge(prompt, completion, answer, state)))


@pytest.mark.parametrize("parallel", [False, True])
async def test_judge_asks_the_server_once_per_rollout(parallel: bool) -> None:
    async with ModelServer(grading_policy) as server:
        rubric = JudgeRubric(
            parser=XMLParser(["answer"]),
            parallelize_scoring=parallel,
            judge_client=server.client(),
            judge_model="judge-model",
            judge_sampling_args={"temperature": 0.0, "max_tokens": 8, "top_p": None},
            funcs=[yes_reward, verdict_length],
            weights=[1.0, 0.0],
        )
        state: dict = {}
        result = await rubric.score_rollout(PROMPT, COMPLETION, "4", state)
        assert result.metrics == {"yes_reward": 1.0, "verdict_length": 3.0, REWARD_ERRORS: 0.0}
        assert result.reward == 1.0

        [request] = server.requests
        assert request["model"] == "judge-model"
        assert request["temperature"] == 0.0
        assert request["max_tokens"] == 8
        assert "top_p" not in request
        [message] = request["messages"]
        assert message["role"] == "user"
        assert "What is 2+2?" in message["content"]
        assert "Reference answer:\n```\n4\n```" in message["content"]
        assert "Answer to grade:\n```\n4\n```" in message["content"]
        assert state["judge_response"] == {rubric.judge_key(): {message["content"]: "yes"}}

        wrong = [{"role": "assistant", "content": "<answer>5</answer>"}]
        result = await rubric.score_rollout(PROMPT, wrong, "4", {})
        assert result.metrics["yes_reward"] == 0.0
        assert len(server.requests) == 2


async def test_judge_works_with_a_sync_openai_client_without_blocking() -> None:
    async with ModelServer(grading_policy) as server:
        rubric = JudgeRubric(
            parser=XMLParser(["answer"]), judge_client=server.sync_client(), funcs=[yes_reward]
        )
        result = await rubric.score_rollout(PROMPT, COMPLETION, "4", {})
        assert result.reward == 1.0
        assert len(server.requests) == 1


async def test_a_failing_judge_server_is_a_recorded_error() -> None:
    async with ModelServer(grading_policy) as server:
        server.inject_faults("500")
        rubric = JudgeRubric(judge_client=server.client(), funcs=[yes_reward])
        state: dict = {}
        result = await rubric.score_rollout(PROMPT, COMPLETION, "4", state)
        assert math.isnan(result.metrics["yes_reward"])
        [error] = state["reward_errors"]
        assert error["type"] == "RuntimeError"
        assert "judge model 'gpt-4.1-nano' could not answer" in error["message"]
        assert state["judge_response"] == {}  # nothing cached from a failed call


async def test_judge_without_client_or_key_fails_on_use_not_construction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rubric = JudgeRubric(funcs=[yes_reward])  # no client is made here
    assert "judge_client" not in rubric.class_objects
    state: dict = {}
    result = await rubric.score_rollout(PROMPT, COMPLETION, "4", state)
    assert math.isnan(result.metrics["yes_reward"])
    assert "OPENAI_API_KEY" in state["reward_errors"][0]["message"]


def test_judge_prompt_placeholders_are_checked() -> None:
    assert "{question}" in DEFAULT_JUDGE_PROMPT
    with pytest.raises(ValueError, match=r"unknown placeholder\(s\) \['reference'\]"):
        JudgeRubric(judge_prompt="Q: {question} R: {reference}")
    with pytest.raises(ValueError, match="not a valid format string"):
        JudgeRubric(judge_prompt="broken {question")
    JudgeRubric(judge_prompt='JSON like {{"ok": true}} for {response}')


def correct(completion: Any) -> float:
    return 1.0


def search(query: str) -> str:
    """Search."""
    return query


@pytest.mark.parametrize("reply", ["", "   \n"])
async def test_an_empty_judge_reply_is_a_recorded_error_not_a_no(reply: str) -> None:
    async with ModelServer(lambda messages: reply) as server:
        rubric = JudgeRubric(judge_client=server.client(), funcs=[yes_reward])
        state: dict = {}
        result = await rubric.score_rollout(PROMPT, COMPLETION, "4", state)
        assert math.isnan(result.metrics["yes_reward"])
        assert result.metrics[REWARD_ERRORS] == 1.0
        [error] = state[REWARD_ERRORS]
        assert "empty reply" in error["message"]
        assert state["judge_response"] == {}  # nothing cached: a later call asks again


async def test_judges_in_a_group_each_score_every_rollout() -> None:
    """Two judges on loopback, one per rubric, over a batch with a failed rollout."""

    async with ModelServer(lambda messages: "yes") as server:
        group = RubricGroup(
            [
                JudgeRubric(judge_client=server.client(), funcs=[yes_reward]),
                Rubric([correct]),
                ToolRubric(tools=[search]),
            ]
        )
        states: list[dict] = [{}, {"error": "model server failed"}, {}]
        out = await group.score_rollouts(
            [PROMPT] * 3, [COMPLETION] * 3, ["4"] * 3, states, ["t"] * 3, [{}] * 3
        )
        assert out.reward[0] == out.reward[2] == 2.0 and math.isnan(out.reward[1])
        assert set(out.metrics) == {
            "yes_reward",
            "correct",
            "total_tool_calls",
            "search_calls",
            REWARD_ERRORS,
        }
        assert all(len(column) == 3 for column in out.metrics.values())
        assert len(server.requests) == 2  # the failed rollout is never judged


async def judged_without_state(judge: Any, prompt: Any, completion: Any, answer: Any) -> float:
    """A reward function that has no `state` (the type reference lets it default to None)."""
    verdict = await judge(prompt, completion, answer, None)
    return 1.0 if verdict.strip().lower().startswith("yes") else 0.0


async def test_the_judge_answers_a_reward_function_that_has_no_state() -> None:
    async with ModelServer(lambda messages: "yes") as server:
        rubric = JudgeRubric(
            funcs=[judged_without_state],
            parser=XMLParser(["answer"]),
            judge_client=server.client(),
        )
        state: dict = {}
        result = await rubric.score_rollout(PROMPT, COMPLETION, "4", state)
        assert result.metrics == {"judged_without_state": 1.0, REWARD_ERRORS: 0.0}
        assert "judge_response" not in state  # nothing to cache the verdict in
