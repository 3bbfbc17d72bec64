"""A multi-turn environment that counts down, for tests of what `env_response` may
return: subclasses change `reply` to make one mistake each."""

from __future__ import annotations

from typing import Any

import vfgym as vf

COUNTDOWN_ROWS = [{"question": "Count down from 2.", "answer": "2"}]


class Countdown(vf.MultiTurnEnv):
    """Say the numbers from N down to 1; subclasses change `reply` to make a mistake."""

    def setup_state(self, state: vf.State, **kwargs: Any) -> vf.State:
        state["game_state"] = {"next": int(state["answer"])}
        return state

    def is_completed(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> bool:
        return state["game_state"]["next"] == 0

    def env_response(
        self, messages: vf.Messages, state: vf.State, **kwargs: Any
    ) -> tuple[vf.Messages, vf.State]:
        state["game_state"]["next"] -= 1
        return [self.reply()], state

    def reply(self) -> Any:
        return {"role": "user", "content": "ok"}


def finished(state: vf.State) -> float:
    return float(state["game_state"]["next"] == 0)


def countdown(cls: type[Countdown]) -> Countdown:
    return cls(dataset=COUNTDOWN_ROWS, rubric=vf.Rubric(funcs=[finished]), max_turns=4)
