"""Small real environments the Gym adapter tests drive (no mocks of the adapter).

- `GuessEnv`: guess a hidden number; sync hooks, `step_reward`, `render_state`,
  and a per-environment log of setup and cleanup calls.
- `AsyncGuessEnv`: the same game with hooks that really suspend, so the adapter
  must drive it on an event loop.
- `CalculatorEnv`: a `ToolEnv` with an `add` tool.
- `QAEnv`: a `SingleTurnEnv`.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from vfgym.envs import MultiTurnEnv, SingleTurnEnv, ToolEnv
from vfgym.inference.messages import last_content
from vfgym.rubrics import Rubric
from vfgym.types import Messages, State

SYSTEM = "Guess my number. Answer with a number; I say higher or lower."
NUMBER = re.compile(r"-?\d+")


def guess_rows(n: int = 12) -> list[dict[str, Any]]:
    return [
        {
            "question": f"Round {i}: the number is between 1 and 20. Ünïcödé ✓ — go!",
            "answer": str((7 * i) % 20 + 1),
            "info": {"target": (7 * i) % 20 + 1, "round": i},
        }
        for i in range(n)
    ]


def won(state: State) -> float:
    return 1.0 if state["game_state"]["won"] else 0.0


def guesses(state: State) -> float:
    return float(len(state["game_state"]["guesses"]))


class GuessEnv(MultiTurnEnv):
    """Higher/lower against `info["target"]`, ended by a right guess or max_turns."""

    def __init__(self, num_examples: int = 12, max_turns: int = 6, **kwargs: Any) -> None:
        self.events: list[tuple[str, int]] = []
        super().__init__(
            dataset=guess_rows(num_examples),
            system_prompt=SYSTEM,
            rubric=Rubric(funcs=[won, guesses], weights=[1.0, 0.0]),
            max_turns=max_turns,
            **kwargs,
        )

    def setup_state(self, state: State, **kwargs: Any) -> State:
        state["game_state"] = {"target": state["info"]["target"], "guesses": [], "won": False}
        self.events.append(("setup", state["example_id"]))
        return state

    def is_completed(self, messages: Messages, state: State, **kwargs: Any) -> bool:
        return state["game_state"]["won"]

    def env_response(self, messages: Messages, state: State, **kwargs: Any) -> tuple[Any, State]:
        game = state["game_state"]
        found = NUMBER.findall(last_content(messages))
        if not found:
            return [{"role": "user", "content": "That is not a number. Guess again."}], state
        guess = int(found[-1])
        game["guesses"].append(guess)
        if guess == game["target"]:
            game["won"] = True
            return [{"role": "user", "content": f"{guess} is right!"}], state
        hint = "higher" if guess < game["target"] else "lower"
        return [{"role": "user", "content": f"{guess}: go {hint}."}], state

    def cleanup_state(self, state: State, **kwargs: Any) -> None:
        self.events.append(("cleanup", state["example_id"]))

    def step_reward(self, state: State) -> float:
        """-0.1 for every guess that missed, 0 for the right one."""
        return 0.0 if state["game_state"]["won"] else -0.1

    def render_state(self, state: State) -> str:
        game = state["game_state"]
        return f"board: guesses={game['guesses']} won={game['won']}"


class LoopHeldGuessEnv(GuessEnv):
    """Opens a future on the episode's loop at setup and awaits it at cleanup, as a
    sandbox session returns its container through the client it opened there."""

    async def setup_state(self, state: State, **kwargs: Any) -> State:
        GuessEnv.setup_state(self, state)
        self.held = asyncio.get_running_loop().create_future()
        self.held.set_result("open")
        return state

    async def cleanup_state(self, state: State, **kwargs: Any) -> None:
        await self.held  # raises when awaited from another loop
        state["released_on"] = id(asyncio.get_running_loop())


class AsyncGuessEnv(GuessEnv):
    """`GuessEnv` whose environment turn awaits real event-loop work."""

    async def env_response(
        self, messages: Messages, state: State, **kwargs: Any
    ) -> tuple[Any, State]:
        await asyncio.sleep(0)
        state["loop_seen"] = id(asyncio.get_running_loop())
        return GuessEnv.env_response(self, messages, state)


class BrokenEnv(GuessEnv):
    """Raises inside `env_response` once a guess of 13 comes in."""

    def env_response(self, messages: Messages, state: State, **kwargs: Any) -> tuple[Any, State]:
        if "13" in last_content(messages):
            raise RuntimeError("the game engine crashed on 13")
        return super().env_response(messages, state)


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first number
        b: the second number
    """
    return a + b


def final_answer_correct(completion: Messages, answer: str) -> float:
    return 1.0 if answer in last_content(completion) else 0.0


def calculator_rows(n: int = 6) -> list[dict[str, Any]]:
    return [
        {"question": f"What is {10 + i} + {30 + i}? Use the add tool.", "answer": str(40 + 2 * i)}
        for i in range(n)
    ]


class CalculatorEnv(ToolEnv):
    def __init__(self, num_examples: int = 6, **kwargs: Any) -> None:
        super().__init__(
            tools=[add],
            dataset=calculator_rows(num_examples),
            rubric=Rubric(funcs=[final_answer_correct]),
            max_turns=4,
            **kwargs,
        )


def exact(completion: Messages, answer: str) -> float:
    return 1.0 if last_content(completion).strip() == answer else 0.0


class QAEnv(SingleTurnEnv):
    def __init__(self, **kwargs: Any) -> None:
        rows = [{"question": f"What is {i} * 3?", "answer": str(3 * i)} for i in range(5)]
        super().__init__(dataset=rows, rubric=Rubric(funcs=[exact]), **kwargs)


def completion_sum_env() -> SingleTurnEnv:
    """A completion-style env (text in, text out): "2 + 2 =" answered " 4"."""
    return SingleTurnEnv(
        dataset=[{"prompt": "2 + 2 =", "answer": "4"}],
        message_type="completion",
        rubric=Rubric(funcs=[lambda completion, answer: float(completion.strip() == answer)]),
    )


def load_guess(**kwargs: Any) -> GuessEnv:
    return GuessEnv(**kwargs)


def load_calculator(**kwargs: Any) -> CalculatorEnv:
    return CalculatorEnv(**kwargs)


def load_qa(**kwargs: Any) -> QAEnv:
    return QAEnv(**kwargs)


def load_async_guess(**kwargs: Any) -> AsyncGuessEnv:
    return AsyncGuessEnv(**kwargs)


def bisect_policy(observation: str) -> str:
    """Guesses 10 first, then moves by the hint (deterministic, text observations)."""
    match = re.search(r"(-?\d+): go (higher|lower)", observation)
    if match is None:
        return "10"
    guess = int(match.group(1))
    step = 3 if match.group(2) == "higher" else -3
    return str(guess + step)


__all__ = [
    "AsyncGuessEnv",
    "BrokenEnv",
    "CalculatorEnv",
    "GuessEnv",
    "QAEnv",
    "bisect_policy",
    "load_async_guess",
    "load_calculator",
    "load_guess",
    "load_qa",
]


Loop = asyncio.AbstractEventLoop


class Ledger:
    """Which loop opened each episode and on which loop(s) its cleanup ran."""

    def __init__(self) -> None:
        self.opened: dict[int, Loop] = {}
        self.cleaned: dict[int, list[Loop]] = {}

    def open(self) -> int:
        episode = len(self.opened)
        self.opened[episode] = asyncio.get_running_loop()
        return episode

    def clean(self, episode: int) -> None:
        self.cleaned.setdefault(episode, []).append(asyncio.get_running_loop())

    def running(self) -> list[int]:
        """Episodes opened and not cleaned up (yet)."""
        return [e for e in self.opened if e not in self.cleaned]

    def misplaced(self) -> dict[int, list[Loop]]:
        """Episodes whose cleanup did not run exactly once, on the loop that opened them."""
        return {
            e: self.cleaned.get(e, [])
            for e, loop in self.opened.items()
            if [c is loop for c in self.cleaned.get(e, [])] != [True]
        }


class LeasedGuessEnv(GuessEnv):
    """`GuessEnv` whose episode holds something of the loop its setup ran on and gives
    it back in an async cleanup that must run there, as a sandbox lease does."""

    def __init__(self, ledger: Ledger, **kwargs: Any) -> None:
        self.ledger = ledger
        super().__init__(**kwargs)

    async def setup_state(self, state: State, **kwargs: Any) -> State:
        GuessEnv.setup_state(self, state)
        await asyncio.sleep(0)
        state["episode"] = self.ledger.open()
        return state

    async def cleanup_state(self, state: State, **kwargs: Any) -> None:
        await asyncio.sleep(0)
        self.ledger.clean(state["episode"])
