"""`MathRubric`: math-verify's equality of boxed answers, as verifiers 0.1.x scored it."""

from __future__ import annotations

import pytest

pytest.importorskip(
    "math_verify", reason="MathRubric needs the math extra: pip install 'vfgym[math]'"
)

import vfgym as vf
from vfgym.rubrics.math_rubric import MathRubric


def turn(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


@pytest.mark.parametrize(
    ("text", "answer", "reward"),
    [
        ("so \\boxed{\\frac{1}{2}}", "0.5", 1.0),
        ("<think>\n2+2\n</think>\n\\boxed{4}", "4", 1.0),
        ("\\boxed{2x+2}", "2(x+1)", 1.0),
        ("\\boxed{5}", "4", 0.0),
        ("no box at all", "4", 0.0),  # the whole text is not a number
        ("", "4", 0.0),
    ],
)
def test_the_reward_is_mathematical_equality(text: str, answer: str, reward: float) -> None:
    rubric = MathRubric()
    assert rubric.correct_answer_reward_func(rubric.parser, turn(text), answer) == reward


async def test_it_scores_a_rollout_as_a_rubric() -> None:
    rubric = MathRubric(funcs=[lambda completion: 0.5], weights=[0.2])
    score = await rubric.score_rollout(
        prompt=[{"role": "user", "content": "1/2?"}],
        completion=turn("\\boxed{\\dfrac{2}{4}}"),
        answer="1/2",
        state={},
    )
    assert score.metrics["correct_answer_reward_func"] == 1.0
    assert score.reward == pytest.approx(0.2 * 0.5 + 1.0)


def test_it_is_exported_and_its_default_parser_reads_the_last_box() -> None:
    assert vf.MathRubric is MathRubric
    parser = MathRubric().parser
    assert isinstance(parser, vf.MaybeThinkParser)
    assert parser.parse_answer(turn("\\boxed{1} then \\boxed{2}")) == "2"
