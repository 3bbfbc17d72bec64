"""`vfgym play`: a person's turns piped in on stdin, the environment's real replies out."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from vfgym.cli.main import main
from vfgym.cli.play import play
from vfgym.envs.registry import load_environment

TOOL_TASK = '''"""Add two numbers with a tool (a test plugin)."""
from vfgym.envs import ToolEnv
from vfgym.rubrics import Rubric

KIND = "tool"


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


def correct(completion, answer) -> float:
    return float(completion[-1].get("content", "").strip() == answer)


def load_environment():
    return ToolEnv(
        tools=[add],
        eval_dataset=[{"question": "What is 2+3? Use the tool.", "answer": "5"}],
        rubric=Rubric(funcs=[correct]),
        max_turns=6,
    )
'''


@pytest.fixture
def tool_task(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> str:
    """A third-party tool environment, registered through the entry-point group."""
    root = tmp_path_factory.mktemp("plugin")
    dist = root / "vfgym_play_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vfgym-play-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[vfgym.environments]\nadd-demo = vfgym_play_add_demo:load_environment\n"
    )
    (root / "vfgym_play_add_demo.py").write_text(TOOL_TASK)
    monkeypatch.syspath_prepend(str(root))
    return "add-demo"


def play_lines(
    argv: list[str],
    typed: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(f"{line}\n" for line in typed)))
    code = main(["play", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_guessing_game_played_to_a_win(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env = load_environment("guess-the-number", difficulty="easy")
    target = int(env.get_eval_dataset()[1]["answer"])
    wrong = 20 if target != 20 else 1
    code, out, err = play_lines(
        ["guess-the-number", "-a", '{"difficulty": "easy"}', "-i", "1"],
        [str(wrong), f"<move>{target}</move>"],
        monkeypatch,
        capsys,
    )
    assert code == 0, err
    assert "guess-the-number · example 1" in out
    assert "[system]" in out and "between 1 and 20" in out  # the prompt, as a model sees it
    assert f"> {wrong}" in out and f"{wrong} is too" in out
    assert "[state]" in out and f"guesses: {wrong}" in out  # render_state after each turn
    assert f"{target} is correct!" in out
    assert "Episode over (completed) after 2 turn(s)." in out
    assert "reward  1.000" in out
    assert any(line.split() == ["win", "1.000"] for line in out.splitlines())


def test_quit_and_end_of_input_end_the_episode_unscored(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = play_lines(["guess-the-number"], ["/help", "/quit"], monkeypatch, capsys)
    assert code == 0
    assert "`/tool NAME {json arguments}` calls a tool" in out
    assert "Episode over (quit) after 0 turn(s)." in out and "reward  0.000" in out
    code, out, _ = play_lines(["guess-the-number"], ["50"], monkeypatch, capsys)
    assert code == 0 and "Episode over (quit) after 1 turn(s)." in out


def test_tool_calls_typed_by_hand(
    tool_task: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = play_lines(
        [tool_task],
        [
            "/tool",  # no name: usage, no turn spent
            '/tool add {"a": 2, "b": 3}',
            "/tool add {not json",
            '/tool subtract {"a": 1}',
            "5",
        ],
        monkeypatch,
        capsys,
    )
    assert code == 0, err
    assert "[tools]" in out and "add(a, b)  Add two integers." in out
    assert "usage: /tool NAME {json arguments}" in out
    results = out.split("[tool result call_")
    assert results[1].startswith("1]\n5\n")
    assert "the arguments of add are not valid JSON" in results[2]
    assert "unknown tool 'subtract'" in results[3] and "add" in results[3]
    assert "Episode over (completed) after 4 turn(s)." in out
    assert "reward  1.000" in out


def test_example_out_of_range(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(Exception, match="out of range"):
        play("guess-the-number", {"num_examples": 2}, example=5, stdin=io.StringIO(""))
    code = main(["play", "guess-the-number", "-a", '{"num_examples": 2}', "-i", "5"])
    assert code == 2 and "has 2 evaluation examples" in capsys.readouterr().err


def test_play_as_a_subprocess_with_piped_moves(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "vfgym", "play", "tictactoe", "-a", '{"difficulty": "easy"}'],
        input="B2\nZ9\n/quit\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "You are X, your opponent is O." in done.stdout
    assert "> B2\n[user]\nYou played B2." in done.stdout and "2  . X ." in done.stdout
    assert done.stdout.count("[state]") == 1  # shown again only when the position changes
    assert "Invalid move" in done.stdout
    assert "Episode over (quit) after 2 turn(s)." in done.stdout
    assert done.stderr == ""
