"""How the tool tasks read answers and count invalid moves (their shared base, `ToolTask`).

Empty, nested and unclosed answer tags, odd tool-call turns (several calls, a call
beside an answer, malformed calls) and what the metrics say about them, driven
through the real environments: directly through their hooks where no sandbox is
needed, and through the Gym adapter with a real Docker sandbox where a tool runs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from vfgym.games import calculator as calc
from vfgym.games import code_tests as ct
from vfgym.games import python_math as pm
from vfgym.games import shell_files as sf
from vfgym.games._tool_task import extract_answer, task_text

from vfgym.gym import GymEnv
from vfgym.sandbox import SandboxConfig
from vfgym.types import RolloutScore


def call(name: str, arguments: Any, call_id: str = "c1") -> dict[str, Any]:
    """One tool call in wire format (`arguments` sent as given: text or a dict)."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def calls_turn(*calls: dict[str, Any], content: str = "") -> dict[str, Any]:
    """An assistant turn making `calls` (and saying `content`)."""
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def start(env: Any) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """The first row, its prompt as the conversation so far and a State as the loop has it."""
    row = env.dataset[0]
    state: dict[str, Any] = {
        "info": row["info"],
        "turn": 0,
        "prompt": row["prompt"],
        "tools_called": [],
        "tool_call_log": [],
    }
    return row, list(row["prompt"]), state


async def answer_turn(
    env: Any, messages: list[dict[str, Any]], state: dict[str, Any], turn: dict[str, Any]
) -> list[dict[str, Any]]:
    """Play `turn` the way the rollout loop does: answered unless it ends the episode."""
    messages.append(turn)
    state["turn"] += 1
    if await env.is_completed(messages, state):
        return []
    reply, _ = await env.env_response(messages, state)
    messages.extend(reply)
    return reply


async def score(
    env: Any, row: dict[str, Any], messages: list[dict[str, Any]], state: dict[str, Any]
) -> RolloutScore:
    """The rubric's score of the episode played so far."""
    completion = messages[len(row["prompt"]) :]
    return await env.rubric.score_rollout(row["prompt"], completion, row["answer"], state)


@pytest.mark.parametrize(
    "text", ["<answer></answer>", "<answer>  \n </answer>", "<ANSWER></answer>"]
)
def test_blank_answer_tags_hold_no_answer(text: str) -> None:
    assert extract_answer(text) is None


def test_a_blank_last_answer_does_not_hide_an_earlier_one() -> None:
    assert extract_answer("<answer>42</answer> (format: <answer></answer>)") == "42"


def test_an_answer_inside_a_stray_opening_tag_is_read_alone() -> None:
    assert extract_answer("I write <answer> tags: <answer>5</answer>") == "5"
    assert extract_answer("<answer><answer>7</answer></answer>") == "7"
    assert extract_answer("<answer>1</answer> <answer>x<answer>2</answer>") == "2"


def test_a_final_answer_left_unclosed_is_read_like_the_library_parser_reads_it() -> None:
    """A server stopping on `</answer>` leaves it out of the text (vLLM's default)."""
    assert extract_answer("It is <answer>42") == "42"
    assert extract_answer("<answer>41</answer> no, <answer> 42 \n") == "42"
    assert extract_answer("<answer>41</answer> then <answer>   ") == "41"
    assert calc.XMLParser(["answer"]).parse("It is <answer>42", last=True).answer == "42"


@pytest.mark.parametrize("module", [pm, sf, ct], ids=["python-math", "shell-files", "code-tests"])
@pytest.mark.parametrize("empty", ["<answer></answer>", "<answer>   </answer>"])
async def test_an_empty_answer_is_an_invalid_move_in_every_tool_task(
    module: Any, empty: str
) -> None:
    env = module.load_environment(num_examples=1, pool_size=1)
    row, messages, state = start(env)
    reply = await answer_turn(env, messages, state, {"role": "assistant", "content": empty})
    assert len(reply) == 1 and reply[0]["role"] == "user"
    assert "holds no answer" in reply[0]["content"] and "empty" in reply[0]["content"]
    assert state["invalid_moves"] == 1
    result = await score(env, row, messages, state)
    assert result.metrics["format_reward"] == 0.0 and result.reward == 0.0


async def test_an_empty_answer_earns_no_format_credit_when_it_ends_the_episode() -> None:
    """Cut short by the turn limit right after the empty answer: no format reward."""
    env = pm.load_environment(num_examples=1)
    row, messages, state = start(env)
    messages.append({"role": "assistant", "content": "<answer> </answer>"})
    state["turn"] = 1
    assert (await score(env, row, messages, state)).metrics["format_reward"] == 0.0


def test_calculator_gives_no_format_credit_for_an_empty_answer() -> None:
    env = calc.load_environment(num_examples=1)
    row = env.dataset[0]
    state = {"turn": 1, "tools_called": []}
    for empty in ("<answer></answer>", "<answer>  </answer>"):
        completion = [{"role": "assistant", "content": empty}]
        result = env.rubric.score_rollout_sync(row["prompt"], completion, row["answer"], state)
        assert result.metrics["format_reward_func"] == 0.0, empty
    right = [{"role": "assistant", "content": f"<answer>{row['answer']}</answer>"}]
    result = env.rubric.score_rollout_sync(row["prompt"], right, row["answer"], state)
    assert result.reward == 1.0 and result.metrics["format_reward_func"] == 1.0


async def test_feedback_counts_the_invalid_moves_left_in_good_grammar() -> None:
    env = pm.load_environment(num_examples=1, max_invalid_moves=3)
    _, messages, state = start(env)
    first = await answer_turn(env, messages, state, {"role": "assistant", "content": "hmm"})
    assert "2 more invalid moves end the task." in first[0]["content"]
    second = await answer_turn(env, messages, state, {"role": "assistant", "content": "hmm"})
    assert "1 more invalid move ends the task." in second[0]["content"]


async def test_a_failed_call_tells_the_model_it_cost_an_invalid_move() -> None:
    env = pm.load_environment(num_examples=1, max_invalid_moves=3)
    _, messages, state = start(env)
    reply = await answer_turn(env, messages, state, calls_turn(call("python", "{oops")))
    assert reply[0]["role"] == "tool" and "not valid JSON" in reply[0]["content"]
    assert state["invalid_moves"] == 1
    assert (
        reply[-1]["role"] == "user" and "2 more invalid moves end the task" in reply[-1]["content"]
    )


async def test_each_failed_call_of_a_turn_counts_and_the_note_says_how_many() -> None:
    env = sf.load_environment(num_examples=1, max_invalid_moves=4)
    _, messages, state = start(env)
    turn = calls_turn(call("python", "{}", "a"), call("bash", "[1]", "b"))
    reply = await answer_turn(env, messages, state, turn)
    assert [m["role"] for m in reply] == ["tool", "tool", "user"]
    assert [m["tool_call_id"] for m in reply[:2]] == ["a", "b"]
    assert state["invalid_moves"] == 2 and state["tools_called"] == ["python", "bash"]
    assert "2 failed tool calls" in reply[-1]["content"]
    assert "2 more invalid moves end the task" in reply[-1]["content"]


async def test_failed_calls_past_the_limit_end_the_task_with_no_answer_taken() -> None:
    """Calls that use up the limit end the episode; the answer beside them never counts."""
    env = pm.load_environment(num_examples=1, max_invalid_moves=1)
    row, messages, state = start(env)
    turn = calls_turn(call("rm", "{}"), content=f"<answer>{row['answer']}</answer>")
    reply = await answer_turn(env, messages, state, turn)
    assert "last invalid move" in reply[-1]["content"]
    assert "not final" not in reply[-1]["content"]  # nothing more to tell: the task is over
    assert await env.is_completed(messages, state)
    result = await score(env, row, messages, state)
    assert result.reward == 0.0 and result.metrics["format_reward"] == 0.0
    assert result.metrics["tool_calls"] == 1.0 and result.metrics["invalid_moves"] == 1.0


async def test_a_reply_in_content_parts_is_read_and_scored() -> None:
    """Parsers read a content list's text parts; the tool tasks' rubric must not crash on it."""
    env = pm.load_environment(num_examples=1)
    row, messages, state = start(env)
    parts = [{"type": "text", "text": f"<answer>{row['answer']}</answer>"}]
    messages.append({"role": "assistant", "content": parts})  # type: ignore[dict-item]
    state["turn"], state["completion"] = 1, messages[len(row["prompt"]) :]
    assert await env.is_completed(messages, state)
    result = await score(env, row, messages, state)
    assert result.reward == 1.0 and result.metrics.get("reward_errors", 0.0) == 0.0
    assert f"Answer: {row['answer']}" in env.render_state(state)
    prompt = [{"role": "user", "content": [{"type": "text", "text": "Compute 2^3 mod 5, the"}]}]
    assert task_text(prompt) == "Compute 2^3 mod 5, the"


@pytest.fixture
def math_gym(sandbox_config: SandboxConfig) -> Any:
    env = pm.load_environment(
        num_examples=2, seed=0, sandbox_config=sandbox_config, pool_size=1, max_invalid_moves=3
    )
    gym_env = GymEnv(env, owns_environment=True)
    yield gym_env
    gym_env.close()


def test_an_empty_answer_through_gym_asks_again_then_the_answer_scores(math_gym: GymEnv) -> None:
    _, info = math_gym.reset(seed=0)
    answer = info["state"]["answer"]
    text, reward, terminated, truncated, _ = math_gym.step("<answer></answer>")
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert "holds no answer" in text and "2 more invalid moves end the task" in text
    _, reward, terminated, _, info = math_gym.step(f"<answer>{answer}</answer>")
    assert terminated and reward == 1.0
    assert info["metrics"]["format_reward"] == 1.0 and info["metrics"]["invalid_moves"] == 1.0


def test_an_answer_beside_a_call_is_not_final_and_the_model_is_told(math_gym: GymEnv) -> None:
    _, info = math_gym.reset(seed=0)
    answer = info["state"]["answer"]
    turn = calls_turn(call("python", {"code": "print(6 * 7)"}), content="<answer>42</answer>")
    del turn["tool_calls"][0]["id"]  # arguments as a dict and no id: the adapter fills them in
    text, reward, terminated, _, info = math_gym.step(turn)
    assert not terminated and reward == 0.0 and text.startswith("42")
    assert "not final" in text and info["state"]["invalid_moves"] == 0
    _, reward, terminated, _, info = math_gym.step(f"<answer>{answer}</answer>")
    assert terminated and reward == 1.0 and info["metrics"]["tool_calls"] == 1.0


def test_several_calls_in_one_turn_are_all_run_and_counted(math_gym: GymEnv) -> None:
    math_gym.reset(seed=0)
    turn = calls_turn(
        call("python", json.dumps({"code": "x = 5"}), "a"),
        call("python", json.dumps({"code": "print(x + 1)"}), "b"),
        call("python", "{", "c"),
    )
    text, _, terminated, _, info = math_gym.step(turn)
    assert not terminated and "6" in text and "not valid JSON" in text
    assert "That failed tool call is an invalid move" in text
    assert info["state"]["invalid_moves"] == 1
    _, _, terminated, _, info = math_gym.step("<answer>6</answer>")
    assert terminated and info["metrics"]["tool_calls"] == 3.0
    assert info["metrics"]["invalid_moves"] == 1.0 and info["metrics"]["format_reward"] == 1.0


def test_shell_files_through_gym_refuses_an_empty_answer(sandbox_config: SandboxConfig) -> None:
    env = sf.load_environment(num_examples=1, sandbox_config=sandbox_config, pool_size=1)
    with GymEnv(env, owns_environment=True) as gym_env:
        _, info = gym_env.reset(seed=0)
        text, _, terminated, _, _ = gym_env.step("<answer>  </answer>")
        assert not terminated and "holds no answer" in text
        _, reward, terminated, _, info = gym_env.step(f"<answer>{info['state']['answer']}")
        assert terminated and reward == 1.0 and info["metrics"]["format_reward"] == 1.0


def test_a_single_name_as_a_str_is_refused_with_an_error_that_says_what_to_pass() -> None:
    """Read as an iterable, "linear" named the letters l, i, n, ... as unknown families."""
    with pytest.raises(
        TypeError, match=r"families must be a tuple or list of names, such as \['linear'\]"
    ):
        pm.load_environment(num_examples=1, families="linear")
    with pytest.raises(TypeError, match="questions must be a tuple or list"):
        sf.load_environment(num_examples=1, questions="count_dirs")
    with pytest.raises(TypeError, match="specs must be a tuple or list"):
        ct.load_environment(num_examples=1, specs="count_divisors")


@pytest.mark.parametrize("limit", [1.5, "3", True, None])
def test_an_invalid_move_limit_must_be_a_whole_number(limit: Any) -> None:
    """A fractional limit would tell the model "0.5 more invalid moves end the task"."""
    for module in (pm, sf, ct):
        with pytest.raises(TypeError, match="max_invalid_moves must be a whole number"):
            module.load_environment(num_examples=1, max_invalid_moves=limit)


def test_the_invalid_move_count_is_in_the_state_from_the_reset(
    sandbox_config: SandboxConfig,
) -> None:
    """As in the games, a Gym user can read `invalid_moves` before any invalid move."""
    env = pm.load_environment(num_examples=1, sandbox_config=sandbox_config, pool_size=1)
    with GymEnv(env, owns_environment=True) as gym_env:
        _, info = gym_env.reset(seed=0)
        assert info["state"]["invalid_moves"] == 0
        _, _, terminated, _, info = gym_env.step(f"<answer>{info['state']['answer']}</answer>")
        assert terminated and info["state"]["invalid_moves"] == 0


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
