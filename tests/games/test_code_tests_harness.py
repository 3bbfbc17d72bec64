"""The code-tests harness keeps its per-test time limit whatever the answer rebinds.

The answer runs in the same interpreter as the harness; an answer that finds the
harness's entry point (in its globals, in `__main__`, or in the globals of the
frames that run it) and wraps it with a larger limit must still fail its slow tests.
Driven through a real Docker sandbox, as code-tests scores answers.
"""

from __future__ import annotations

import dis
import json
import math
import time
import types
from typing import Any

import pytest
from vfgym.games import code_tests as ct
from vfgym.games._base import item_rng
from vfgym.games._code_bank import SPECS, reference_function

from vfgym.envs.registry import load_environment
from vfgym.sandbox import DockerSandbox, SandboxConfig

_DIVISORS = reference_function({spec.name: spec for spec in SPECS}["count_divisors"], {})


TESTS = [{"args": [n], "expected": _DIVISORS(n)} for n in (1, 12, 36, 97)]


LIMIT = 0.3


#: Top-level code that wraps every harness callable it can reach by name so that each
#: call gets a limit of 100 seconds instead of the one the host asked for.
HIJACK = """import sys

def _widen(real):
    def wrapper(*args, **kwargs):
        args = [100.0 if type(a) is float and a < 5 else a for a in args]
        return real(*args, **kwargs)
    return wrapper

_spaces = [globals(), sys.modules["__main__"].__dict__]
_frame = sys._getframe(0)
while _frame is not None:
    _spaces.append(_frame.f_globals)
    _frame = _frame.f_back
for _space in _spaces:
    for _name, _value in list(_space.items()):
        if _name.startswith("_vfgym") and callable(_value):
            _space[_name] = _widen(_value)
"""


SLOW = "import time\ndef count_divisors(n):\n    time.sleep(0.6)\n"


FAST = "def count_divisors(n):\n"


BODY = "    return sum(1 for d in range(1, n + 1) if n % d == 0)\n"


async def test_an_answer_that_wraps_the_harness_still_hits_the_per_test_limit(
    sandbox_config: SandboxConfig,
) -> None:
    async with DockerSandbox(sandbox_config) as sandbox:
        slow = await ct.run_hidden_tests(
            sandbox, HIJACK + SLOW + BODY, "count_divisors", TESTS, LIMIT
        )
        await sandbox.reset()
        fast = await ct.run_hidden_tests(
            sandbox, HIJACK + FAST + BODY, "count_divisors", TESTS, LIMIT
        )
    assert fast == [True] * 4  # the hijack itself does not break a right answer
    assert slow == [False] * 4  # but it gains no time


async def test_the_answer_does_not_see_the_harness_in_its_namespace(
    sandbox_config: SandboxConfig,
) -> None:
    """Neither the answer's globals nor `__main__` hold anything of the harness."""
    code = (
        "import sys\n"
        "_seen = [n for n in list(globals()) + dir(sys.modules['__main__']) if 'vfgym' in n]\n"
        "def count_divisors(n):\n"
        "    return len(_seen) * 1000 + sum(1 for d in range(1, n + 1) if n % d == 0)\n"
    )
    async with DockerSandbox(sandbox_config) as sandbox:
        passed = await ct.run_hidden_tests(sandbox, code, "count_divisors", TESTS, 2)
    assert passed == [True] * 4


def _global_loads(code: types.CodeType) -> set[str]:
    """Names that `code` and the functions nested in it look up as globals."""
    names = {
        ins.argval
        for ins in dis.get_instructions(code)
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL")
    }
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_loads(const)
    return names


def test_the_harness_looks_up_no_name_the_answer_could_rebind() -> None:
    """Everything the harness uses is bound in its own scope before any answer code runs."""
    module = compile(ct._HARNESS, "<harness>", "exec")
    (outer,) = [c for c in module.co_consts if isinstance(c, types.CodeType)]
    inner = [c for c in outer.co_consts if isinstance(c, types.CodeType)]
    assert inner, "the harness defines its functions inside one outer function"
    assert {name for code in inner for name in _global_loads(code)} == set()


BANK = {spec.name: spec for spec in SPECS}


#: Four hidden tests of `count_divisors`, with the expected values the host keeps.
DIVISOR_TESTS = [{"args": [n], "expected": _DIVISORS(n)} for n in (1, 12, 36, 97)]


#: A right `count_divisors` body, for answers that differ only in how they misbehave.
RIGHT_BODY = "    return sum(1 for d in range(1, n + 1) if n % d == 0)\n"


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


def _item(spec: str, difficulty: str = "hard", seed: int = 0) -> tuple[dict[str, Any], str]:
    _, info, source = ct.generate_item(item_rng("code-tests", seed, 0), difficulty, (spec,))
    return info, source


@pytest.mark.parametrize("timeout", [math.inf, math.nan, -1.0, 0, True])
def test_test_timeouts_that_cannot_time_a_test_are_refused(timeout: Any) -> None:
    with pytest.raises(ValueError, match="test_timeout"):
        ct.CodeTestsEnv(dataset=[{"question": "q", "answer": "a"}], test_timeout=timeout)
    with pytest.raises((ValueError, TypeError), match="test_timeout"):
        load_environment("code-tests", num_examples=1, test_timeout=timeout)


@pytest.mark.parametrize("limit", [math.inf, math.nan, 0.0])
async def test_run_hidden_tests_refuses_a_limit_it_cannot_use(limit: float) -> None:
    with pytest.raises(ValueError, match="limit"):
        await ct.run_hidden_tests(None, "", "f", [], limit)  # type: ignore[arg-type]


async def test_hidden_test_results_do_not_depend_on_the_output_limit(
    sandbox_config: SandboxConfig,
) -> None:
    """The tool output limit is for what the model reads; scoring must not be cut by it."""
    info, source = _item("chunk_list")
    async with DockerSandbox(sandbox_config.replace(output_limit=256)) as sandbox:
        passed = await ct.run_hidden_tests(sandbox, source, "chunk_list", info["tests"], 2)
    assert passed == [True] * len(info["tests"])


async def test_partial_answers_keep_their_credit_beside_long_wrong_outputs(
    sandbox_config: SandboxConfig,
) -> None:
    info, source = _item("chunk_list")
    right = source.replace("def chunk_list(", "def _right(")
    code = (
        f"{right}\ndef chunk_list(items):\n"
        "    return _right(items) if len(items) < 3 else 'x' * 19000"
    )
    async with DockerSandbox(sandbox_config) as sandbox:
        passed = await ct.run_hidden_tests(sandbox, code, "chunk_list", info["tests"], 2)
    assert passed == [len(test["args"][0]) < 3 for test in info["tests"]]
    assert 0 < sum(passed) < len(passed)


async def test_a_test_that_hangs_past_its_alarm_keeps_the_results_before_it(
    sandbox_config: SandboxConfig,
) -> None:
    """A hang in C code ignores the per-test alarm; the tests run before it still count."""
    divisors = reference_function(BANK["count_divisors"], {})
    tests = [{"args": [n], "expected": divisors(n)} for n in (1, 12, 36, 97)]
    code = (
        "def count_divisors(n):\n"
        "    if n == 36:\n"
        "        sum(range(10**13))\n"
        "    return len([d for d in range(1, n + 1) if n % d == 0])"
    )
    async with DockerSandbox(sandbox_config) as sandbox:
        passed = await ct.run_hidden_tests(sandbox, code, "count_divisors", tests, 0.3)
    assert passed == [True, True, False, False]


async def test_answers_that_rebind_builtin_names_are_still_scored(
    sandbox_config: SandboxConfig,
) -> None:
    """The harness shares the answer's globals; names the answer rebinds must not break it."""
    divisors = reference_function(BANK["count_divisors"], {})
    tests = [{"args": [n], "expected": divisors(n)} for n in (1, 12, 36)]
    code = (
        "callable = len = open = globals = None\n"
        "def count_divisors(n):\n"
        "    return sum(1 for d in range(1, n + 1) if n % d == 0)"
    )
    async with DockerSandbox(sandbox_config) as sandbox:
        passed = await ct.run_hidden_tests(sandbox, code, "count_divisors", tests, 2)
    assert passed == [True, True, True]


async def test_an_answer_that_forks_is_scored_by_its_own_results(
    sandbox_config: SandboxConfig,
) -> None:
    """The forked copy returns into the harness too; it must not add lines to the report."""
    divisors = reference_function(BANK["count_divisors"], {})
    tests = [{"args": [n], "expected": divisors(n)} for n in (1, 12, 36, 97)]
    code = (
        "import os\n"
        "def count_divisors(n):\n"
        "    if n == 12:\n"
        "        os.fork()\n"
        "    return sum(1 for d in range(1, n + 1) if n % d == 0)"
    )
    async with DockerSandbox(sandbox_config) as sandbox:
        passed = await ct.run_hidden_tests(sandbox, code, "count_divisors", tests, 2)
    assert passed == [True] * 4
