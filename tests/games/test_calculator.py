"""Calculator: the safe evaluator, generated problems, exact scoring, policies over HTTP."""

from __future__ import annotations

from fractions import Fraction

import pytest
from game_play import evaluate_over_http
from quick_child import finishes_quickly
from vfgym.games import (
    calculator,
)
from vfgym.games import calculator as calc

import vfgym
from vfgym.envs.registry import describe
from vfgym.inference.server import ModelServer
from vfgym.parsers import XMLParser


@pytest.mark.parametrize(
    "expression,result",
    [
        ("2 + 3 * 4", "14"),
        ("(2 + 3) * 4", "20"),
        ("7 / 3", "7/3"),
        ("6 / 3", "2"),
        ("7 // 2 + 7 % 3", "4"),
        ("-3 ** 2", "-9"),
        ("(-3) ** 2", "9"),
        ("2 ** -2", "1/4"),
        ("0.1 + 0.2", "3/10"),  # decimals are exact, not binary floats
        ("-(4 - 10) // 4", "1"),
        ("1/3 + 1/6", "1/2"),
        ("12 \u00d7 3 \u00f7 8", "9/2"),
    ],
)
def test_calculator_is_exact(expression: str, result: str) -> None:
    assert calc.calculator(expression) == result


@pytest.mark.parametrize(
    "expression,message",
    [
        ("__import__('os').system('true')", "function calls are not allowed"),
        ("x + 1", "unknown name 'x'"),
        ("2 ^ 3", r"write powers as 2\*\*10"),
        ("1 / (2 - 2)", "division by zero"),
        ("5 % 0", "division by zero"),
        ("0 ** -1", "negative power"),
        ("2 ** 0.5", "whole-number exponent"),
        ("10 ** 5000", "exponents are limited"),
        ("9 ** 9 ** 9", "exponents are limited"),
        ("(10 ** 999) ** 999", "too large"),
        ("'ten'", "not a number"),
        ("True + 1", "not a number"),
        ("[1, 2]", "only numbers"),
        ("1 if 2 else 3", "only numbers"),
        ("3 < 4", "only numbers"),
        ("(1 + 2", "could not parse"),
        ("   ", "give an expression"),
        ("1+" * 300 + "1", "longer than"),
        ("-" * 300 + "1", "more than 200 parts"),
    ],
)
def test_calculator_refuses_anything_but_arithmetic(expression: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        calc.calculator(expression)


def test_answers_are_read_exactly() -> None:
    assert calc.parse_number("42") == 42
    assert calc.parse_number(" -7/3 ") == Fraction(-7, 3)
    assert calc.parse_number("2.5") == Fraction(5, 2)
    assert calc.parse_number("1,250.") == 1250
    assert calc.parse_number("$12") == 12
    assert calc.parse_number("about 12") is None
    assert calc.parse_number("1/0") is None
    assert calc.parse_number(None) is None


def test_problems_are_deterministic_and_the_text_gives_the_expression() -> None:
    a = calc.load_environment(num_examples=30, seed=1)
    b = calc.load_environment(num_examples=30, seed=1)
    c = calc.load_environment(num_examples=30, seed=2)
    assert [r["prompt"] for r in a.dataset] == [r["prompt"] for r in b.dataset]
    assert [r["answer"] for r in a.dataset] != [r["answer"] for r in c.dataset]
    assert len({r["info"]["template"] for r in a.dataset}) >= 6  # a spread of problem kinds
    for row in a.dataset + a.eval_dataset:
        question = row["prompt"][-1]["content"]
        assert calc.expression_for(question) == row["info"]["expression"]
        assert calc.calculator(row["info"]["expression"]) == row["answer"]


def test_a_hand_worked_problem() -> None:
    # Tickets: 3 adults at 12 and 4 children at 7 cost 64; paying 100 leaves 36.
    template = calc.TEMPLATES[9]
    question = template.text.format(a=12, b=7, c=3, d=4, e=100)
    assert calc.expression_for(question) == "100 - (12 * 3 + 7 * 4)"
    assert calc.calculator(calc.expression_for(question)) == "36"
    # Average speed: (120 + 80) / (2 + 3) = 40.
    question = calc.TEMPLATES[4].text.format(a=120, b=2, c=80, d=3)
    assert calc.calculator(calc.expression_for(question)) == "40"


def test_generated_answers_are_sane() -> None:
    for level in ("easy", "medium", "hard"):
        env = calc.load_environment(num_examples=40, difficulty=level, seed=3)
        for row in env.dataset:
            assert Fraction(row["answer"]) >= 0  # prices, counts and areas are never negative


def test_bad_knobs_are_refused() -> None:
    with pytest.raises(ValueError, match="difficulty"):
        calc.load_environment(difficulty="olympiad")
    with pytest.raises(ValueError, match="max_turns"):
        calc.load_environment(max_turns=0)


def test_module_describes_a_tool_task() -> None:
    info = describe("calculator")
    assert info.kind == "tool" and info.gym_id == "vfgym/Calculator-v0"
    assert not info.needs_sandbox
    env = calc.load_environment(num_examples=1)
    schema = env.oai_tools[0]["function"]
    assert schema["name"] == "calculator"
    assert schema["parameters"]["required"] == ["expression"]


async def test_reference_and_random_policies_over_http_on_50_seeds() -> None:
    env = vfgym.load_environment("calculator", num_examples=50, difficulty="hard")
    ref, rnd = await evaluate_over_http(env, 50)
    assert ref.reward == [1.0] * 50
    assert ref.metrics["tool_calls"] == [1.0] * 50
    assert ref.metrics["format_reward_func"] == [1.0] * 50
    assert all(s["tools_called"] == ["calculator"] for s in ref.state)
    assert sum(rnd.reward) <= 3
    assert rnd.metrics["tool_calls"] == [0.0] * 50


async def test_a_bad_tool_call_is_answered_and_the_episode_goes_on() -> None:
    env = calc.load_environment(num_examples=1, seed=4)
    question = env.eval_dataset[0]["prompt"][-1]["content"]

    def policy(messages: list[dict]) -> dict:
        tools = [m for m in messages if m.get("role") == "tool"]
        if not tools:
            call = {"name": "calculator", "arguments": '{"expression": "import os"}'}
            return {"role": "assistant", "content": "", "tool_calls": [{"function": call}]}
        if len(tools) == 1:
            assert tools[0]["content"].startswith("Error:")
            expression = calc.expression_for(question)
            call = {"name": "calculator", "arguments": f'{{"expression": "{expression}"}}'}
            return {"role": "assistant", "content": "", "tool_calls": [{"function": call}]}
        return {"role": "assistant", "content": f"<answer>{tools[-1]['content']}</answer>"}

    async with ModelServer(policy) as server:
        out = await env.evaluate(server.client(), "any", num_examples=1)
    assert out.reward == [1.0]
    assert out.metrics["tool_calls"] == [2.0]
    assert out.state[0]["tool_call_log"][0]["ok"] is False


HUGE_LITERALS = ["1e100000000", "1e-100000000", "2.5E99999999"]


def test_calculator_refuses_a_huge_exponent_literal_at_once() -> None:
    """A model's `1e100000000` must be refused like any other too-large value, not make
    the tool compute ten to the hundred millionth."""
    stdout = finishes_quickly(
        "from vfgym.games.calculator import calculator",
        f"""
        for literal in {HUGE_LITERALS!r}:
            try:
                calculator(literal)
            except ValueError as exc:
                print(exc)
            else:
                raise SystemExit(f"{{literal}} accepted")
        """,
    )
    assert stdout.count("too large") == len(HUGE_LITERALS)


def test_calculator_too_large_literal_says_so_in_its_own_words() -> None:
    """`1e5000` is over the size limit: the message is the tool's, not Python's
    int-to-string limit (which tells the model to call sys.set_int_max_str_digits)."""
    with pytest.raises(ValueError, match="too large") as caught:
        calculator.calculator("1e5000")
    assert "set_int_max_str_digits" not in str(caught.value)
    assert calculator.calculator("1e3") == "1000"
    assert calculator.calculator("2.5e-1 * 4") == "1"


def test_a_calculator_answer_with_a_decimal_comma_is_not_a_thousands_number() -> None:
    assert calc.parse_number("1,5") is None  # 1.5 written the European way, not 15
    assert calc.parse_number("1,2,5,0") is None
    assert calc.parse_number("1,250") == 1250 and calc.parse_number("-12,345.5") == -12345.5
    assert calc.parse_number("7/3") == Fraction(7, 3)
    parser = XMLParser(["answer"])
    rubric = calc.build_rubric(parser)
    completion = [{"role": "assistant", "content": "<answer>1,5</answer>"}]
    assert rubric.score_rollout_sync([], completion, "15", {}).reward == 0.0
