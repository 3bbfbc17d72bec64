"""Defects found by using `vfgym play` and `vfgym view` as a person would: a turn that must
span several lines (code-tests asks for a ```python block), and results directories as
a run leaves them."""

from __future__ import annotations

import asyncio
import io
import re
from typing import Any

from vfgym.cli.play import HELP, PlaySession
from vfgym.envs.multiturn_env import MultiTurnEnv
from vfgym.rubrics import Rubric
from vfgym.types import Messages, State

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


def run_session(env: MultiTurnEnv, typed: str) -> tuple[int, str, State]:
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
    code, text, state = run_session(CodeAnswer(), typed)
    assert code == 0
    assert "after 1 turn(s)" in text and "reward  1.000" in text
    assert state["code"] == "def f():\n    return 1\n"
    assert "/paste" in HELP and "/end" in HELP


def test_an_empty_paste_spends_no_turn_and_end_of_input_sends_what_was_pasted() -> None:
    """A paste with nothing in it is explained, not sent; input that ends inside a
    paste sends the lines pasted so far (a piped script without `/end`)."""
    typed = "/paste\n/end\n/paste\n```python\ndef f():\n    return 1\n```\n"
    code, text, state = run_session(CodeAnswer(), typed)
    assert code == 0
    assert "nothing was sent" in text
    assert "after 1 turn(s)" in text and state["solved"]
