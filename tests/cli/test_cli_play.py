"""`vfgym play`: a person's turns piped in on stdin, the environment's real replies out."""

from __future__ import annotations

import asyncio
import io
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import vfgym.cli.play as play_module
from vfgym.cli.main import main
from vfgym.cli.play import HELP, PlaySession, play
from vfgym.envs.multiturn_env import MultiTurnEnv
from vfgym.envs.registry import load_environment
from vfgym.rubrics import Rubric
from vfgym.types import Messages, State

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


def bytes_stdin(data: bytes) -> io.TextIOWrapper:
    """Standard input as Python opens it in a UTF-8 locale: text over bytes, strict."""
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")


def win(completion: Messages) -> float:
    return 1.0


def judge(completion: Messages) -> float:
    raise RuntimeError("the judge is down")


class Echo(MultiTurnEnv):
    """Answers every turn; records whether its episode was set up and cleaned up."""

    def __init__(self, fail_setup: type[BaseException] | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("eval_dataset", [{"question": "say something", "answer": "x"}])
        kwargs.setdefault("rubric", Rubric(funcs=[win]))
        super().__init__(max_turns=3, **kwargs)
        self.fail_setup = fail_setup
        self.events: list[str] = []

    async def setup_state(self, state: State, **kwargs: Any) -> State:
        self.events.append("setup")  # a sandbox leased, say
        if self.fail_setup is not None:
            raise self.fail_setup("setup stopped")
        return state

    async def cleanup_state(self, state: State, **kwargs: Any) -> None:
        self.events.append("cleanup")

    async def env_response(self, messages: Messages, state: State, **kwargs: Any) -> Any:
        return [{"role": "user", "content": f"heard: {messages[-1].get('content')}"}], state


def run_session(env: MultiTurnEnv, stdin: Any) -> tuple[int, str]:
    out = io.StringIO()
    session = PlaySession(env, env.get_eval_dataset()[0], stdin, out)
    with asyncio.Runner() as runner:
        code = session.run(runner)
    return code, out.getvalue()


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_line_that_is_not_utf8_is_refused_and_the_next_lines_are_still_read() -> None:
    """In a UTF-8 locale the read raised UnicodeDecodeError, which `vfgym play` called an
    unexpected error; the lines after it (in the same read) were lost with it."""
    out = io.StringIO()
    stdin = bytes_stdin(b"\xff\xfe oops\n<move>50</move>\n/quit\n")
    assert play("guess-the-number", stdin=stdin, out=out) == 0
    text = out.getvalue()
    assert "not valid UTF-8" in text and "type it again" in text
    assert "50 is too" in text
    assert "Episode over (quit) after 1 turn(s)." in text


def test_text_already_decoded_with_stand_ins_for_bad_bytes_is_refused_too() -> None:
    """A locale that reads with surrogateescape (or a caller's stream) hands over lone
    surrogates, which reached the game and were echoed back in its reply."""
    code, text = run_session(Echo(), io.StringIO("bad \udcff byte\nfine\n/quit\n"))
    assert code == 0
    assert "not valid UTF-8" in text and "\udcff" not in text
    assert "heard: fine" in text and "after 1 turn(s)" in text


def test_an_empty_line_spends_no_turn() -> None:
    """Enter on an empty line was sent as a turn: in guess-the-number three of them lost
    the game on invalid moves."""
    out = io.StringIO()
    assert play("guess-the-number", stdin=io.StringIO("\n   \n\n/quit\n"), out=out) == 0
    text = out.getvalue()
    assert "Invalid move" not in text
    assert "nothing was sent" in text
    assert "Episode over (quit) after 0 turn(s)." in text


def test_tool_command_where_there_are_no_tools_is_explained_not_sent() -> None:
    """`/tool` in a game was sent as a tool call (a turn spent, answered "the reply holds no
    move"), and `/toolbox` was taken as a call of a tool named `box`."""
    out = io.StringIO()
    typed = '/tool add {"a": 1}\n/toolbox\n/quit\n'
    assert play("guess-the-number", stdin=io.StringIO(typed), out=out) == 0
    text = out.getvalue()
    assert "guess-the-number has no tools" in text and "type your turn as text" in text
    assert "'/toolbox' is not a whole number" in text  # ordinary text: an invalid move
    assert "Episode over (quit) after 1 turn(s)." in text


def test_end_of_input_at_a_terminal_prompt_ends_the_prompt_line() -> None:
    """Ctrl-D at `> ` left the cursor there: "> Episode over (quit) ..." on one line."""
    _, text = run_session(Echo(), Terminal("hello\n"))
    assert "\n> \nEpisode over (quit) after 1 turn(s)." in text


def test_setup_that_fails_or_is_interrupted_is_still_cleaned_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`setup_state` ran outside the try whose finally runs `cleanup_state`: a failed or
    interrupted setup (a sandbox leased, then Ctrl-C) was never released, while `vfgym
    play` said "the episode was cleaned up"."""
    failing = Echo(fail_setup=RuntimeError)
    with pytest.raises(RuntimeError, match="setup stopped"):
        run_session(failing, io.StringIO("hello\n"))
    assert failing.events == ["setup", "cleanup"]

    interrupted = Echo(fail_setup=KeyboardInterrupt)
    monkeypatch.setattr(play_module, "build_environment", lambda env_id, args: interrupted)
    monkeypatch.setattr(play_module, "describe_environment", lambda env_id: None)
    out = io.StringIO()
    assert play("echo", stdin=io.StringIO("hello\n"), out=out) == 130
    assert "the episode was cleaned up" in out.getvalue()
    assert interrupted.events == ["setup", "cleanup"]


def test_a_reward_function_that_failed_is_shown_as_not_available() -> None:
    """Its metric printed as `nan`, where `vfgym eval`'s summary says `n/a`."""
    env = Echo(rubric=Rubric(funcs=[win, judge]))
    _, text = run_session(env, io.StringIO("hello\n/quit\n"))
    rows = [line.split() for line in text.splitlines()]
    assert ["judge", "n/a"] in rows and ["win", "1.000"] in rows
    assert "nan" not in text


def test_a_group_member_with_tools_offers_them_and_runs_a_tool_call() -> None:
    """`vfgym play` on an EnvGroup plays the member the row names, its tools included."""
    from vfgym.envs import EnvGroup, ToolEnv

    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    member = ToolEnv(tools=[add], dataset=[{"question": "What is 2 + 3?", "answer": "5"}])
    group = EnvGroup([member], env_names=["calc"])
    code, out = run_session(group, io.StringIO('/tool add {"a": 2, "b": 3}\n/quit\n'))
    assert code == 0
    assert "[tools]" in out and "has no tools" not in out
    assert "[tool result" in out and "5" in out.split("[tool result", 1)[1]


#: What code-tests reads as the final answer: a fenced block, which needs line breaks.
CODE_BLOCK = re.compile(r"```python[ \t]*\n(.*?)```", re.DOTALL)


def solved(state: State) -> float:
    return float(bool(state.get("solved")))


class CodeAnswer(MultiTurnEnv):
    """Done when the model's turn holds a fenced Python block, as code-tests asks."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            eval_dataset=[{"question": "write f", "answer": ""}],
            rubric=Rubric(funcs=[solved]),
            max_turns=4,
            **kwargs,
        )

    async def is_completed(self, messages: Messages, state: State, **kwargs: Any) -> bool:
        return bool(state.get("solved"))

    async def env_response(self, messages: Messages, state: State, **kwargs: Any) -> Any:
        content = str(messages[-1].get("content") or "")  # type: ignore[union-attr]
        block = CODE_BLOCK.search(content)
        state["solved"] = bool(block and "return 1" in block.group(1))
        state["code"] = block.group(1) if block else None
        return [{"role": "user", "content": "ok" if state["solved"] else "no code block"}], state


def run_session_keeping_states(env: MultiTurnEnv, typed: str) -> tuple[int, str, State]:
    out = io.StringIO()
    session = PlaySession(env, env.get_eval_dataset()[0], io.StringIO(typed), out)
    states: list[State] = []
    finish = env.finish

    def keep(state: State, stop: Any) -> None:  # the episode's State, for the assertions
        states.append(state)
        finish(state, stop)

    env.finish = keep  # type: ignore[method-assign]
    with asyncio.Runner() as runner:
        code = session.run(runner)
    return code, out.getvalue(), states[0]


def test_a_turn_of_several_lines_is_sent_as_one_turn() -> None:
    """Every line was one turn, so an answer that needs line breaks (a code block) could
    not be typed at all: `vfgym play code-tests` could not be won by a person."""
    typed = "/paste\n```python\ndef f():\n    return 1\n```\n/end\n/quit\n"
    code, text, state = run_session_keeping_states(CodeAnswer(), typed)
    assert code == 0
    assert "after 1 turn(s)" in text and "reward  1.000" in text
    assert state["code"] == "def f():\n    return 1\n"
    assert "/paste" in HELP and "/end" in HELP


def test_an_empty_paste_spends_no_turn_and_end_of_input_sends_what_was_pasted() -> None:
    """A paste with nothing in it is explained, not sent; input that ends inside a
    paste sends the lines pasted so far (a piped script without `/end`)."""
    typed = "/paste\n/end\n/paste\n```python\ndef f():\n    return 1\n```\n"
    code, text, state = run_session_keeping_states(CodeAnswer(), typed)
    assert code == 0
    assert "nothing was sent" in text
    assert "after 1 turn(s)" in text and state["solved"]
