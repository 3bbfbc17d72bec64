"""What the catalogue's tool tasks share: the answer format, invalid-move accounting, metrics.

A tool task is a `ToolEnv` whose model calls tools and then answers once, in
`<answer>…</answer>` tags, in a reply that calls no tool (an answer beside a tool
call is not final, and the model is told so). `ToolTask` (a mixin placed before the
ToolEnv class in the bases) makes the catalogue's promises hold for tool tasks as
they do for games: a reply that holds no readable answer (empty tags included) is
an invalid move with feedback that says what to do, so is each tool call that fails
(malformed JSON, an unknown tool, bad arguments), with a note that says how many
are left; `max_invalid_moves` of them end the episode with reward 0. A failure
of the infrastructure (the ToolEnv's `infrastructure_errors`, such as a sandbox
that died and could not be replaced) is never an invalid move: it ends the
episode as an error. It also gives the shared metrics and the helpers policies
use to call tools and answer.
"""

from __future__ import annotations

import json
import random
import re
from abc import abstractmethod
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Self

from vfgym.games._base import EVAL_OFFSET, game_rows

from vfgym.engine._async import never_suspends
from vfgym.parsers._chat import message_text
from vfgym.rubrics import Rubric
from vfgym.types import ChatMessage, Messages, RewardFunc, State

#: One answer: from an opening tag (the last of several in a row, so a stray one
#: before it is not part of the answer) to its closing tag, or to the end of the
#: text when the final one is left unclosed, as a server that stops on
#: `</answer>` leaves it (and as the library's XMLParser reads it).
ANSWER_TAG = re.compile(r"<answer>((?:(?!<answer>).)*?)(?:</answer>|\Z)", re.DOTALL | re.IGNORECASE)


def extract_answer(text: str | None) -> str | None:
    """The content of the last non-blank `<answer>…</answer>` in `text`, stripped; None if
    there is none.

    Empty tags are no answer at all: an episode must not end, nor earn format credit,
    on `<answer></answer>`.
    """
    for found in reversed(ANSWER_TAG.findall(text or "")):
        if found.strip():
            return found.strip()
    return None


def has_blank_answer(text: str | None) -> bool:
    """Whether `text` holds answer tags, all of them empty (for feedback that says so)."""
    found = ANSWER_TAG.findall(text or "")
    return bool(found) and not any(answer.strip() for answer in found)


def answer_message(answer: str) -> ChatMessage:
    """An assistant turn that gives `answer` in the tool tasks' answer format."""
    return {"role": "assistant", "content": f"<answer>{answer}</answer>"}


def tool_call_message(
    name: str, arguments: dict[str, Any], call_id: str, content: str = ""
) -> ChatMessage:
    """An assistant turn with one tool call in OpenAI wire format (arguments as JSON text)."""
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }


def task_text(messages: Messages) -> str:
    """The task statement: the first user message (what a policy reads the problem from)."""
    if isinstance(messages, str):
        return messages
    for message in messages:
        if message.get("role") == "user":
            return message_text(message)
    return ""


def tool_outputs_since_last_turn(messages: Messages) -> list[str]:
    """The tool messages that answer the latest assistant turn, in order (empty if none)."""
    if isinstance(messages, str):
        return []
    outputs: list[str] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        outputs.append(message_text(message))
    return outputs[::-1]


def assistant_turns(messages: Messages) -> int:
    """How many assistant turns the conversation holds (numbers a policy's tool-call ids)."""
    if isinstance(messages, str):
        return 0
    return sum(1 for m in messages if m.get("role") == "assistant")


def check_invalid_move_limit(max_invalid_moves: Any) -> None:
    """Refuse a limit that is not a whole number of at least 1: below 1 no episode could
    end on invalid moves the way it promises, and a fraction would be counted down in
    the feedback ("0.5 more invalid moves"). The types are those the registry demands."""
    if not isinstance(max_invalid_moves, int) or isinstance(max_invalid_moves, bool):
        raise TypeError(
            f"max_invalid_moves must be a whole number (int) such as 3, not {max_invalid_moves!r}"
        )
    if max_invalid_moves < 1:
        raise ValueError(f"max_invalid_moves must be at least 1, not {max_invalid_moves}")


def check_seed(seed: Any) -> None:
    """Refuse a dataset seed that is not a whole number.

    Items are seeded by the text of (task, seed, index), so "0", 0.0, True or None
    would each quietly give a dataset other than seed 0's instead of an error.
    """
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be a whole number (int) such as 0, not {seed!r}")


def check_turn_limit(max_turns: Any, minimum: int, why: str = "") -> None:
    """Refuse a `max_turns` that is not a whole number of at least `minimum`.

    Checked where the knob is given, so a "8" from a config file is named as the
    problem rather than failing a comparison with "'<' not supported"; `why` says
    what the minimum is for.
    """
    if not isinstance(max_turns, int) or isinstance(max_turns, bool):
        raise TypeError(
            f"max_turns must be a whole number (int) of at least {minimum}, not {max_turns!r}"
        )
    if max_turns < minimum:
        reason = f" ({why})" if why else ""
        raise ValueError(f"max_turns must be at least {minimum}{reason}, not {max_turns}")


def subset_knob(knob: str, given: Iterable[str], allowed: Iterable[str]) -> tuple[str, ...]:
    """`given` in order without repeats, refused unless it is a non-empty subset of `allowed`.

    `knob` names the argument in the error, which lists what may be chosen. A lone
    str is refused as the registry refuses it: read as an iterable it would name a
    choice per letter, and the error would list the letters.
    """
    if isinstance(given, str):
        raise TypeError(f"{knob} must be a tuple or list of names, such as [{given!r}], not a str")
    chosen = tuple(dict.fromkeys(given))
    allowed = list(allowed)
    unknown = [name for name in chosen if name not in allowed]
    if not chosen or unknown:
        raise ValueError(f"{knob} must be a non-empty subset of {allowed}; unknown: {unknown}")
    return chosen


def final_reply(completion: Messages) -> str | None:
    """The text of the last assistant turn if it called no tool: the model's answer turn.

    Content given as a list of parts reads as its text parts, as the parsers read it.
    """
    if isinstance(completion, str):
        return completion
    for message in reversed(completion):
        if message.get("role") == "assistant":
            return None if message.get("tool_calls") else message_text(message)
    return None


class ToolTask:
    """Mixin for a `ToolEnv` subclass: answer format, invalid moves and shared metrics.

    Put it first in the bases (`class MyTask(ToolTask, SandboxEnv)`); its `__init__`
    takes `max_invalid_moves` and gives the ToolEnv the rubric of `build_rubric`.
    Subclasses supply `read_answer` (when the format is not `<answer>` tags),
    `answers_match` (or a whole `build_rubric` when the reward is not a right answer),
    `reference_policy` and `random_reply`.
    """

    #: The registry name, e.g. "python-math" (also seeds the dataset items).
    game_name: ClassVar[str] = ""
    max_invalid_moves: int = 3
    #: What the model is told when its final reply holds no answer.
    answer_hint: str = "give your final answer as <answer>YOUR ANSWER</answer>"

    def __init__(self, *, max_invalid_moves: int = 3, **kwargs: Any) -> None:
        check_invalid_move_limit(max_invalid_moves)
        self.max_invalid_moves = max_invalid_moves
        super().__init__(rubric=self.build_rubric(), **kwargs)  # type: ignore[call-arg]

    @classmethod
    def from_items(
        cls,
        make: Callable[[random.Random, int], tuple[str, dict[str, Any], str]],
        num_examples: int,
        seed: int,
        **kwargs: Any,
    ) -> Self:
        """The task over training and evaluation rows made by `make(rng, index)`.

        The evaluation rows start at `EVAL_OFFSET`, so the two splits never overlap.
        """
        check_seed(seed)
        return cls(
            dataset=game_rows(cls.game_name, make, num_examples, seed),
            eval_dataset=game_rows(cls.game_name, make, num_examples, seed, offset=EVAL_OFFSET),
            **kwargs,
        )

    # ------------------------------------------------------------ answers

    def read_answer(self, text: str) -> str | None:
        """The answer in a final reply, or None when the reply holds none."""
        return extract_answer(text)

    def final_answer(self, completion: Messages) -> str | None:
        """The answer the episode ended with, or None (no answer turn, or none readable)."""
        reply = final_reply(completion)
        return None if reply is None else self.read_answer(reply)

    def answers_match(self, given: str | None, expected: str) -> bool:
        """Whether the final answer `given` (None: there was none) is the expected one.

        What counts as the same answer is the task's to say, so a task scored by
        `correct` must define it.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must define answers_match (or its own build_rubric)"
        )

    # -------------------------------------------------------------- hooks

    def lost_on_invalid_moves(self, state: State) -> bool:
        return state.get("invalid_moves", 0) >= self.max_invalid_moves

    async def setup_state(self, state: State, **kwargs: Any) -> State:
        """Start the invalid-move count at 0, so it can be read from the reset on (as in
        the games), not only after the first invalid move."""
        state = await super().setup_state(state, **kwargs)  # type: ignore[misc]
        state.setdefault("invalid_moves", 0)
        return state

    @never_suspends
    async def is_completed(self, messages: Messages, state: State, **kwargs: Any) -> bool:
        """Done on an answer, on too many invalid moves, or when the context is full."""
        if state.get("prompt_too_long") or self.lost_on_invalid_moves(state):
            return True
        if not isinstance(messages, list) or not messages:
            return False
        last = messages[-1]
        if last.get("role") != "assistant" or last.get("tool_calls"):
            return False
        return self.read_answer(message_text(last)) is not None

    async def env_response(
        self, messages: Messages, state: State, **kwargs: Any
    ) -> tuple[Messages, State]:
        """Run the tool calls, or tell the model its reply held no answer.

        A failed call is an invalid move, and a note after the tool replies says so
        and how many are left, as the feedback to a reply without an answer does. An
        answer given beside a tool call is not final (the calls must be answered);
        the note says that too, so the model knows to answer again.
        """
        assert isinstance(messages, list)
        state.setdefault("invalid_moves", 0)
        last = messages[-1]
        if not last.get("tool_calls"):
            state["invalid_moves"] += 1
            return [{"role": "user", "content": self._no_answer_feedback(last, state)}], state
        before = len(state.get("tool_call_log", []))
        replies, state = await super().env_response(messages, state, **kwargs)  # type: ignore[misc]
        failed = sum(1 for entry in state["tool_call_log"][before:] if not entry["ok"])
        state["invalid_moves"] += failed
        note = self._tool_turn_note(last, failed, state)
        if note:
            replies = [*replies, {"role": "user", "content": note}]
        return replies, state

    def _no_answer_feedback(self, reply: ChatMessage, state: State) -> str:
        """What a reply with neither a tool call nor an answer is told."""
        why = "it holds no answer"
        if has_blank_answer(message_text(reply)):
            why += " (its answer tags are empty)"
        return f"Invalid reply: {why}; {self.answer_hint}. {self._limit_note(state)}"

    def _tool_turn_note(self, turn: ChatMessage, failed: int, state: State) -> str:
        """The note after a tool-call turn's replies ("" when there is nothing to tell)."""
        notes = []
        if failed:
            what = (
                "That failed tool call is an invalid move"
                if failed == 1
                else f"Those {failed} failed tool calls are invalid moves"
            )
            notes.append(f"{what}. {self._limit_note(state)}")
        if not self.lost_on_invalid_moves(state) and extract_answer(message_text(turn)):
            notes.append(
                "Your reply called a tool, so its answer is not final: when you are done, "
                "give the answer in a reply without tool calls."
            )
        return " ".join(notes)

    def _limit_note(self, state: State) -> str:
        left = self.max_invalid_moves - state.get("invalid_moves", 0)
        if left > 1:
            return f"{left} more invalid moves end the task."
        if left == 1:
            return "1 more invalid move ends the task."
        return "That was the last invalid move allowed: the task is over."

    # ------------------------------------------------------------- rubric

    def build_rubric(self) -> Rubric:
        """`correct` (weight 1) plus the shared metrics; tasks rewarded otherwise override it.

        `correct` is 1 for a final answer that `answers_match` the row's answer, and 0
        for any episode lost on invalid moves, whatever it answered.
        """
        task = self

        def correct(completion: Messages, answer: str, state: State) -> float:
            if task.lost_on_invalid_moves(state):
                return 0.0
            return 1.0 if task.answers_match(task.final_answer(completion), answer) else 0.0

        return self.rubric_of(correct)

    def rubric_of(
        self, reward: RewardFunc, *metrics: RewardFunc, parallelize_scoring: bool = True
    ) -> Rubric:
        """A rubric whose reward is `reward` alone: `metrics` and the shared metrics are
        reported with weight 0."""
        funcs = [reward, *metrics, *self.metric_funcs()]
        return Rubric(
            funcs=funcs,
            weights=[1.0] + [0.0] * (len(funcs) - 1),
            parallelize_scoring=parallelize_scoring,
        )

    def metric_funcs(self) -> list[RewardFunc]:
        """Metrics every tool task reports (weight 0): turns, tool calls, invalid moves, format."""
        task = self

        def turns(state: State) -> float:
            return float(state.get("turn", 0))

        def tool_calls(state: State) -> float:
            return float(len(state.get("tools_called") or []))

        def invalid_moves(state: State) -> float:
            return float(state.get("invalid_moves", 0))

        def format_reward(completion: Messages) -> float:
            return 1.0 if task.final_answer(completion) is not None else 0.0

        return [turns, tool_calls, invalid_moves, format_reward]

    # ------------------------------------------------------------ policies

    @abstractmethod
    def reference_policy(self, messages: Messages) -> ChatMessage:
        """A solver that reads only the conversation, never the hidden State."""

    @abstractmethod
    def random_reply(self, messages: Messages, rng: random.Random) -> ChatMessage:
        """A nonsense answer, for the random baseline policy."""

    def make_random_policy(self, seed: int = 0) -> Callable[[Messages], ChatMessage]:
        """A baseline that answers at random at once (seeded, so reproducible)."""
        rng = random.Random(seed)

        def random_policy(messages: Messages) -> ChatMessage:
            return self.random_reply(messages, rng)

        return random_policy

    def render_state(self, state: State) -> str:
        """The task, the tools called so far and the answer, as text (Gym render, reports)."""
        lines = [task_text(state.get("prompt") or [])]
        called = state.get("tools_called") or []
        lines.append(f"Tool calls: {len(called)}" + (f" ({', '.join(called)})" if called else ""))
        answer = self.final_answer(state.get("completion") or [])
        lines.append(f"Answer: {answer if answer is not None else '(none yet)'}")
        if state.get("invalid_moves"):
            lines.append(f"Invalid moves: {state['invalid_moves']}")
        return "\n".join(lines)
