"""Code tests: write a Python function to a specification; hidden unit tests score it.

Each task is a specification from a bank of parametrised templates (string
manipulation, arithmetic, list processing), with an example call. The model may
try code with the sandboxed `python` tool, then answers with the whole function in
a ```python block (or in `<answer>…</answer>`); of several blocks, the last that
defines the function is the answer, so a usage example after it is not. At scoring
time the answer runs in a fresh sandbox from the environment's pool — never on the
host — against hidden tests generated with the template's reference implementation;
the reward is the fraction of tests passed. Each test has a time limit, and a test
that outlasts it fails however it ends (an answer that catches the alarm or stops the
timer included); a result counts only if it equals the expected value exactly (a bool
is not an int, a tuple stands for a list), compared on the host. The answer runs in a
module of its own, apart from the harness's names, so it cannot rebind what times the
tests. The answer's top-level code runs once before the tests, within the sandbox's own time limit
(`SandboxConfig.timeout`, the limit of a `python` tool call, which the model meets
while trying its code), and is not charged to any test; an answer whose top level
runs longer defines nothing and scores 0, as the system prompt tells the model.

Knobs: `difficulty` ("easy": the simplest templates and 8 tests, "medium": more
templates and 10 tests, "hard": every template and 14 tests), `specs` (a subset of
`SPEC_NAMES`; the order it is listed in does not change the items), `max_turns` (8),
`max_invalid_moves` (3), `test_timeout` (seconds per hidden test, finite, 2),
`sandbox_config`, `pool_size`. Metrics: `tests_passed`, `tool_calls`, `format_reward`,
`turns`, `invalid_moves`. The reference policy recognises the template from the
specification, writes its implementation, tries it once with the tool and answers:
reward 1 on every seed.
"""

from __future__ import annotations

import json
import math
import posixpath
import random
import re
import string
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from vfgym.games._base import check_choice
from vfgym.games._code_bank import SPECS, Spec, reference_function, spec_text
from vfgym.games._tool_task import (
    ToolTask,
    assistant_turns,
    check_invalid_move_limit,
    check_seed,
    check_turn_limit,
    extract_answer,
    final_reply,
    subset_knob,
    task_text,
    tool_call_message,
    tool_outputs_since_last_turn,
)

from vfgym.errors import SandboxError, SandboxFileError, SandboxPathError
from vfgym.rubrics import Rubric
from vfgym.sandbox.config import SandboxConfig
from vfgym.sandbox.env import SandboxEnv
from vfgym.sandbox.sandbox import DockerSandbox
from vfgym.types import ChatMessage, Messages, State

GYM_ID = "vfgym/CodeTests-v0"
KIND = "tool"
NEEDS_SANDBOX = True

DIFFICULTIES = {"easy": 1, "medium": 2, "hard": 3}
TEST_COUNTS = {"easy": 8, "medium": 10, "hard": 14}
SPEC_NAMES = tuple(spec.name for spec in SPECS)
_BY_NAME = {spec.name: spec for spec in SPECS}

SYSTEM_PROMPT = """You write Python functions to a specification. You have a `python` tool that \
runs code in a sandbox (a persistent session, like a notebook) where you can try your function.
When you are done, give the complete function (with any imports it needs) as your final answer \
in a single ```python code block. Hidden unit tests call the function by its name and compare \
what it returns with the expected value exactly. Each test call has a time limit. Any \
top-level code outside the function runs once before the tests, with the time limit of a \
`python` tool call: an answer whose top-level code runs longer defines nothing and passes no \
test."""

_CODE_BLOCK = re.compile(r"```(?:python3?|py3?)?[ \t]*\r?\n(.*?)```", re.DOTALL | re.IGNORECASE)
_FUNCTION = re.compile(r"`def (\w+)\(")


def _defines(code: str, function: str) -> bool:
    """Whether `code` holds a `def` of `function` (at any indentation, async or not)."""
    pattern = rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(function)}[ \t]*\("
    return re.search(pattern, code, re.MULTILINE) is not None


def extract_code(text: str, function: str | None = None) -> str | None:
    """The answer's code: a ```python block, else the content of `<answer>` tags.

    Of several blocks, the last that defines `function` (when it is named), so a
    usage example after the function does not replace it; else the last block.
    """
    blocks = [block.strip("\r\n") for block in _CODE_BLOCK.findall(text or "")]
    if blocks:
        defining = [block for block in blocks if function and _defines(block, function)]
        return (defining or blocks)[-1] or None
    answer = extract_answer(text)
    if answer is None:
        return None
    inner = _CODE_BLOCK.findall(answer + "\n" if "```" in answer else "")
    return (inner[-1] if inner else answer).strip("\r\n") or None


def check_test_timeout(value: Any, name: str = "test_timeout") -> float:
    """`value` as the seconds a hidden test may take: a finite positive number.

    Infinity or NaN cannot arm the per-test alarm (every test would fail, or the
    scoring would raise), so they are refused where they are given; `name` is the
    argument the error names.
    """
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(
            f"{name} must be a finite positive number of seconds, such as 2.0, not {value!r}"
        )
    return float(value)


# ---------------------------------------------------------------------------- items


def generate_item(
    rng: random.Random, difficulty: str, specs: tuple[str, ...]
) -> tuple[str, dict[str, Any], str]:
    """One task: (specification, info with the hidden tests, reference source)."""
    level = DIFFICULTIES[difficulty]
    pool = [name for name in specs if _BY_NAME[name].level <= level] or list(specs)
    spec = _BY_NAME[rng.choice(pool)]
    params = spec.params(rng)
    function = reference_function(spec, params)
    cases = spec.inputs(rng, params, TEST_COUNTS[difficulty] + 1)
    example, hidden = cases[0], cases[1:]
    tests = [{"args": list(args), "expected": function(*args)} for args in hidden]
    text = spec_text(spec, params, example, function(*example))
    info = {
        "spec": spec.name,
        "function": spec.name,
        "params": params,
        "difficulty": difficulty,
        "tests": json.loads(json.dumps(tests)),
    }
    return text, info, spec.implementation(params)


# -------------------------------------------------------------------------- scoring

#: Where the harness writes its report, in the scoring sandbox's workspace: one JSON
#: line per test run, so the report is not cut by the tool output limit, and the tests
#: run before a hang or a crash still count.
REPORT_FILE = ".vfgym-hidden-tests.jsonl"
#: The longest result (as JSON text) the harness reports; any longer one fails its test.
MAX_RESULT_CHARS = 20_000

# The harness is defined in a cell of its own before the answer's code runs, so what
# it uses (builtins, json, the signal timer, the clock) is bound in its own scope before
# the answer can rebind or patch any of it; its functions look up no global name. One
# call then runs the answer and the tests: the answer's code runs in a module of its own
# (its globals, and `__main__` while it runs), so no name it can reach by its namespace
# leads to the harness, and nothing is looked up by name after the answer ran. Its top
# level runs under the alarm with the sandbox's own time limit, and the function is
# taken from its namespace only when the top level ended in time. A test fails when it
# outlasts the limit however it ends: the alarm interrupts it, and an answer that
# catches the alarm's TimeoutError (a broad `except Exception` in a loop) or stops the
# timer is judged by the clock held here. A copy of the harness that an answer forks
# leaves quietly, so only the harness reports.
_HARNESS = """def _vfgym_harness():
    import builtins, copy, json, os, signal, sys, time, types
    is_callable, size, failure = builtins.callable, builtins.len, builtins.BaseException
    timeout_error, missing = builtins.TimeoutError, builtins.FileNotFoundError
    open_file, deepcopy, dumps, loads = builtins.open, copy.deepcopy, json.dumps, json.loads
    compile_code, run_code, lookup = builtins.compile, builtins.exec, builtins.dict.get
    new_module, modules, the_builtins = types.ModuleType, sys.modules, builtins
    getpid, leave, unlink = os.getpid, os._exit, os.unlink
    set_handler, alarm = signal.signal, signal.SIGALRM
    set_timer, timer, clock = signal.setitimer, signal.ITIMER_REAL, time.monotonic
    fired = [False]

    def on_alarm(signum, frame):
        fired[0] = True
        raise timeout_error("took too long")

    def timed(call, argument, limit):
        # [call(argument)], [] when it raised, None when it outlasted `limit`
        fired[0] = False
        set_handler(alarm, on_alarm)
        started = clock()
        set_timer(timer, limit)
        try:
            value = [call(argument)]
        except failure:
            value = []
        finally:
            set_timer(timer, 0)
        return None if fired[0] or clock() - started > limit else value

    def load(code, name, budget):
        module = new_module("__main__")
        namespace = module.__dict__
        namespace["__builtins__"] = the_builtins
        modules["__main__"] = module  # `import __main__` finds the answer's own module
        source = compile_code(code, "<answer>", "exec", dont_inherit=True)
        # a top level that failed may still have defined the function; a slow one did not
        done = timed(lambda tree: run_code(tree, namespace), source, budget)
        return None if done is None else lookup(namespace, name)

    def run_one(fn, args, limit):
        done = timed(lambda copied: dumps(fn(*copied)), deepcopy(args), limit)
        return done[0] if done else None

    def run(code, name, budget, cases, limit, path, room, cap):
        pid = getpid()
        try:
            fn = load(code, name, budget)
        except failure:  # the answer does not compile
            fn = None
        if getpid() != pid:  # a process the answer forked: only the harness reports
            leave(0)
        try:
            unlink(path)  # whatever the answer left there (a FIFO would block the open)
        except missing:
            pass
        with open_file(path, "x", encoding="ascii") as report:
            if not is_callable(fn):
                return
            for args in loads(cases):
                try:
                    text = run_one(fn, args, limit)
                except failure:
                    text = None
                if getpid() != pid:
                    leave(0)
                line = dumps(text if text is not None and size(text) <= cap else None)
                if size(line) + 1 > room:
                    line = "null"
                room -= size(line) + 1
                if room < 0:
                    return
                report.write(line + "\\n")
                report.flush()

    return run
_vfgym_run = _vfgym_harness()
del _vfgym_harness"""
_HARNESS_CALL = "_vfgym_run($code, $name, $budget, $cases, $limit, $path, $room, $cap)"


def same_value(got: Any, expected: Any) -> bool:
    """Exact equality of JSON values: types must agree too (True is not 1, 1.0 is not 1)."""
    if isinstance(expected, bool) or isinstance(got, bool):
        return type(got) is type(expected) and got == expected
    if isinstance(expected, list):
        return (
            isinstance(got, list)
            and len(got) == len(expected)
            and all(same_value(g, e) for g, e in zip(got, expected, strict=True))
        )
    if isinstance(expected, dict):
        return (
            isinstance(got, dict)
            and got.keys() == expected.keys()
            and all(same_value(got[k], expected[k]) for k in expected)
        )
    return type(got) is type(expected) and got == expected


async def run_hidden_tests(
    sandbox: DockerSandbox, code: str, function: str, tests: list[dict[str, Any]], limit: float
) -> list[bool]:
    """Run `code` and then the hidden tests in `sandbox`; which tests passed, in order.

    Only the inputs go into the sandbox; the expected values stay on the host,
    where the results are compared. One call runs the answer (in a module of its own,
    so that nothing it rebinds reaches the harness) and then the tests; the results
    come back in a file (`REPORT_FILE`), not in the tool output, whose limit is for
    what a model reads. The answer's
    top-level code (imports, tables it builds, calls of its own) runs once before the
    tests, within `SandboxConfig.timeout` as a `python` tool call does, and is not
    charged to any test; an answer whose top level outlasts it (or kills its
    interpreter) defines nothing, and its tests fail without being run. An answer that
    takes the sandbox down (its runner killed, the container out of memory) fails
    every test; a test that runs past `limit` fails however it ends, and one that hangs
    or kills its interpreter fails with those after it. A sandbox that cannot be
    reached at all, or that cannot load the harness before any answer code ran,
    raises, so the rubric reports an error, not a zero.
    """
    limit = check_test_timeout(limit, "limit")
    budget = float(sandbox.config.timeout)
    await _load_harness(sandbox)
    call = string.Template(_HARNESS_CALL).substitute(
        code=repr(code),
        name=repr(function),
        budget=repr(budget),
        cases=repr(json.dumps([t["args"] for t in tests])),
        limit=repr(limit),
        path=repr(posixpath.join(sandbox.config.workspace, REPORT_FILE)),
        room=int(sandbox.config.max_read_bytes),
        cap=MAX_RESULT_CHARS,
    )
    result = await sandbox.run_python(call, timeout=budget + limit * len(tests) + 10)
    if result.sandbox_lost:
        return [False] * len(tests)
    try:
        report = await sandbox.read_file(REPORT_FILE)
    except (SandboxFileError, SandboxPathError):  # never written: no function to test
        return [False] * len(tests)
    return compare_report(report, tests)


async def _load_harness(sandbox: DockerSandbox) -> None:
    """Define the harness in the sandbox's session, before the answer can touch anything.

    No answer code has run yet, so a failure here is the sandbox's, never the model's:
    it raises rather than scoring the answer 0.
    """
    loaded = await sandbox.run_python(_HARNESS)
    if loaded.sandbox_lost or loaded.state_reset or loaded.exit_code != 0:
        raise SandboxError(
            "the scoring sandbox could not load the hidden-test harness before running the "
            f"answer (exit code {loaded.exit_code}): {loaded.stderr.strip()[-500:]}; check "
            "the sandbox image with `python -m vfgym.sandbox doctor`"
        )


def compare_report(report: bytes, tests: list[dict[str, Any]]) -> list[bool]:
    """Which tests passed, from the harness's report (one JSON line per test run).

    A report with more lines than tests was written to by something else than the
    harness, so nothing in it counts. A result the host cannot decode fails its test:
    what the answer returned must never become an error of the rubric.
    """
    lines = report.decode("utf-8", errors="replace").splitlines()
    if len(lines) > len(tests):
        return [False] * len(tests)
    passed = []
    for index, test in enumerate(tests):
        try:
            output = json.loads(lines[index]) if index < len(lines) else None
            passed.append(
                isinstance(output, str) and same_value(json.loads(output), test["expected"])
            )
        except (ValueError, RecursionError):  # a line cut short by a kill, a number too
            passed.append(False)  # long to read, or a value nested too deep to decode
    return passed


# ---------------------------------------------------------------------- environment


class CodeTestsEnv(ToolTask, SandboxEnv):
    """Write a function to a specification; reward = the fraction of hidden tests passed."""

    game_name = "code-tests"
    answer_hint = "give the complete function as your final answer in a ```python code block"

    def __init__(
        self, *, max_invalid_moves: int = 3, test_timeout: float = 2.0, **kwargs: Any
    ) -> None:
        self.test_timeout = check_test_timeout(test_timeout)
        super().__init__(
            python_tool=True, bash_tool=False, max_invalid_moves=max_invalid_moves, **kwargs
        )

    def read_answer(self, text: str) -> str | None:
        return extract_code(text)

    @asynccontextmanager
    async def scoring_sandbox(self) -> AsyncIterator[DockerSandbox]:
        """A fresh sandbox from this environment's pool, for running the hidden tests.

        The rollout's own sandbox is wiped and returned when the episode ends,
        before scoring; the tests never run on the host.
        """
        async with self.acquire_sandbox() as sandbox:
            yield sandbox

    async def hidden_test_results(self, completion: Messages, state: State) -> list[bool]:
        """Which hidden tests the episode's answer passes (run once, cached in State)."""
        if "hidden_tests" in state:
            return state["hidden_tests"]
        tests = state["info"]["tests"]
        function = state["info"]["function"]
        reply = final_reply(completion)
        code = None if reply is None else extract_code(reply, function)
        if code is None or self.lost_on_invalid_moves(state):
            passed = [False] * len(tests)
        else:
            async with self.scoring_sandbox() as sandbox:
                passed = await run_hidden_tests(sandbox, code, function, tests, self.test_timeout)
        state["hidden_tests"] = passed
        return passed

    def build_rubric(self) -> Rubric:
        """`pass_rate` (weight 1), `tests_passed` and the shared metrics."""
        task = self

        async def pass_rate(completion: Messages, state: State) -> float:
            passed = await task.hidden_test_results(completion, state)
            return sum(passed) / len(passed) if passed else 0.0

        async def tests_passed(completion: Messages, state: State) -> float:
            return float(sum(await task.hidden_test_results(completion, state)))

        return self.rubric_of(pass_rate, tests_passed, parallelize_scoring=False)

    def reference_policy(self, messages: Messages) -> ChatMessage:
        """Write the template's implementation, try it on the example once, then answer."""
        text = task_text(messages)
        spec, params = identify(text)
        code = spec.implementation(params)
        if tool_outputs_since_last_turn(messages):
            return {"role": "assistant", "content": f"```python\n{code}\n```"}
        example = text.split("Example: ", 1)[1].split("\n", 1)[0]
        trial = f"{code}\n\n{example.split(' == ')[0]}"
        return tool_call_message("python", {"code": trial}, f"call_{assistant_turns(messages)}")

    def random_reply(self, messages: Messages, rng: random.Random) -> ChatMessage:
        match = _FUNCTION.search(task_text(messages))
        name = match.group(1) if match else "solution"
        value = rng.choice(
            (rng.randint(-5, 50), "".join(rng.choices(string.ascii_lowercase, k=4)), [], True)
        )
        code = f"def {name}(*args):\n    return {value!r}"
        return {"role": "assistant", "content": f"```python\n{code}\n```"}


def identify(text: str) -> tuple[Spec, dict[str, Any]]:
    """The template and parameters of a specification text (what the reference reads)."""
    match = _FUNCTION.search(text)
    if not match or match.group(1) not in _BY_NAME:
        raise ValueError(f"not a code-tests specification: {text[:80]!r}")
    spec = _BY_NAME[match.group(1)]
    return spec, spec.read_params(text)


def load_environment(
    num_examples: int = 100,
    seed: int = 0,
    difficulty: str = "medium",
    specs: tuple[str, ...] | list[str] = SPEC_NAMES,
    max_turns: int = 8,
    max_invalid_moves: int = 3,
    test_timeout: float = 2.0,
    sandbox_config: SandboxConfig | None = None,
    pool_size: int = 4,
) -> CodeTestsEnv:
    """Build the environment (templates of `specs` up to `difficulty`)."""
    check_choice("difficulty", difficulty, DIFFICULTIES)
    # In the bank's order, so a subset gives the same items however it is listed.
    given = subset_knob("specs", specs, SPEC_NAMES)
    chosen = tuple(name for name in SPEC_NAMES if name in given)
    check_invalid_move_limit(max_invalid_moves)
    check_test_timeout(test_timeout)
    check_seed(seed)
    check_turn_limit(max_turns, 1)
    make = lambda rng, i: generate_item(rng, difficulty, chosen)  # noqa: E731
    return CodeTestsEnv.from_items(
        make,
        num_examples,
        seed,
        system_prompt=SYSTEM_PROMPT,
        max_turns=max_turns,
        max_invalid_moves=max_invalid_moves,
        test_timeout=test_timeout,
        sandbox_config=sandbox_config,
        pool_size=pool_size,
    )
