"""Rubrics beyond the base one, used as a user would: judge replies of odd shapes, judge
settings that would break every request, groups given settings of their own, classes
given as reward functions, and a group scored at a Gym episode's end."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from loopback_http import ScriptedServer

from vfgym.envs.multiturn_env import MultiTurnEnv
from vfgym.inference.server import ModelServer
from vfgym.parsers import XMLParser
from vfgym.rubrics import REWARD_ERRORS, JudgeRubric, RewardSpec, Rubric, RubricGroup
from vfgym.rubrics.rubric import rollout_args

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


# -- what the judge replied -------------------------------------------------------------


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


# -- judge settings ---------------------------------------------------------------------


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


# -- a group's own settings -------------------------------------------------------------


def parsed_answer_is_right(parser: Any, completion: Any, answer: Any) -> float:
    return 1.0 if parser.parse_answer(completion) == answer else 0.0


@pytest.mark.parametrize(
    "settings", [{"parser": XMLParser(["answer"])}, {"class_objects": {"unit": "cm"}}]
)
def test_a_groups_functions_with_settings_of_its_own_are_refused(
    settings: dict[str, Any],
) -> None:
    """The group's functions join its first member and would be scored with that
    member's parser (a plain Parser: the whole text as the answer, a silent 0)."""
    with pytest.raises(TypeError, match=r"Rubric\(funcs=") as caught:
        RubricGroup([Rubric()], funcs=[parsed_answer_is_right], **settings)
    assert next(iter(settings)) in str(caught.value)
    group = RubricGroup([Rubric()], **settings)  # a group's settings alone stay allowed
    with pytest.raises(TypeError, match="first member"):
        group.add_reward_func(parsed_answer_is_right)


async def test_the_advised_member_scores_with_its_parser() -> None:
    parser = XMLParser(["answer"])
    group = RubricGroup([Rubric(), Rubric(funcs=[parsed_answer_is_right], parser=parser)])
    score = await group.score_rollout(PROMPT, COMPLETION, "4", {})
    assert score.metrics["parsed_answer_is_right"] == 1.0


# -- classes given as reward functions --------------------------------------------------


class AsyncJudgeLike:
    async def __call__(self, answer: Any) -> float:
        return 1.0


class SyncCallable:
    def __call__(self, answer: Any) -> float:
        return 1.0


@pytest.mark.parametrize("cls", [AsyncJudgeLike, SyncCallable])
def test_a_class_whose_instances_are_the_reward_function_is_refused(cls: type) -> None:
    """Calling the class makes an instance, never a number: an async `__call__` made
    it look async too (an "can't be used in 'await' expression" error per rollout)."""
    with pytest.raises(TypeError, match=rf"{cls.__name__}\(\)"):
        Rubric(funcs=[cls])
    assert Rubric(funcs=[cls()]).get_reward_func_names() == [cls.__name__]


class Score:
    """A class used as a function: its instances are numbers."""

    def __init__(self, answer: Any) -> None:
        self.value = 1.0 if answer == "4" else 0.0

    def __float__(self) -> float:
        return self.value


async def test_a_class_whose_instances_are_numbers_scores_both_ways() -> None:
    assert RewardSpec.of(Score).is_async is False
    rubric = Rubric(funcs=[Score])
    state = {"prompt": PROMPT, "completion": COMPLETION, "answer": "4"}
    score = await rubric.score_rollout(PROMPT, COMPLETION, "4", {})
    assert rubric.score_state_sync(state) == (score.reward, score.metrics) == (1.0, score.metrics)


# -- a group at a Gym episode's end and on the event loop --------------------------------


class SayDone(MultiTurnEnv):
    """One turn: the episode ends whatever the model says."""

    def is_completed(self, messages: Any, state: Any, **kwargs: Any) -> bool:
        return state["turn"] >= 1

    def env_response(self, messages: Any, state: Any, **kwargs: Any) -> tuple[Any, Any]:
        return [{"role": "user", "content": "ok"}], state


def said_done(completion: Any) -> float:
    return 1.0 if "done" in completion[-1]["content"] else 0.0


def fails(state: Any) -> float:
    raise ValueError("no score for this rollout")


def not_finite(state: Any) -> float:
    return math.nan


def said_done_too(completion: Any) -> float:
    return 0.5


said_done_too.__name__ = "said_done"  # the same metric name in another member


async def also_done(completion: Any) -> float:
    return 1.0


def group_of_every_kind() -> RubricGroup:
    return RubricGroup(
        [
            Rubric(funcs=[said_done, fails], weights=[1.0, 3.0]),
            Rubric(funcs=[said_done_too, not_finite, also_done], weights=[2.0, 1.0, 0.25]),
        ]
    )


def without_timing(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in state.items() if k != "timing"}


async def test_a_group_scores_a_gym_episode_as_it_scores_on_the_event_loop() -> None:
    """Same reward, metrics (summed same-named ones, NaN for the failed) and error
    records, whether the episode's end scores it or `score_rollout(s)` does."""
    from vfgym.gym import GymEnv

    env = SayDone(dataset=[{"question": "Say done.", "answer": ""}], rubric=group_of_every_kind())
    gym_env = GymEnv(env)
    try:
        await asyncio.to_thread(gym_env.reset, options={"index": 0})
        *_, terminated, _, info = await asyncio.to_thread(gym_env.step, "done")
        state = gym_env.state
    finally:
        gym_env.close()
    assert terminated
    expected_metrics = {
        "said_done": 1.5,
        "fails": math.nan,
        "not_finite": math.nan,
        "also_done": 1.0,
        REWARD_ERRORS: 2.0,
    }
    assert info["episode_reward"] == 1.0 + 2 * 0.5 + 0.25
    assert list(info["metrics"]) == list(expected_metrics)
    for key, value in expected_metrics.items():
        assert info["metrics"][key] == pytest.approx(value, nan_ok=True)
    assert [e["func"] for e in state[REWARD_ERRORS]] == ["fails", "not_finite"]

    again = {k: v for k, v in state.items() if k != REWARD_ERRORS}
    score = await env.rubric.score_rollout(*rollout_args(again))
    assert score.reward == info["episode_reward"]
    assert without_timing(again) == without_timing(state)
    columns = await env.rubric.score_rollouts(
        [state["prompt"]], [state["completion"]], [""], [{}], ["default"], [{}]
    )
    assert columns.reward == [info["episode_reward"]]
    for key, value in expected_metrics.items():
        assert score.metrics[key] == pytest.approx(value, nan_ok=True)
        assert columns.metrics[key] == [pytest.approx(value, nan_ok=True)]


@pytest.mark.parametrize("setting", [{"offload_sync": "always"}, {"parallelize_scoring": False}])
def test_a_setting_only_members_use_is_refused_by_the_group(setting) -> None:
    """Accepted, it was silently ignored: each member scores with its own."""
    with pytest.raises(TypeError, match="set it on the member rubrics"):
        RubricGroup([Rubric(funcs=[lambda completion: 1.0])], **setting)
