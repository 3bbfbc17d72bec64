"""Python math: hand-worked problems and answers, generation, the reference in a real sandbox."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from game_play import evaluate_over_http, reference_in_sandbox
from quick_child import finishes_quickly
from vfgym.games import (
    python_math,
)
from vfgym.games import python_math as pm
from vfgym.games._base import item_rng

import vfgym
from vfgym.sandbox import DockerSandbox, SandboxConfig


def test_answers_are_read_exactly() -> None:
    assert pm.parse_values("42") == (42,)
    assert pm.parse_values(" 1,234,567 ") == (1234567,)
    assert pm.parse_values("-7/3") == (Fraction(-7, 3),)
    assert pm.parse_values("(3, -1/2, 4)") == (3, Fraction(-1, 2), 4)
    assert pm.parse_values("[3, -1/2, 4]") == (3, Fraction(-1, 2), 4)
    assert pm.parse_values("x = 5/2, y = -1") == (Fraction(5, 2), -1)
    assert pm.parse_values("2.5") == (Fraction(5, 2),)
    for junk in ("", "seven", "1/0", "(1, , 2)", "nan", "inf"):
        assert pm.parse_values(junk) is None, junk
    assert pm.answers_match("(14/6, 2)", "(7/3, 2)")
    assert pm.answers_match("1,000", "1000")
    assert not pm.answers_match("(2, 7/3)", "(7/3, 2)")  # order matters
    assert not pm.answers_match("(7/3)", "(7/3, 2)")
    assert not pm.answers_match("0.3333333333", "1/3")  # exact, not close
    assert not pm.answers_match(None, "1")


def test_hand_worked_counts_and_systems() -> None:
    assert [pm.derangements(n) for n in range(7)] == [1, 0, 1, 2, 9, 44, 265]
    # x1 + x2 + x3 = 5 with each xi <= 2: only the arrangements of (2, 2, 1).
    assert pm.bounded_solutions(5, 3, 2) == 3
    assert pm.bounded_solutions(4, 2, 9) == 5  # (0,4) .. (4,0)
    # 2x + y = 5, x - y = 1  ->  x = 2, y = 1;  x + 2y = 1, 3x + 4y = 2 -> (0, 1/2)
    assert pm.solve_linear([[2, 1], [1, -1]], [5, 1]) == (2, 1)
    assert pm.solve_linear([[1, 2], [3, 4]], [1, 2]) == (0, Fraction(1, 2))
    assert pm.solve_linear([[1, 2], [2, 4]], [1, 2]) is None  # singular
    assert pm.render_equation([3, -1, 0], ("x", "y", "z"), 7) == "3x - y = 7"
    assert pm.render_equation([-1, 1, -12], ("x", "y", "z"), -4) == "-x + y - 12z = -4"
    assert pm.format_value(Fraction(-6, 4)) == "-3/2"


def test_reference_code_is_read_from_the_problem_text() -> None:
    assert pm.solution_code("Compute the exact value of (12^3 + 1) * 2 - 5^2.") == (
        "print((12**3 + 1) * 2 - 5**2)"
    )
    assert pm.solution_code("Compute 7^222 mod 1000, the remainder of ...") == (
        "print(pow(7, 222, 1000))"
    )
    code = pm.solution_code(
        "Solve this system of linear equations for x, y:\n2x + y = 5\nx - y = 1\nAnswer with ..."
    )
    assert "[[2, 1, 5], [1, -1, 1]]" in code
    with pytest.raises(ValueError, match="not a python-math problem"):
        pm.solution_code("What is the capital of France?")


def test_items_are_deterministic_and_cover_every_family() -> None:
    a = pm.load_environment(num_examples=40, seed=3).dataset
    b = pm.load_environment(num_examples=40, seed=3).dataset
    c = pm.load_environment(num_examples=40, seed=4).dataset
    assert [r["prompt"] for r in a] == [r["prompt"] for r in b]
    assert [r["answer"] for r in a] == [r["answer"] for r in b]
    assert [r["answer"] for r in a] != [r["answer"] for r in c]
    assert {r["info"]["family"] for r in a} == set(pm.FAMILIES)
    only = pm.load_environment(num_examples=10, families=["linear"], difficulty="hard")
    assert {r["info"]["kind"] for r in only.dataset} == {"linear"}
    assert all(r["answer"].count(",") == 3 for r in only.dataset)  # four unknowns


def test_bad_knobs_are_refused() -> None:
    with pytest.raises(ValueError, match="difficulty"):
        pm.load_environment(difficulty="brutal")
    with pytest.raises(ValueError, match="families"):
        pm.load_environment(families=["calculus"])
    with pytest.raises(ValueError, match="max_turns"):
        pm.load_environment(max_turns=1)
    with pytest.raises(ValueError, match="max_invalid_moves"):
        pm.load_environment(max_invalid_moves=0)


async def test_replies_without_an_answer_and_bad_tool_calls_are_invalid_moves() -> None:
    env = pm.load_environment(num_examples=1, max_invalid_moves=3)
    row = env.dataset[0]
    state: dict[str, Any] = {"info": row["info"], "turn": 0, "prompt": row["prompt"]}
    messages = [*row["prompt"], {"role": "assistant", "content": "I think it is big."}]
    assert not await env.is_completed(messages, state)
    reply, state = await env.env_response(messages, state)
    assert (
        "holds no answer" in reply[0]["content"] and "2 more invalid moves" in reply[0]["content"]
    )
    bad_call = {"id": "c1", "type": "function", "function": {"name": "python", "arguments": "{x"}}
    messages += [*reply, {"role": "assistant", "content": "", "tool_calls": [bad_call]}]
    reply, state = await env.env_response(messages, state)
    assert reply[0]["role"] == "tool" and "not valid JSON" in reply[0]["content"]
    unknown = {"id": "c2", "type": "function", "function": {"name": "rm", "arguments": "{}"}}
    messages += [*reply, {"role": "assistant", "content": "", "tool_calls": [unknown]}]
    reply, state = await env.env_response(messages, state)
    assert state["invalid_moves"] == 3
    assert "last invalid move" in reply[-1]["content"]
    assert await env.is_completed(messages + reply, state)
    score = await env.rubric.score_rollout(row["prompt"], messages[2:], row["answer"], state)
    assert score.reward == 0.0 and score.metrics["invalid_moves"] == 3.0


async def test_reference_code_is_right_on_60_seeds_in_one_sandbox(
    sandbox_config: SandboxConfig,
) -> None:
    items = [
        pm.generate_item(item_rng("python-math", 11, i), pm.DIFFICULTIES[i % 3], pm.FAMILIES)
        for i in range(60)
    ]
    env = pm.load_environment(num_examples=1)
    async with DockerSandbox(sandbox_config) as sandbox:
        for question, info, answer in items:
            _, result, got = await reference_in_sandbox(env, sandbox, question)
            assert pm.answers_match(got, answer), (info, question, result.summary())
    assert {info["family"] for _, info, _ in items} == set(pm.FAMILIES)
    assert len({info["kind"] for _, info, _ in items}) >= 9


async def test_reference_and_random_policies_over_http(sandbox_config: SandboxConfig) -> None:
    env = vfgym.load_environment(
        "python-math", num_examples=6, seed=2, sandbox_config=sandbox_config, pool_size=1
    )
    ref, rnd = await evaluate_over_http(env, 6)
    assert ref.reward == [1.0] * 6
    assert ref.metrics["tool_calls"] == [1.0] * 6 and ref.metrics["format_reward"] == [1.0] * 6
    assert [s["tools_called"] for s in ref.state] == [["python"]] * 6
    assert sum(rnd.reward) == 0.0 and rnd.metrics["tool_calls"] == [0.0] * 6


def test_python_math_scoring_an_answer_with_a_huge_exponent_ends_at_once() -> None:
    """The rubric reads the model's answer with `Fraction`; an exponent in the hundreds of
    millions must read as no answer, not stall scoring."""
    answers = ["1e100000000", "(1, 1e-999999999)", "x = 3E99999999"]
    stdout = finishes_quickly(
        "from vfgym.games.python_math import answers_match",
        f"""
        print([answers_match(answer, "3") for answer in {answers!r}])
        """,
    )
    assert stdout.strip() == "[False, False, False]"


def test_python_math_still_reads_small_exponents() -> None:
    assert python_math.answers_match("1e3", "1000")
    assert python_math.answers_match("(2.5e-1, 3)", "(1/4, 3)")


def _linear_item(index: int) -> tuple[str, str]:
    question, _, answer = pm.generate_item(item_rng("python-math", 0, index), "easy", ("linear",))
    return question, answer


def test_a_pair_whose_second_value_has_three_digits_is_read_as_a_pair() -> None:
    """Seed 0, index 130 of easy linear systems has the solution (-129, 174): it is not the
    number -129,174 written with a thousands separator."""
    question, expected = _linear_item(130)
    assert expected == "(-129, 174)" and "for x, y:" in question
    assert pm.parse_values(expected) == (-129, 174)
    assert pm.answers_match("x = -129, y = 174", expected)
    assert pm.answers_match("(-129,174)", expected)
    assert not pm.answers_match("-129174", expected)
    assert not pm.answers_match("-129,174", expected)
    assert pm.answers_match("1,234,567", "1234567")  # a lone number keeps its separators


def test_named_values_are_matched_by_name_not_by_position() -> None:
    assert pm.answers_match("y = 174, x = -129", "(-129, 174)")
    assert pm.answers_match("z = 4, x = 3, y = -1/2", "(3, -1/2, 4)")
    assert not pm.answers_match("y = -129, x = 174", "(-129, 174)")
    assert not pm.answers_match("x = 1, x = 2", "(1, 2)")  # one unknown named twice


def test_the_order_of_chosen_families_does_not_change_the_items() -> None:
    chosen = ["linear", "arithmetic", "combinatorics"]
    one = pm.load_environment(num_examples=12, seed=3, families=chosen).dataset
    other = pm.load_environment(num_examples=12, seed=3, families=chosen[::-1]).dataset
    assert [r["info"] for r in one] == [r["info"] for r in other]
    assert [r["prompt"] for r in one] == [r["prompt"] for r in other]
