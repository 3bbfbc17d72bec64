"""How a `GymEnv` shows its episode: `render()` in "ansi" mode, and the turns
"human" mode prints as they happen.

A layer of `GymEnv` (see `vfgym.gym.env`): the transcript, followed by the board a
game's `render_state(state)` draws (without repeating rows the last reply already
showed) and how the episode ended.
"""

from __future__ import annotations

import sys

from vfgym.gym.rows import RowDrawing
from vfgym.gym.text import clean_text, conversation_text
from vfgym.types import ChatMessage, Messages


class Rendering(RowDrawing):
    """The text of `render()` and of human mode."""

    __slots__ = ()

    def _render_text(self) -> str:
        """The whole conversation, the board and the end, for "ansi" mode."""
        state = self._state
        if state is None:
            return ""
        prompt, completion = state["prompt"], state["completion"]
        if isinstance(prompt, list):
            return self._framed(conversation_text(prompt + completion))
        return self._framed(clean_text(prompt + completion))

    def _show_turn(self, turn: ChatMessage | str | None, replies: Messages) -> None:
        """Human mode: print the model's `turn` (None at reset) and the `replies` to it,
        then the board: what the step added, whatever the env keeps of its history."""
        if isinstance(replies, str):  # a completion-style env: the text as it is
            text = clean_text((turn if isinstance(turn, str) else "") + replies)
        else:
            if isinstance(turn, str):
                turn = {"role": "assistant", "content": turn}
            text = conversation_text(([turn] if turn is not None else []) + list(replies))
        _print_human(self._framed(text))

    def _framed(self, text: str) -> str:
        """`text` followed by the board (unless the text just showed it) and, once the
        episode is over, how it ended."""
        state = self._state
        render_state = getattr(self.environment, "render_state", None)
        if state is not None and callable(render_state):
            board = clean_text(str(render_state(state) or ""))
            if board and board not in text:
                text += _board_rest(text, board)
        if self._done and state is not None and state.get("stop_reason"):
            text += f"\n\n(episode over: {state['stop_reason']})"
        return text.strip("\n")


def _board_rest(text: str, board: str) -> str:
    """What of `board` to add after `text`: all of it, or, when `text` already ends with
    the board's first lines (a game's reply shows the board, and its render adds a
    status line such as "(playing)"), only the lines after them, so no row shows twice."""
    lines = board.split("\n")
    tail = text.rstrip("\n")
    for cut in range(len(lines) - 1, 0, -1):
        shown = "\n".join(lines[:cut])
        if tail == shown or tail.endswith("\n" + shown):
            return "\n" + "\n".join(lines[cut:])
    return "\n\n" + board


def _print_human(text: str) -> None:
    """Print for human mode, replacing what the terminal's encoding cannot show (the
    visible stand-ins for control characters are not ASCII)."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    print(text.encode(encoding, "replace").decode(encoding), file=sys.stdout, flush=True)
