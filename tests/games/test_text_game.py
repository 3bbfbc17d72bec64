"""The TextGame base the catalogue builds on: rules it refuses when a game is made,
feedback it refuses while playing, and how invalid moves are counted."""

from __future__ import annotations

from typing import Any

import pytest
from scripted_models import scripted
from vfgym.games._base import TextGame, move_message

import vfgym as vf
from vfgym.errors import InvalidMove
from vfgym.gym import GymEnv


class CountGame(TextGame):
    """A TextGame with only its rules: say N, N-1, ..., 1."""

    game_name = "count"

    def new_game(self, info: dict[str, Any]) -> dict[str, Any]:
        return {"next": info["start"]}

    def apply_move(self, game: dict[str, Any], move: str) -> str:
        if move != str(game["next"]):
            raise InvalidMove(f"say {game['next']}, not {move}")
        game["next"] -= 1
        return "ok"

    def is_over(self, game: dict[str, Any]) -> bool:
        return game["next"] == 0

    def score(self, game: dict[str, Any]) -> float:
        return 1.0

    def render(self, game: dict[str, Any]) -> str:
        return f"next: {game['next']}"

    def reference_policy(self, messages: vf.Messages) -> vf.ChatMessage:
        said = sum(1 for m in messages if m["role"] == "assistant")
        return move_message(str(2 - said))

    def random_move(self, messages: vf.Messages, rng: Any) -> str:
        return "1"


GAME_ROWS = [{"question": "Count down from 2.", "answer": "2", "info": {"start": 2}}]


class AsyncOver(CountGame):
    async def is_over(self, game: dict[str, Any]) -> bool:  # type: ignore[override]
        return game["next"] == 0


class AsyncApply(CountGame):
    async def apply_move(self, game: dict[str, Any], move: str) -> str:  # type: ignore[override]
        return CountGame.apply_move(self, game, move)


class NoFeedback(CountGame):
    def apply_move(self, game: dict[str, Any], move: str) -> str:
        CountGame.apply_move(self, game, move)  # forgot `return`
        return None  # type: ignore[return-value]


@pytest.mark.parametrize(("cls", "rule"), [(AsyncOver, "is_over"), (AsyncApply, "apply_move")])
def test_textgame_refuses_async_rules_when_made(cls: type[CountGame], rule: str) -> None:
    with pytest.raises(TypeError, match=rf"{cls.__name__}\.{rule} is async.*plain `def`"):
        cls(dataset=GAME_ROWS, max_turns=5)


@pytest.mark.parametrize("tagged", [True, False])
def test_textgame_feedback_that_is_no_text_is_refused(tagged: bool) -> None:
    env = GymEnv(NoFeedback(dataset=GAME_ROWS, max_turns=5))
    env.reset(seed=0)
    with pytest.raises(TypeError, match=r"NoFeedback\.apply_move must return the feedback"):
        env.step("<move>2</move>" if tagged else "2")
    env.close()


async def test_textgame_feedback_that_is_no_text_ends_the_rollout_as_an_error(
    model_server: Any,
) -> None:
    server = await model_server(scripted("<move>2</move>"))
    out = await NoFeedback(dataset=GAME_ROWS, max_turns=5).evaluate(server.client(), "m")
    assert "apply_move must return the feedback" in out.state[0]["error"]["message"]


def test_an_invalid_move_without_a_full_stop_is_not_run_into_the_count() -> None:
    env = GymEnv(CountGame(dataset=GAME_ROWS, max_turns=5))
    env.reset(seed=0)
    observation, *_ = env.step("<move>3</move>")
    assert observation == "Invalid move: say 2, not 3. 2 more invalid moves end the game."
    observation, *_ = env.step("3")  # the untagged path words it the same
    assert observation == "Invalid move: say 2, not 3. 1 more invalid move ends the game."
