"""Code tests: the spec bank's references, answer reading, hidden tests run in a real sandbox."""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import gymnasium
import pytest
from game_play import evaluate_over_http, reference_in_sandbox
from vfgym.games import code_tests as ct
from vfgym.games import shell_files as sf
from vfgym.games._base import item_rng
from vfgym.games._code_bank import SPECS, Spec, reference_function

import vfgym
from vfgym.envs.registry import load_environment
from vfgym.gym import GymEnv
from vfgym.sandbox import DockerSandbox, SandboxConfig

BANK = {spec.name: spec for spec in SPECS}


def ref(name: str, **params: Any) -> Any:
    return reference_function(BANK[name], params)


def test_reference_implementations_on_hand_worked_calls() -> None:
    assert ref("caesar_shift", k=3)("Hello, World!") == "Khoor, Zruog!"
    assert ref("caesar_shift", k=3)("xyz XYZ!") == "abc ABC!"
    assert ref("run_length_encode")("aaab") == "a3b1"
    assert ref("run_length_encode")("") == ""
    assert ref("to_base", b=2)(-6) == "-110" and ref("to_base", b=7)(0) == "0"
    assert ref("rotate_list", k=5)([1, 2]) == [2, 1]
    assert ref("rotate_string", k=2)("abcde") == "cdeab"
    assert ref("every_nth", start=1, step=2)("abcdef") == "bdf"
    assert ref("most_common_char")("ba ab") == "b"  # a tie: the first to appear
    assert ref("second_largest")([4, 4]) is None and ref("second_largest")([3, 9, 9, 1]) == 3
    assert ref("interleave")("ab", "XYZ") == "aXbYZ"
    assert ref("fib_mod", m=97)(10) == 55 and ref("fib_mod", m=97)(0) == 0
    assert ref("prime_factors")(360) == [2, 2, 2, 3, 3, 5]
    assert ref("pairs_with_sum", t=5)([1, 4, 2, 3, 5, 0]) == 3
    assert ref("moving_sum", w=3)([1, 2, 3, 4]) == [6, 9] and ref("moving_sum", w=3)([1]) == []
    assert ref("shout_long_words", n=3)("a  python is ok") == "a  PYTHON is ok"
    assert ref("count_letters", letters="aeo")("Hello Ava") == 4
    assert ref("sum_of_multiples", a=3, b=5)(10) == 23
    assert ref("count_divisors")(36) == 9
    assert ref("clamp_all", lo=-2, hi=3)([-9, 0, 7]) == [-2, 0, 3]
    assert ref("chunk_list", k=2)([1, 2, 3]) == [[1, 2], [3]]
    assert ref("is_palindrome")("No lemon, no melon") is True


def test_specifications_are_read_back_by_the_reference() -> None:
    for i in range(150):
        difficulty = list(ct.DIFFICULTIES)[i % 3]
        text, info, source = ct.generate_item(
            item_rng("code-tests", 1, i), difficulty, ct.SPEC_NAMES
        )
        spec, params = ct.identify(text)
        assert spec.name == info["function"] and params == info["params"], text
        assert spec.implementation(params) == source
        assert len(info["tests"]) == ct.TEST_COUNTS[difficulty]
    with pytest.raises(ValueError, match="not a code-tests specification"):
        ct.identify("Write a poem about sandboxes.")


def test_answers_are_read_from_code_blocks_or_answer_tags() -> None:
    assert ct.extract_code("Here:\n```python\ndef f():\n    return 1\n```\n") == (
        "def f():\n    return 1"
    )
    two = "```python\ndef f(): return 1\n```\nbetter:\n```py\ndef f(): return 2\n```"
    assert ct.extract_code(two) == "def f(): return 2"
    assert ct.extract_code("<answer>def f(): return 3</answer>") == "def f(): return 3"
    assert ct.extract_code("<answer>```python\ndef f(): return 4\n```</answer>") == (
        "def f(): return 4"
    )
    assert ct.extract_code("I would write a loop.") is None


def test_results_must_match_exactly() -> None:
    assert ct.same_value([1, [2, None]], [1, [2, None]])
    assert not ct.same_value(True, 1) and not ct.same_value(1, True)
    assert not ct.same_value(1.0, 1) and not ct.same_value("1", 1)
    assert not ct.same_value([1, 2], [1, 2, 3]) and not ct.same_value(None, [])


def test_items_are_deterministic_per_seed() -> None:
    a = ct.load_environment(num_examples=10, seed=1).dataset
    b = ct.load_environment(num_examples=10, seed=1).dataset
    c = ct.load_environment(num_examples=10, seed=2).dataset
    assert [r["info"] for r in a] == [r["info"] for r in b]
    assert [r["info"] for r in a] != [r["info"] for r in c]
    easy = ct.load_environment(num_examples=30, difficulty="easy").dataset
    assert {BANK[r["info"]["spec"]].level for r in easy} == {1}


def test_bad_knobs_are_refused() -> None:
    with pytest.raises(ValueError, match="difficulty"):
        ct.load_environment(difficulty="expert")
    with pytest.raises(ValueError, match="specs"):
        ct.load_environment(specs=["quicksort"])
    with pytest.raises(ValueError, match="test_timeout"):
        ct.load_environment(num_examples=1, test_timeout=0)
    with pytest.raises(ValueError, match="max_invalid_moves"):
        ct.load_environment(max_invalid_moves=0)


async def test_a_reply_without_code_is_an_invalid_move_and_scores_zero() -> None:
    env = ct.load_environment(num_examples=1, max_invalid_moves=1)
    row = env.dataset[0]
    state: dict[str, Any] = {"info": row["info"], "turn": 1}
    messages = [*row["prompt"], {"role": "assistant", "content": "Sure, I can do that."}]
    reply, state = await env.env_response(messages, state)
    assert "```python code block" in reply[0]["content"]
    assert state["invalid_moves"] == 1 and await env.is_completed(messages + reply, state)
    # No answer means no sandbox is needed to score it: every hidden test fails.
    score = await env.rubric.score_rollout(row["prompt"], messages[-1:] + reply, "", state)
    assert score.reward == 0.0 and score.metrics["tests_passed"] == 0.0


async def test_reference_passes_every_hidden_test_on_51_seeds_in_one_sandbox(
    sandbox_config: SandboxConfig,
) -> None:
    env = ct.load_environment(num_examples=1)
    async with DockerSandbox(sandbox_config) as sandbox:
        for i in range(51):
            difficulty = list(ct.DIFFICULTIES)[i % 3]
            text, info, _ = ct.generate_item(
                item_rng("code-tests", 8, i), difficulty, ct.SPEC_NAMES
            )
            _, trial, code = await reference_in_sandbox(env, sandbox, text)
            assert text.endswith(f" == {trial.value}"), (text, trial.summary())
            await sandbox.reset()
            passed = await ct.run_hidden_tests(sandbox, code, info["function"], info["tests"], 2)
            assert passed == [True] * len(info["tests"]), (text, passed)


async def test_wrong_and_hostile_answers_fail_their_tests_in_the_sandbox(
    sandbox_config: SandboxConfig,
) -> None:
    tests = [{"args": [n], "expected": ref("count_divisors")(n)} for n in (1, 12, 36, 97)]
    probe = f"/tmp/vfgym-host-probe-{uuid.uuid4().hex}"
    candidates = {
        "def count_divisors(n):\n    return len([d for d in range(1, n + 1) if n % d == 0])": [True]
        * 4,
        "def count_divisors(n) return 1": [False] * 4,  # a syntax error
        "def divisors(n):\n    return 1": [False] * 4,  # the wrong name
        "def count_divisors(n):\n    return n == 1": [False] * 4,  # True is not 1
        "def count_divisors(n):\n    return 2": [False, False, False, True],
        "def count_divisors(n):\n    while n == 36:\n        pass\n    return "
        "len([d for d in range(1, n + 1) if n % d == 0])": [True, True, False, True],
        "import sys\ndef count_divisors(n):\n    sys.exit(3)": [False] * 4,
        "import os\ndef count_divisors(n):\n    os._exit(0)": [False] * 4,  # kills the session
        "class Yes:\n    def __eq__(self, other):\n        return True\n"
        "def count_divisors(n):\n    return Yes()": [False] * 4,
        f"open({probe!r}, 'w').write('x')\ndef count_divisors(n):\n    print('x' * 10**6)\n"
        "    return 2 if n == 97 else 0": [False, False, False, True],
    }
    async with DockerSandbox(sandbox_config) as sandbox:
        for code, expected in candidates.items():
            await sandbox.reset()
            passed = await ct.run_hidden_tests(sandbox, code, "count_divisors", tests, 0.5)
            assert passed == expected, code
    assert not os.path.exists(probe)  # the answer ran in the sandbox, not on this host


async def test_reference_and_random_policies_over_http(sandbox_config: SandboxConfig) -> None:
    env = vfgym.load_environment(
        "code-tests", num_examples=6, seed=5, sandbox_config=sandbox_config, pool_size=1
    )
    ref_out, rnd = await evaluate_over_http(env, 6)
    assert ref_out.reward == [1.0] * 6
    counts = [float(len(row["info"]["tests"])) for row in env.get_eval_dataset(6)]
    assert ref_out.metrics["tests_passed"] == counts
    assert [s["tools_called"] for s in ref_out.state] == [["python"]] * 6
    assert sum(rnd.reward) < sum(ref_out.reward)
    assert rnd.metrics["format_reward"] == [1.0] * 6 and rnd.metrics["tool_calls"] == [0.0] * 6


def python_call(code: Any = None, raw: str | None = None, call_id: str = "c1") -> dict[str, Any]:
    """An assistant turn calling the python tool (`raw` sends the arguments text as is)."""
    arguments = raw if raw is not None else json.dumps({"code": code})
    function = {"name": "python", "arguments": arguments}
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


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
