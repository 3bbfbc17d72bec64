"""Edge cases of the sandboxed code tasks (code-tests, shell-files) and their spec bank.

Odd inputs a model can send, loader arguments a user can get wrong, and the
scoring paths of correct, wrong and partial answers, driven through the real
registry, the Gym adapter and a real Docker sandbox.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from collections.abc import Callable
from typing import Any

import gymnasium
import pytest
from vfgym.games import code_tests as ct
from vfgym.games import shell_files as sf
from vfgym.games._base import item_rng
from vfgym.games._code_bank import SPECS, Params, Spec, reference_function

from vfgym.envs.registry import load_environment
from vfgym.gym import GymEnv
from vfgym.sandbox import DockerSandbox, SandboxConfig

BANK = {spec.name: spec for spec in SPECS}


def python_call(code: Any = None, raw: str | None = None, call_id: str = "c1") -> dict[str, Any]:
    """An assistant turn calling the python tool (`raw` sends the arguments text as is)."""
    arguments = raw if raw is not None else json.dumps({"code": code})
    function = {"name": "python", "arguments": arguments}
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def bash_call(command: Any = None, raw: str | None = None, call_id: str = "c1") -> dict[str, Any]:
    """An assistant turn calling the bash tool (`raw` sends the arguments text as is)."""
    arguments = raw if raw is not None else json.dumps({"command": command})
    function = {"name": "bash", "arguments": arguments}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


# ------------------------------------------------------------------ the spec bank


def _rotated(text: str, k: int) -> str:
    return text[k % len(text) :] + text[: k % len(text)] if text else text


def _fib(n: int, m: int) -> int:
    """Fibonacci by fast doubling: a different algorithm from the reference's loop."""

    def pair(k: int) -> tuple[int, int]:
        if k == 0:
            return 0, 1
        a, b = pair(k // 2)
        c, d = a * ((2 * b - a) % m) % m, (a * a + b * b) % m
        return (d, (c + d) % m) if k % 2 else (c, d)

    return pair(n)[0]


def _factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1 if p == 2 else 2
    return out + ([n] if n > 1 else [])


def _base(n: int, b: int) -> str:
    digits, m = "", abs(n)
    while m:
        digits = str(m % b) + digits
        m //= b
    return ("-" if n < 0 else "") + (digits or "0")


def _most_common(text: str) -> str:
    counts = Counter(ch for ch in text if ch != " ")
    return max(counts, key=lambda ch: (counts[ch], -text.index(ch))) if counts else ""


#: Independent implementations of each template, written from its description.
ORACLES: dict[str, Callable[[Params], Callable[..., Any]]] = {
    "count_letters": lambda p: lambda t: sum(t.lower().count(c) for c in p["letters"]),
    "is_palindrome": lambda p: (
        lambda t: (kept := "".join(c for c in t.lower() if c.isalnum())) == kept[::-1]
    ),
    "rotate_string": lambda p: lambda t: _rotated(t, p["k"]),
    "sum_of_multiples": lambda p: (
        lambda n: sum(set(range(p["a"], max(n, 0), p["a"])) | set(range(p["b"], max(n, 0), p["b"])))
    ),
    "count_divisors": lambda p: (
        lambda n: len({d for i in range(1, math.isqrt(n) + 1) if n % i == 0 for d in (i, n // i)})
    ),
    "chunk_list": lambda p: (
        lambda xs: [
            [x for _, x in group]
            for _, group in itertools.groupby(enumerate(xs), key=lambda pair: pair[0] // p["k"])
        ]
    ),
    "dedupe": lambda p: lambda xs: list(dict.fromkeys(xs)),
    "rotate_list": lambda p: lambda xs: [xs[(i - p["k"]) % len(xs)] for i in range(len(xs))],
    "clamp_all": lambda p: lambda xs: [sorted((p["lo"], x, p["hi"]))[1] for x in xs],
    "caesar_shift": lambda p: (
        lambda t: t.translate(
            str.maketrans(
                "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
                _rotated("abcdefghijklmnopqrstuvwxyz", p["k"])
                + _rotated("ABCDEFGHIJKLMNOPQRSTUVWXYZ", p["k"]),
            )
        )
    ),
    "run_length_encode": lambda p: (
        lambda t: "".join(f"{c}{len(list(g))}" for c, g in itertools.groupby(t))
    ),
    "every_nth": lambda p: (
        lambda t: "".join(
            c for i, c in enumerate(t) if i >= p["start"] and (i - p["start"]) % p["step"] == 0
        )
    ),
    "shout_long_words": lambda p: (
        lambda t: " ".join(w.upper() if len(w) > p["n"] else w for w in t.split(" "))
    ),
    "digit_power_sum": lambda p: lambda n: sum(int(d) ** p["p"] for d in str(n).lstrip("-")),
    "to_base": lambda p: lambda n: _base(n, p["b"]),
    "moving_sum": lambda p: (
        lambda xs: [sum(w) for w in zip(*(xs[i:] for i in range(p["w"])), strict=False)]
    ),
    "second_largest": lambda p: lambda xs: sorted(set(xs))[-2] if len(set(xs)) >= 2 else None,
    "longest_run": lambda p: (
        lambda xs: max((len(list(g)) for _, g in itertools.groupby(xs)), default=0)
    ),
    "interleave": lambda p: (
        lambda a, b: "".join(x + y for x, y in itertools.zip_longest(a, b, fillvalue=""))
    ),
    "most_common_char": lambda p: _most_common,
    "fib_mod": lambda p: lambda n: _fib(n, p["m"]),
    "prime_factors": lambda p: _factors,
    "merge_sorted": lambda p: lambda a, b: sorted(a + b),
    "pairs_with_sum": lambda p: (
        lambda xs: sum(
            1 for i, j in itertools.combinations(range(len(xs)), 2) if xs[i] + xs[j] == p["t"]
        )
    ),
}


def test_every_reference_agrees_with_an_independent_implementation() -> None:
    assert set(ORACLES) == set(BANK)
    for spec in SPECS:
        for seed in range(40):
            rng = item_rng("bank-oracle", seed, 0)
            params = spec.params(rng)
            reference, oracle = reference_function(spec, params), ORACLES[spec.name](params)
            for args in spec.inputs(rng, params, 15):
                got, want = reference(*args), oracle(*args)
                assert got == want and type(got) is type(want), (spec.name, params, args)


def test_sum_of_multiples_never_names_a_redundant_divisor() -> None:
    """'divisible by 5 or by 10' is just 'divisible by 5': the second number must add cases."""
    spec = BANK["sum_of_multiples"]
    for seed in range(300):
        params = spec.params(item_rng("code-tests", seed, 0))
        a, b = params["a"], params["b"]
        assert a % b and b % a, params


def test_specification_texts_name_the_function_and_end_with_the_example() -> None:
    for i, spec in enumerate(SPECS):
        text, info, _ = ct.generate_item(item_rng("code-tests", 3, i), "hard", (spec.name,))
        assert text.startswith(f"Write a Python function `def {spec.name}(")
        call, result = text.split("\nExample: ", 1)[1].split(" == ")
        assert repr(eval(call, {spec.name: reference_function(spec, info["params"])})) == result
        assert json.loads(json.dumps(info)) == info  # the row is plain JSON


# ------------------------------------------------------------ reading the answer


def test_the_code_block_that_defines_the_function_is_the_answer() -> None:
    """A usage example after the function must not replace the function as the answer."""
    reply = (
        "Here it is:\n"
        + fenced("def dedupe(items):\n    return list(dict.fromkeys(items))")
        + "\nUsage:\n"
        + fenced("print(dedupe([1, 1, 2]))")
    )
    assert (
        ct.extract_code(reply, "dedupe")
        == "def dedupe(items):\n    return list(dict.fromkeys(items))"
    )
    assert ct.extract_code(reply) == "print(dedupe([1, 1, 2]))"  # no name: the last block
    drafts = fenced("def dedupe(items):\n    return items") + fenced(
        "def dedupe(items):\n    return []"
    )
    assert ct.extract_code(drafts, "dedupe") == "def dedupe(items):\n    return []"
    assert ct.extract_code(fenced("x = 1"), "dedupe") == "x = 1"  # no definition: the last block


def test_python3_fences_and_crlf_line_ends_are_read() -> None:
    assert ct.extract_code("```python3\ndef f():\n    return 1\n```") == "def f():\n    return 1"
    assert ct.extract_code("```python\r\ndef f():\r\n    return 1\r\n```") is not None
    assert ct.extract_code("```py3\ndef f(): return 1\n```") == "def f(): return 1"


# -------------------------------------------------------------------- loader knobs


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


def test_the_order_of_chosen_specs_and_questions_does_not_change_the_items() -> None:
    names = ["dedupe", "fib_mod", "interleave", "to_base"]
    one = ct.load_environment(num_examples=12, seed=4, specs=names).dataset
    other = ct.load_environment(num_examples=12, seed=4, specs=names[::-1]).dataset
    assert [r["info"] for r in one] == [r["info"] for r in other]
    asked = ["warn_lines", "find_key", "count_dirs"]
    one = sf.load_environment(num_examples=8, seed=2, questions=asked).dataset
    other = sf.load_environment(num_examples=8, seed=2, questions=asked[::-1]).dataset
    assert [r["info"] for r in one] == [r["info"] for r in other]


def test_items_are_pure_functions_of_seed_and_index() -> None:
    """Item k is the same whether 3 or 9 items are made, and another seed changes it."""
    for module in (ct, sf):
        small = module.load_environment(num_examples=3, seed=11).dataset
        large = module.load_environment(num_examples=9, seed=11).dataset
        assert [r["info"] for r in small] == [r["info"] for r in large[:3]]
        assert [r["prompt"] for r in small] == [r["prompt"] for r in large[:3]]


@pytest.mark.parametrize(
    ("name", "kwargs", "error"),
    [
        ("code-tests", {"num_examples": 0}, "num_examples"),
        ("code-tests", {"difficulty": "expert"}, "difficulty"),
        ("code-tests", {"specs": []}, "specs"),
        ("code-tests", {"max_turns": 0}, "max_turns"),
        ("code-tests", {"pool_size": 0}, "pool_size"),
        ("shell-files", {"num_examples": 0}, "num_examples"),
        ("shell-files", {"difficulty": "Hard"}, "difficulty"),
        ("shell-files", {"questions": ["why"]}, "questions"),
        ("shell-files", {"max_turns": 1}, "max_turns"),
        ("shell-files", {"max_invalid_moves": 0}, "max_invalid_moves"),
    ],
)
def test_bad_loader_arguments_say_which_argument(
    name: str, kwargs: dict[str, Any], error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        load_environment(name, **kwargs)


# ---------------------------------------------------------------- shell answers


def test_numbers_only_lose_proper_thousands_separators() -> None:
    assert sf.answers_match("1,024", "1024") and sf.answers_match("12,345,678", "12345678")
    assert not sf.answers_match("12,34", "1234")
    assert not sf.answers_match("1,2,3", "123")
    assert sf.answers_match("+7", "7") and sf.answers_match("007", "7")


def test_a_number_too_long_for_int_is_a_wrong_answer_not_a_crash() -> None:
    assert not sf.answers_match("9" * 5000, "12")
    assert sf.answers_match("0" * 5000 + "12", "12")
    env = sf.load_environment(num_examples=1, pool_size=1)
    completion = [{"role": "assistant", "content": f"<answer>{'7' * 5000}</answer>"}]
    state = {"info": env.dataset[0]["info"], "turn": 1, "invalid_moves": 0}
    score = env.rubric.score_rollout_sync([], completion, "12", state)
    assert score.reward == 0.0 and score.metrics.get("reward_errors", 0.0) == 0.0


def test_paths_are_compared_after_normalising_them() -> None:
    assert sf.answers_match("src//core/a.py", "src/core/a.py")
    assert sf.answers_match("./src/./core/a.py", "src/core/a.py")
    assert not sf.answers_match("src/core", "src/core/a.py")


def test_absolute_paths_under_a_configured_workspace_are_accepted() -> None:
    env = sf.load_environment(
        num_examples=1, sandbox_config=SandboxConfig(workspace="/home/box"), pool_size=1
    )
    assert env.answers_match("/home/box/src/a.py", "src/a.py")
    assert not env.answers_match("/home/other/src/a.py", "src/a.py")


# ----------------------------------------------------------- hidden tests, sandboxed


def _item(spec: str, difficulty: str = "hard", seed: int = 0) -> tuple[dict[str, Any], str]:
    _, info, source = ct.generate_item(item_rng("code-tests", seed, 0), difficulty, (spec,))
    return info, source


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


# ------------------------------------------------------------- episodes through Gym


@pytest.fixture
def code_gym(sandbox_config: SandboxConfig) -> Any:
    env = load_environment(
        "code-tests", num_examples=3, seed=0, sandbox_config=sandbox_config, pool_size=1
    )
    gym_env = GymEnv(env, owns_environment=True)
    yield gym_env
    gym_env.close()


def _reference_of(observation: str) -> tuple[Spec, str]:
    spec, params = ct.identify(observation)
    return spec, spec.implementation(params)


def test_code_episode_survives_malformed_calls_and_scores_the_answer(code_gym: GymEnv) -> None:
    observation, _ = code_gym.reset(seed=0)
    spec, source = _reference_of(observation)
    text, reward, terminated, truncated, info = code_gym.step(python_call(raw="{not json"))
    assert "not valid JSON" in text and (reward, terminated, truncated) == (0.0, False, False)
    text, *_ = code_gym.step(python_call(code=["print(1)"]))
    assert "code" in text and "valid string" in text
    text, *_, info = code_gym.step(python_call("print('héllo ✓ 日本')"))
    assert text == "héllo ✓ 日本"
    assert info["state"]["invalid_moves"] == 2  # the two malformed calls
    answer = f"Done.\n{fenced(source)}\nCheck:\n{fenced(f'print({spec.name})')}"
    _, reward, terminated, _, info = code_gym.step(answer)
    assert terminated and reward == 1.0
    assert info["metrics"]["invalid_moves"] == 2.0 and info["metrics"]["tool_calls"] == 3.0
    with pytest.raises(gymnasium.error.ResetNeeded):
        code_gym.step(fenced(source))


def test_code_answers_right_wrong_and_partial_are_rewarded_in_proportion(
    code_gym: GymEnv,
) -> None:
    observation, info = code_gym.reset(seed=0, options={"index": 1})
    spec, source = _reference_of(observation)
    tests = info["state"]["info"]["tests"]
    right = fenced(source)
    wrong = fenced(f"def {spec.name}(*args):\n    return 'nope'")
    first = json.dumps(tests[0]["args"])
    partial = fenced(
        source.replace(f"def {spec.name}(", "def _right(") + f"\ndef {spec.name}(*args):\n"
        f"    import json\n"
        f"    return _right(*args) if json.dumps(list(args)) == {first!r} else 'nope'"
    )
    rewards = []
    for answer in (right, wrong, partial):
        code_gym.reset(seed=0, options={"index": 1})
        _, reward, terminated, _, step_info = code_gym.step(answer)
        assert terminated
        rewards.append((reward, step_info["metrics"]["tests_passed"]))
    same_as_first = sum(json.dumps(t["args"]) == first for t in tests)
    assert rewards == [
        (1.0, float(len(tests))),
        (0.0, 0.0),
        (same_as_first / len(tests), float(same_as_first)),
    ]


def test_code_answer_without_code_is_refused_until_the_limit(code_gym: GymEnv) -> None:
    code_gym.reset(seed=0)
    for reply, left in (("", "2 more"), ("<answer></answer>", "1 more"), (fenced(""), "last")):
        text, reward, terminated, _, info = code_gym.step(reply)
        assert "holds no answer" in text and left in text
    assert terminated and reward == 0.0 and info["metrics"]["format_reward"] == 0.0


@pytest.fixture
def shell_gym(sandbox_config: SandboxConfig) -> Any:
    env = load_environment(
        "shell-files",
        num_examples=2,
        seed=0,
        sandbox_config=sandbox_config.replace(timeout=3),
        pool_size=1,
        max_turns=10,
    )
    gym_env = GymEnv(env, owns_environment=True)
    yield gym_env
    gym_env.close()


def test_shell_episode_survives_hostile_commands_and_scores_the_answer(
    shell_gym: GymEnv,
) -> None:
    _, info = shell_gym.reset(seed=0)
    answer = info["state"]["answer"]
    text, *_ = shell_gym.step(bash_call("echo 'héllo ✓ 日本'"))
    assert text == "héllo ✓ 日本"
    text, *_ = shell_gym.step(bash_call("yes | head -c 5000000"))
    assert "characters omitted" in text
    text, *_ = shell_gym.step(bash_call("sleep 60"))
    assert "timed out" in text
    text, *_ = shell_gym.step(bash_call(":(){ :|:& };:"))
    text, *_ = shell_gym.step(bash_call("find . -type f | wc -l"))
    assert int(text) == len(info["state"]["info"]["files"])  # the tree survived it all
    text, *_ = shell_gym.step(bash_call(raw='{"command": ["ls"]}'))
    assert "valid string" in text
    _, reward, terminated, _, info = shell_gym.step(f"<answer>`./{answer}`</answer>")
    assert terminated and reward == 1.0 and info["metrics"]["invalid_moves"] == 1.0


def test_shell_answer_without_running_anything_is_scored(shell_gym: GymEnv) -> None:
    shell_gym.reset(seed=0, options={"index": 1})
    _, reward, terminated, _, step_info = shell_gym.step("<answer>no idea</answer>")
    assert terminated and reward == 0.0 and step_info["metrics"]["tool_calls"] == 0.0
