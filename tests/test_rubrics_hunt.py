"""Defects in rubrics and parsers met while writing reward functions, each pinned by a test."""

from __future__ import annotations

from typing import Any

import pytest
from test_judge_cache import COMPLETION, PROMPT, says_yes

from vfgym.inference.server import ModelServer
from vfgym.parsers import XMLParser
from vfgym.rubrics import REWARD_ERRORS, JudgeRubric, Rubric, RubricGroup


def completion_seen(completion: Any) -> float:
    return 1.0


def answer_seen(answer: Any) -> float:
    return 2.0


# -- RubricGroup ---------------------------------------------------------------------------


async def test_a_group_given_its_own_functions_adds_them_to_the_first_member() -> None:
    group = RubricGroup([Rubric([completion_seen])], funcs=[answer_seen], weights=[0.5])
    assert group.get_reward_func_names() == ["completion_seen", "answer_seen"]
    assert group.get_reward_weights() == [1.0, 0.5]
    result = await group.score_rollout(PROMPT, COMPLETION, "4", {})
    assert result.reward == 2.0


# -- XMLParser -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "format_score"),
    [("<answer >4</answer>", 0.4), ("<answer>4</answer >", 0.2), ("<answer>\n4\n</answer\n>", 0.2)],
)
def test_xml_tags_may_have_whitespace_before_the_closing_bracket(
    text: str, format_score: float
) -> None:
    parser = XMLParser(["think", "answer"])
    assert parser.parse(text).answer == "4"
    assert parser.parse_answer([{"role": "assistant", "content": text}]) == "4"
    # the format reward is verifiers 0.1.x's, which reads only the exact tags
    assert parser.score_format(text) == pytest.approx(format_score)


def test_an_answer_field_that_is_not_a_field_is_refused_when_the_parser_is_made() -> None:
    with pytest.raises(ValueError, match=r"answer_field 'final'.*fields"):
        XMLParser(["think", "answer"], answer_field="final")


def test_parse_answer_without_an_answer_field_says_so_instead_of_always_none() -> None:
    parser = XMLParser(["think", "code"])
    assert parser.parse("<code>x</code>").code == "x"  # everything else still works
    with pytest.raises(ValueError, match="answer_field="):
        parser.parse_answer("<code>x</code>")


async def judged_without_state(judge: Any, prompt: Any, completion: Any, answer: Any) -> float:
    """A reward function that has no `state` (the type reference lets it default to None)."""
    return says_yes(await judge(prompt, completion, answer, None))


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


# -- rollouts without a State ----------------------------------------------------------------


def raises() -> float:
    raise ValueError("cannot score")


async def test_call_reward_func_without_a_state_gives_nan_like_score_rollout() -> None:
    rubric = Rubric([raises])
    value = await rubric.call_reward_func(raises, PROMPT, COMPLETION, "4", None)  # type: ignore[arg-type]
    assert value != value  # NaN, not an AttributeError about None


async def test_a_group_scores_a_batch_with_a_missing_state_like_a_single_rubric() -> None:
    states: list[Any] = [None, {}]
    args = ([PROMPT] * 2, [COMPLETION] * 2, ["4"] * 2, states, ["t"] * 2, [{}] * 2)
    alone = await Rubric([completion_seen]).score_rollouts(*args)
    grouped = await RubricGroup([Rubric([completion_seen])]).score_rollouts(*args)
    assert grouped.reward == alone.reward == [1.0, 1.0]
    assert grouped.metrics == alone.metrics
