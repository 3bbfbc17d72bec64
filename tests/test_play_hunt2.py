"""Defects found by probing `vfgym play` with what a person at a terminal does: bytes that
are not UTF-8, Enter on an empty line, `/tool` where there are no tools, Ctrl-D at the
prompt, Ctrl-C while the episode is set up, and a reward function that fails."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest

import vfgym.cli.play as play_module
from vfgym.cli.play import PlaySession, play
from vfgym.envs.multiturn_env import MultiTurnEnv
from vfgym.rubrics import Rubric
from vfgym.types import Messages, State


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


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


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
