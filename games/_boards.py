"""What the board games share: reading the board back, and the turn against an opponent.

A policy sees only the conversation, so every board game reads its position back
from the latest message that shows one (`latest_shown`).

In tic-tac-toe and Connect Four the player is X and the environment's opponent O. A
turn is the same in both: the player's piece goes down, the game may end (a line, a
full board), else the opponent answers and the game may end again. `OpponentGame`
plays that turn and keeps the result; a game supplies its board rules
(`board_winner`, `board_full`, `opponent_reply`, `render_board`) and how to read a
move.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Callable, Collection
from typing import Any, ClassVar, TypeVar

from vfgym.games._base import TextGame

from vfgym.types import Messages

PLAYER, OPPONENT, EMPTY = "X", "O", "."
#: Who moves first: always the player, always the opponent, or each in turn by item.
FIRSTS = ("player", "opponent", "alternate")
SCORES = {"win": 1.0, "draw": 0.5}
STATUS = {"win": "X won", "loss": "O won", "draw": "draw"}

T = TypeVar("T")


def opponent_moves_first(first: str, index: int) -> bool:
    """Whether the opponent opens item `index` under the `first` knob (one of `FIRSTS`)."""
    return first == "opponent" or (first == "alternate" and index % 2 == 1)


def latest_shown(
    messages: Messages, read: Callable[[str], T | None], roles: Collection[str] | None = None
) -> T | None:
    """What `read` finds in the latest message it finds anything in, or None.

    Only messages of `roles` are read; with None, every message but the player's own
    (role "assistant").
    """
    for message in reversed(messages):
        role = message.get("role")
        wanted = role != "assistant" if roles is None else role in roles
        if not wanted:
            continue
        found = read(message.get("content") or "")
        if found is not None:
            return found
    return None


def latest_board(messages: Messages, pattern: re.Pattern[str]) -> Any:
    """The last match (as `findall` gives it) of `pattern` in the latest message, not the
    player's own, that shows a board; None when no message does."""
    return latest_shown(messages, lambda text: (pattern.findall(text) or [None])[-1])


class OpponentGame(TextGame):
    """A board game of X, the player, against the built-in O.

    The game state holds `board` (a string) and `result` (None while playing, then
    "win", "draw" or "loss"). Reward: 1 win, 0.5 draw, 0 loss.
    """

    #: How many in a row win, in words ("three", "four"), for the feedback.
    line: ClassVar[str] = ""

    @abstractmethod
    def board_winner(self, board: str) -> str | None:
        """The mark that has a line on `board`, if any."""

    @abstractmethod
    def board_full(self, board: str) -> bool:
        """True when no move is left on `board`."""

    @abstractmethod
    def opponent_reply(self, game: dict[str, Any], board: str) -> tuple[str, str]:
        """The board after the opponent's reply, and the sentence that tells the player."""

    @abstractmethod
    def render_board(self, board: str) -> str:
        """The board as the player sees it."""

    def finish_turn(self, game: dict[str, Any], board: str, played: str) -> str:
        """End the player's turn: `board` already holds the player's piece and `played`
        says where it went. Settles the result, lets the opponent answer while the game
        goes on, stores the board and returns the feedback text."""
        lines = [played]
        if self.board_winner(board) == PLAYER:
            game["result"] = "win"
            lines.append(f"{self.line.capitalize()} in a row: you win!")
        elif self.board_full(board):
            game["result"] = "draw"
            lines.append("The board is full: it is a draw.")
        else:
            board, said = self.opponent_reply(game, board)
            lines.append(said)
            if self.board_winner(board) == OPPONENT:
                game["result"] = "loss"
                lines.append(f"O has {self.line} in a row: you lose.")
            elif self.board_full(board):
                game["result"] = "draw"
                lines.append("The board is full: it is a draw.")
        game["board"] = board
        text = f"{' '.join(lines)}\n\n{self.render_board(board)}"
        return text if game["result"] else f"{text}\n\nYour move (you are X)."

    def is_over(self, game: dict[str, Any]) -> bool:
        return game["result"] is not None

    def score(self, game: dict[str, Any]) -> float:
        return SCORES.get(game["result"], 0.0)

    def render(self, game: dict[str, Any]) -> str:
        status = STATUS.get(game["result"], "X to move")
        return f"{self.render_board(game['board'])}\n{status}"
