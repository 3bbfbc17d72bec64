"""Shell files: a hand-made tree and its answers, generated trees, the reference in a sandbox."""

from __future__ import annotations

import json
from typing import Any

import pytest
from game_play import evaluate_over_http, reference_in_sandbox
from vfgym.games import shell_files as sf
from vfgym.games._base import item_rng
from vfgym.games._tool_task import tool_call_message

import vfgym
from vfgym.engine.state import new_state
from vfgym.envs.registry import load_environment
from vfgym.gym import GymEnv
from vfgym.sandbox import DockerSandbox, SandboxConfig
from vfgym.sandbox.docker_client import make_client

HAND_TREE = {
    "src/app.py": "def main():\n    return 1\n",  # 2 lines
    "src/util/helpers.py": "x = 1\n# TODO\ny = 2\n",  # 3 lines
    "src/README.txt": "notes\n",  # 1 line
    "logs/api-1.log": "d INFO api: ok\nd ERROR api: bad\nd WARN api: slow\n",
    "logs/old/auth-2.log": "d WARN auth: slow\nd WARN auth: slow again\n",
    "logs/worker-3.log": "d INFO worker: ok\n",
    "data/a.csv": "id\n1\n2\n3\n",  # 4 lines: the longest CSV
    "data/b.csv": "id\n1\nkey-00c0ffee00\n",
    "notes.md": "a long line of notes " * 10 + "\n",
}


HAND_ANSWERS = {
    "logs_with_error": "1",
    "warn_lines": "3",
    "largest_file": "notes.md",
    "lines_under_src": "6",
    "py_under_src": "2",
    "find_key": "data/b.csv",
    "longest_csv": "data/a.csv",
    "count_dirs": "5",  # src, src/util, logs, logs/old, data
}


def test_answers_on_a_hand_made_tree() -> None:
    for question, answer in HAND_ANSWERS.items():
        assert sf.answer_for(question, HAND_TREE, key="key-00c0ffee00") == answer, question
    assert sf.directories_of(HAND_TREE) == {"src", "src/util", "logs", "logs/old", "data"}


def test_ties_are_broken_for_size_and_csv_length() -> None:
    files = {"a.csv": "id\n1\n", "b.csv": "id\n2\n"}
    sf._break_ties(files)
    lines = sorted(content.count("\n") for content in files.values())
    sizes = sorted(len(content) for content in files.values())
    assert lines == [2, 3] and sizes[0] != sizes[1]
    files = {"x.txt": "abc\n", "y.txt": "def\n", "c.csv": "i\n", "d.csv": "i\nj\n"}
    sf._break_ties(files)
    assert sorted(len(c) for c in files.values())[-2:] == [4, 5]
    assert sum(c.count("\n") for c in files.values()) == 5  # no line was added


def test_answers_are_compared_as_paths_and_numbers() -> None:
    assert sf.answers_match("./src/app.py", "src/app.py")
    assert sf.answers_match("/workspace/src/app.py", "src/app.py")
    assert sf.answers_match("`src/app.py`", "src/app.py")
    assert sf.answers_match(" 012 ", "12") and sf.answers_match("1,024", "1024")
    assert not sf.answers_match("app.py", "src/app.py")
    assert not sf.answers_match(None, "3")


def test_generated_trees_keep_their_promises() -> None:
    for i in range(60):
        difficulty = sf.DIFFICULTIES[i % 3]
        _, info, answer = sf.generate_item(
            item_rng("shell-files", 5, i), difficulty, tuple(sf.QUESTIONS)
        )
        files = info["files"]
        low, high = sf.FILE_COUNTS[difficulty]
        assert low - 1 <= len(files) <= high
        assert all(content.endswith("\n") for content in files.values())
        assert sf.directories_of(files) == set(sf.DIRECTORIES[difficulty])  # none left empty
        sizes = sorted(len(c.encode()) for c in files.values())
        csv_lines = sorted(c.count("\n") for p, c in files.items() if p.endswith(".csv"))
        assert sizes[-1] > sizes[-2] and csv_lines[-1] > csv_lines[-2]
        assert sum(p.startswith("src/") and p.endswith(".py") for p in files) >= 2
        assert answer == sf.answer_for(info["question"], files, info.get("key", ""))


def test_items_are_deterministic_per_seed() -> None:
    a = sf.load_environment(num_examples=8, seed=1).dataset
    b = sf.load_environment(num_examples=8, seed=1).dataset
    c = sf.load_environment(num_examples=8, seed=2).dataset
    assert [r["info"] for r in a] == [r["info"] for r in b]
    assert [r["info"]["files"] for r in a] != [r["info"]["files"] for r in c]
    only = sf.load_environment(num_examples=5, questions=["find_key"])
    assert all("key-" in r["prompt"][-1]["content"] for r in only.dataset)


def test_bad_knobs_are_refused() -> None:
    with pytest.raises(ValueError, match="difficulty"):
        sf.load_environment(difficulty="huge")
    with pytest.raises(ValueError, match="questions"):
        sf.load_environment(questions=["how_old"])
    with pytest.raises(ValueError, match="questions"):
        sf.load_environment(questions=[])
    with pytest.raises(ValueError, match="max_invalid_moves"):
        sf.load_environment(max_invalid_moves=0)


async def test_invalid_moves_end_the_task_as_a_loss() -> None:
    env = sf.load_environment(num_examples=1, max_invalid_moves=2)
    row = env.dataset[0]
    state: dict[str, Any] = {"info": row["info"], "turn": 0}
    messages = [*row["prompt"], {"role": "assistant", "content": "Let me look around."}]
    reply, state = await env.env_response(messages, state)
    assert "holds no answer" in reply[0]["content"] and "1 more invalid move" in reply[0]["content"]
    python = {"id": "c1", "type": "function", "function": {"name": "python", "arguments": "{}"}}
    messages += [*reply, {"role": "assistant", "content": None, "tool_calls": [python]}]
    reply, state = await env.env_response(messages, state)
    assert "unknown tool 'python'" in reply[0]["content"]  # this task offers bash only
    assert state["invalid_moves"] == 2 and await env.is_completed(messages + reply, state)


async def test_reference_commands_are_right_on_51_trees_in_one_sandbox(
    sandbox_config: SandboxConfig,
) -> None:
    items = [("", {"files": HAND_TREE}, "")] + [
        sf.generate_item(item_rng("shell-files", 9, i), sf.DIFFICULTIES[i % 3], tuple(sf.QUESTIONS))
        for i in range(51)
    ]
    env = sf.load_environment(num_examples=1)
    async with DockerSandbox(sandbox_config) as sandbox:
        for question, info, answer in items:
            await sandbox.reset()
            for path, content in info["files"].items():
                await sandbox.write_file(path, content)
            kinds = [question] if question else [sf.QUESTIONS[k] for k in HAND_ANSWERS]
            for text in kinds:
                text = text.format(key="key-00c0ffee00")
                expected = answer or HAND_ANSWERS[sf.question_kind(text)]
                command, result, got = await reference_in_sandbox(env, sandbox, text)
                output = result.summary()
                assert sf.answers_match(got, expected), (text, command, output, expected)


async def test_reference_and_random_policies_over_http(sandbox_config: SandboxConfig) -> None:
    env = vfgym.load_environment(
        "shell-files", num_examples=6, seed=4, sandbox_config=sandbox_config, pool_size=1
    )
    ref, rnd = await evaluate_over_http(env, 6)
    assert ref.reward == [1.0] * 6
    assert [s["tools_called"] for s in ref.state] == [["bash"]] * 6
    assert ref.metrics["invalid_moves"] == [0.0] * 6
    assert sum(rnd.reward) < sum(ref.reward)


async def test_a_crashed_sandbox_is_replaced_with_the_tree_written_again(
    sandbox_config: SandboxConfig,
) -> None:
    env = sf.load_environment(num_examples=1, seed=3, sandbox_config=sandbox_config, pool_size=1)
    row = env.dataset[0]
    files = row["info"]["files"]
    state = new_state(row["prompt"], [], row["answer"], row["task"], row["info"], 0)
    messages = list(row["prompt"])

    async def bash(command: str, call_id: str) -> str:
        messages.append(tool_call_message("bash", {"command": command}, call_id))
        replies, _ = await env.env_response(messages, state)
        messages.extend(replies)
        return replies[0]["content"]

    count = "find . -type f | wc -l"
    async with env:
        await env.setup_state(state)
        try:
            assert await bash(count, "c1") == str(len(files))
            await bash("touch mine.txt", "c2")
            client = make_client(sandbox_config.docker_host)
            try:  # the host kills the container: no fault of the model's
                client.api.kill(env.sandbox_for(state).container_id)
            finally:
                client.close()
            crashed = await bash("ls", "c3")
            assert "crashed" in crashed and "replaced" in crashed, crashed
            # The fresh sandbox holds the task's tree again (the question is still
            # answerable) and none of what the model did before.
            assert await bash(count, "c4") == str(len(files))
            assert "No such file" in await bash("ls mine.txt", "c5")
            assert state["invalid_moves"] == 0 and "error" not in state
        finally:
            await env.cleanup_state(state)


def bash_call(command: Any = None, raw: str | None = None, call_id: str = "c1") -> dict[str, Any]:
    """An assistant turn calling the bash tool (`raw` sends the arguments text as is)."""
    arguments = raw if raw is not None else json.dumps({"command": command})
    function = {"name": "bash", "arguments": arguments}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


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
