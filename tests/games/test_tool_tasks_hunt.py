"""Defects found in the built-in tool tasks, each pinned by the test that exposed it.

Scoring of code-tests answers that dodge the per-test time limit or return values
the host cannot read, the answer readers of python-math and calculator, the knobs
of the tool-task loaders, driven through the real environments and, where code
runs, a real Docker sandbox.
"""

from __future__ import annotations

import json
import time
from fractions import Fraction
from typing import Any

import pytest
from vfgym.games import calculator as calc
from vfgym.games import code_tests as ct
from vfgym.games import python_math as pm
from vfgym.games import shell_files as sf
from vfgym.games._base import item_rng
from vfgym.games._code_bank import SPECS, reference_function

from vfgym.parsers import XMLParser
from vfgym.sandbox import DockerSandbox, SandboxConfig

BANK = {spec.name: spec for spec in SPECS}
_DIVISORS = reference_function(BANK["count_divisors"], {})
#: Four hidden tests of `count_divisors`, with the expected values the host keeps.
DIVISOR_TESTS = [{"args": [n], "expected": _DIVISORS(n)} for n in (1, 12, 36, 97)]
#: A right `count_divisors` body, for answers that differ only in how they misbehave.
RIGHT_BODY = "    return sum(1 for d in range(1, n + 1) if n % d == 0)\n"


# --------------------------------------------------- code-tests: per-test time limit


async def test_a_test_that_swallows_its_timeout_still_fails(
    sandbox_config: SandboxConfig,
) -> None:
    """A broad `except Exception` in a slow loop catches the alarm's TimeoutError and runs
    on: the test took longer than its limit, so it must fail all the same."""
    code = (
        "import time\n"
        "def count_divisors(n):\n"
        "    end = time.monotonic() + 0.8\n"
        "    while time.monotonic() < end:\n"
        "        try:\n"
        "            sum(range(5000))\n"
        "        except Exception:\n"
        "            pass\n" + RIGHT_BODY
    )
    async with DockerSandbox(sandbox_config) as sandbox:
        passed = await ct.run_hidden_tests(sandbox, code, "count_divisors", DIVISOR_TESTS, 0.3)
    assert passed == [False] * 4


async def test_an_answer_that_disarms_the_timer_does_not_escape_the_limit(
    sandbox_config: SandboxConfig,
) -> None:
    """Top-level code that replaces `signal.setitimer` (and the clock) must not let slow
    tests pass: the limit is judged with what the harness holds from before the answer."""
    code = (
        "import signal, time\n"
        "signal.setitimer = lambda *args, **kwargs: (0.0, 0.0)\n"
        "_real = time.monotonic\n"
        "time.monotonic = lambda: 0.0\n"
        "def count_divisors(n):\n"
        "    time.sleep(0.6)\n" + RIGHT_BODY
    )
    async with DockerSandbox(sandbox_config) as sandbox:
        passed = await ct.run_hidden_tests(sandbox, code, "count_divisors", DIVISOR_TESTS, 0.3)
    assert passed == [False] * 4


async def test_fast_tests_beside_a_slow_one_keep_their_credit(
    sandbox_config: SandboxConfig,
) -> None:
    code = (
        "import time\n"
        "def count_divisors(n):\n"
        "    if n == 36:\n"
        "        try:\n"
        "            time.sleep(1)\n"
        "        except BaseException:\n"
        "            time.sleep(0.5)\n" + RIGHT_BODY
    )
    async with DockerSandbox(sandbox_config) as sandbox:
        passed = await ct.run_hidden_tests(sandbox, code, "count_divisors", DIVISOR_TESTS, 0.3)
    assert passed == [True, True, False, True]


# ------------------------------------------ code-tests: results the host cannot read


def test_a_result_nested_too_deep_to_decode_fails_its_test() -> None:
    deep = "[" * 5000 + "]" * 5000
    report = "\n".join(json.dumps(text) for text in (deep, "4")).encode() + b"\n"
    tests = [{"args": [1], "expected": 1}, {"args": [2], "expected": 4}]
    assert ct.compare_report(report, tests) == [False, True]


async def test_a_deeply_nested_return_value_scores_zero_not_a_scoring_error(
    sandbox_config: SandboxConfig,
) -> None:
    """The answer's own output must never turn into an error of the rubric."""
    env = ct.load_environment(
        num_examples=1, specs=["count_divisors"], sandbox_config=sandbox_config, pool_size=1
    )
    row = env.dataset[0]
    code = (
        "import sys\n"
        "sys.setrecursionlimit(100000)\n"
        "def count_divisors(n):\n"
        "    x = []\n"
        "    for _ in range(5000):\n"
        "        x = [x]\n"
        "    return x\n"
    )
    completion = [{"role": "assistant", "content": f"```python\n{code}```"}]
    state: dict[str, Any] = {"info": row["info"], "turn": 1, "invalid_moves": 0}
    async with env:
        score = await env.rubric.score_rollout(row["prompt"], completion, row["answer"], state)
    assert score.metrics["reward_errors"] == 0.0, state.get("reward_errors")
    assert score.reward == 0.0 and score.metrics["tests_passed"] == 0.0


# ------------------------------------------------- code-tests: slow top-level code


async def test_top_level_code_is_not_charged_to_the_tests(sandbox_config: SandboxConfig) -> None:
    """Top-level work slower than a test's limit (but within the sandbox's own time limit,
    as a `python` tool call) is not a test, so the tests still pass."""
    code = "import time\ntime.sleep(1.0)\ndef count_divisors(n):\n" + RIGHT_BODY
    async with DockerSandbox(sandbox_config) as sandbox:
        passed = await ct.run_hidden_tests(sandbox, code, "count_divisors", DIVISOR_TESTS, 0.3)
    assert passed == [True] * 4


async def test_top_level_code_past_the_sandbox_timeout_fails_every_test_at_once(
    sandbox_config: SandboxConfig,
) -> None:
    """The documented rule: an answer whose top level outlasts `SandboxConfig.timeout` (the
    `python` tool's limit too) defines nothing; its tests fail without being run."""
    code = "import time\ntime.sleep(30)\ndef count_divisors(n):\n" + RIGHT_BODY
    async with DockerSandbox(sandbox_config.replace(timeout=1.5)) as sandbox:
        started = time.monotonic()
        passed = await ct.run_hidden_tests(sandbox, code, "count_divisors", DIVISOR_TESTS, 2)
        took = time.monotonic() - started
    assert passed == [False] * 4
    assert took < 8, f"the tests ran on after the top level timed out ({took:.1f}s)"
    assert "top-level code" in ct.SYSTEM_PROMPT  # the model is told the rule


# ------------------------------------------------------------ python-math answers


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


# ------------------------------------------------------------- calculator answers


def test_a_calculator_answer_with_a_decimal_comma_is_not_a_thousands_number() -> None:
    assert calc.parse_number("1,5") is None  # 1.5 written the European way, not 15
    assert calc.parse_number("1,2,5,0") is None
    assert calc.parse_number("1,250") == 1250 and calc.parse_number("-12,345.5") == -12345.5
    assert calc.parse_number("7/3") == Fraction(7, 3)
    parser = XMLParser(["answer"])
    rubric = calc.build_rubric(parser)
    completion = [{"role": "assistant", "content": "<answer>1,5</answer>"}]
    assert rubric.score_rollout_sync([], completion, "15", {}).reward == 0.0


# ---------------------------------------------------------------- loader knobs


@pytest.mark.parametrize("module", [pm, sf, ct, calc])
@pytest.mark.parametrize("seed", ["0", 1.5, None, True])
def test_a_seed_that_is_not_a_whole_number_is_refused(module: Any, seed: Any) -> None:
    """Items are seeded by the text of `seed`: "0", 0.0 or True would each quietly give a
    dataset other than seed 0's."""
    with pytest.raises(TypeError, match="seed"):
        module.load_environment(num_examples=1, seed=seed)


@pytest.mark.parametrize("module", [pm, sf, ct, calc])
@pytest.mark.parametrize("max_turns", ["8", 2.5, None])
def test_a_turn_limit_that_is_not_a_whole_number_is_refused_clearly(
    module: Any, max_turns: Any
) -> None:
    with pytest.raises(TypeError, match="max_turns must be a whole number"):
        module.load_environment(num_examples=1, max_turns=max_turns)
