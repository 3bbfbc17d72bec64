"""What every game in the catalogue shares: moves, invalid-move accounting, rubric.

A game is a `TextGame` subclass that says how to start a game from a dataset
row, how to read a move, how to apply it and when the game is over. Everything
else — the turn loop, feedback on bad moves, the episodic reward and metrics,
random and reference policies — comes from here, so each game file holds only
its rules.

Items are pure functions of `(seed, index)` and the difficulty settings, so a
dataset of any size reproduces exactly.
"""

from __future__ import annotations

import functools
import inspect
import random
import re
import unicodedata
from abc import abstractmethod
from collections.abc import Callable, Collection
from time import perf_counter
from typing import Any, ClassVar

from vfgym.envs.multiturn_env import MultiTurnEnv
from vfgym.errors import InvalidMove
from vfgym.rubrics import REWARD_ERRORS, Rubric
from vfgym.rubrics.rubric import add_scoring_time
from vfgym.types import ChatMessage, Messages, RewardFunc, State

MOVE_TAG = re.compile(r"<move>(.*?)</move>", re.DOTALL | re.IGNORECASE)
#: The usual reply, exactly one lowercase tag pair with no "<" inside, whose last
#: `MOVE_TAG` match is the text between the tags: read with one match, not a search.
_ONE_MOVE_TAG = re.compile(r"<move>([^<]*)</move>\Z").match

#: Dataset indices of the evaluation split start here, so it never overlaps training.
EVAL_OFFSET = 1_000_000


def item_rng(name: str, seed: int, index: int) -> random.Random:
    """The random generator of one dataset item: a pure function of (game, seed, index)."""
    return random.Random(f"{name}:{seed}:{index}")


def extract_move(text: str) -> tuple[str, bool]:
    """The move in a reply and whether it was tagged: the last `<move>…</move>`, else the
    text. An empty tag pair gives no move and counts as untagged (see `format_reward`)."""
    tagged = MOVE_TAG.findall(text or "")
    if tagged:
        move = tagged[-1].strip()
        return move, bool(move)
    return (text or "").strip(), False


#: The most digits a number in a move may have. Boards, heaps and guesses need far
#: fewer, and `int()` refuses more than 4,300 (it raises ValueError, not InvalidMove).
MOVE_NUMBER_DIGITS = 12


def shown_number(digits: str) -> str:
    """A number as feedback quotes it: a long one cut short, with its length."""
    if len(digits) <= MOVE_NUMBER_DIGITS:
        return digits
    return f"{digits[:MOVE_NUMBER_DIGITS]}… ({len(digits)} digits)"


def counted(n: int, one: str, many: str) -> str:
    """`n` with its noun in the right number, "1 guess" or "3 guesses": feedback quotes
    counts of one too."""
    return f"{n} {one if n == 1 else many}"


def ascii_digits(text: str) -> str:
    """`text` with each decimal digit of another script (fullwidth, Arabic-Indic) as 0-9.

    The games that read numbers with `\\d` and `int()` take such digits as they are; a
    game that matches only 1-3 reads its move again through this, once the move failed,
    so that every game reads a fullwidth 2 as 2 and a plain move costs nothing more.
    """
    return "".join(str(unicodedata.decimal(ch)) if ch.isdecimal() else ch for ch in text)


def move_number(digits: str) -> int:
    """The int of the digits a move's pattern matched; more digits than any game
    needs is an invalid move, so a model's 5,000-digit number cannot crash the game."""
    if len(digits) > MOVE_NUMBER_DIGITS:
        raise InvalidMove(f"{shown_number(digits)} is far too large a number for this game.")
    return int(digits)


def move_message(move: str) -> ChatMessage:
    """An assistant turn that plays `move` in the catalogue's move format."""
    return {"role": "assistant", "content": f"<move>{move}</move>"}


#: Why an empty move is refused.
_NO_MOVE = "the reply holds no move; answer with <move>YOUR MOVE</move>"


@functools.lru_cache(maxsize=64)
def _invalid_tail(left: int) -> str:
    """What an invalid move's feedback says about the invalid moves still allowed."""
    if left > 0:
        if left == 1:
            return "1 more invalid move ends the game."
        return f"{left} more invalid moves end the game."
    return "That was the last invalid move allowed: the game is over."


def last_user_text(messages: Messages) -> str:
    """The latest environment message: what a policy reads the position from."""
    if isinstance(messages, str):
        return messages
    for message in reversed(messages):
        if message.get("role") in ("user", "tool"):
            return message.get("content") or ""
    return ""


class TextGame(MultiTurnEnv):
    """A turn-based text game; the subclass supplies the rules.

    State: `state["game_state"]` (the subclass's dict), `state["invalid_moves"]`,
    `state["tagged_moves"]`. A configurable number of invalid moves ends the game
    as a loss. All hooks are plain sync code, so the Gym adapter steps a game
    without an event loop.
    """

    #: The registry name, e.g. "wordle".
    game_name: ClassVar[str] = ""

    def __init__(self, *, max_invalid_moves: int = 3, rubric: Rubric | None = None, **kwargs: Any):
        check_whole("max_invalid_moves", max_invalid_moves, example=3)
        if max_invalid_moves < 1:
            raise ValueError("max_invalid_moves must be at least 1")
        self.max_invalid_moves = max_invalid_moves
        _refuse_async_rules(type(self))
        self._own_invalid_rule = (
            type(self).lost_on_invalid_moves is not TextGame.lost_on_invalid_moves
        )
        self._starts_turns = type(self).start_turn is not TextGame.start_turn
        super().__init__(rubric=rubric or self.build_rubric(), **kwargs)
        # The fused turn below inlines `advance_sync` with `is_completed` (and the
        # invalid-move rule in it) and `env_response`: a game that redefines one, or
        # the loop's limits, gets the engine's turn.
        self._fused_turn = (
            self.message_type == "chat"
            and all(
                getattr(type(self), name) is getattr(TextGame, name)
                for name in ("is_completed", "env_response", "advance_sync", "text_turn_sync")
            )
            and not self._own_invalid_rule
            and type(self).record_model_turn is MultiTurnEnv.record_model_turn
            and self._default_context
            and self._default_max_turns
        )

    # ------------------------------------------------------ the rules (abstract)

    @abstractmethod
    def new_game(self, info: dict[str, Any]) -> dict[str, Any]:
        """The initial game state for a dataset row's `info` (must not mutate `info`)."""

    @abstractmethod
    def apply_move(self, game: dict[str, Any], move: str) -> str:
        """Play `move` (opponent reply included) and return the feedback text.

        `move` is the text of the model's move with surrounding whitespace stripped.
        Raise `InvalidMove` with a message saying what was wrong and what a valid
        move looks like; the game state must then be left unchanged.
        """

    @abstractmethod
    def is_over(self, game: dict[str, Any]) -> bool:
        """True once the game has ended (won, lost or drawn)."""

    @abstractmethod
    def score(self, game: dict[str, Any]) -> float:
        """The episodic reward of a finished game: 1 win, 0.5 draw, 0 loss (or a fraction)."""

    @abstractmethod
    def render(self, game: dict[str, Any]) -> str:
        """The position as text, for `render()` and reports."""

    @abstractmethod
    def reference_policy(self, messages: Messages) -> ChatMessage:
        """A strong player that reads only the conversation, never the hidden State."""

    @abstractmethod
    def random_move(self, messages: Messages, rng: random.Random) -> str:
        """A random legal-looking move, for the random baseline policy."""

    def start_turn(self, game: dict[str, Any]) -> None:
        """Reset what describes the last turn alone (a count a `step_reward` reads)
        before the model's move is read, so an invalid move leaves it at its start
        value. The default keeps no such thing."""

    def efficiency(self, game: dict[str, Any], state: State) -> float:
        """How economically the game was played, in [0, 1]; games refine this."""
        return 1.0 / max(1, state.get("turn", 1))

    # --------------------------------------------------------------- the loop

    def setup_state(self, state: State, **kwargs: Any) -> State:
        state["game_state"] = self.new_game(state["info"])
        state["invalid_moves"] = 0
        state["tagged_moves"] = 0
        return state

    def is_completed(self, messages: Messages, state: State, **kwargs: Any) -> bool:
        # `lost_on_invalid_moves` inlined unless a subclass redefines it: the turn loop
        # asks twice per move.
        if self._own_invalid_rule:
            return self.is_over(state["game_state"]) or self.lost_on_invalid_moves(state)
        return (
            self.is_over(state["game_state"])
            or state.get("invalid_moves", 0) >= self.max_invalid_moves
        )

    def lost_on_invalid_moves(self, state: State) -> bool:
        return state.get("invalid_moves", 0) >= self.max_invalid_moves

    def text_turn_sync(self, state: State, text: str) -> tuple[Messages, str | None]:
        """The engine's `text_turn_sync` — record the model's `text`, then `advance_sync`
        — in one call with this class's own hooks inlined: a Gym `step()` of a game.

        The same steps and the same State as the engine's (`is_completed`, then the
        move answered as `env_response` would, then `is_completed` and the loop's
        limits), minus what the rules above never use: the context list, built
        twice per turn, the checks for awaitable results, and the calls between. A game
        that redefines a hook it inlines (or the loop's limits) gets the engine's.

        The check before the move runs on the first turn only: recording the model's
        text changes neither the game nor the invalid-move count, so from the second
        turn on it would repeat the check that ended the last turn (and found the
        game going on, or the episode would have ended there).
        """
        if not self._fused_turn:
            return super().text_turn_sync(state, text)
        completion = state["completion"]
        completion.append({"role": "assistant", "content": text})
        turn = state["turn"] = state["turn"] + 1
        game = state["game_state"]
        if turn == 1 and (self.is_over(game) or state["invalid_moves"] >= self.max_invalid_moves):
            return [], self._natural_stop(state, True)
        # `_answer`, inlined for the usual reply (see there): a call costs 3% of a Gym step.
        if (tagged := _ONE_MOVE_TAG(text)) is not None and not self._starts_turns:
            move = tagged[1].strip()
            try:
                if not move:  # (an empty tag pair is no tagged move: see `_answer`)
                    raise InvalidMove(_NO_MOVE)
                state["tagged_moves"] += 1
                feedback = self.apply_move(game, move)
                if type(feedback) is not str:
                    raise self._bad_feedback(feedback)
            except InvalidMove as exc:
                feedback = self._refused(state, exc)
                over = self.is_over(game) or state["invalid_moves"] >= self.max_invalid_moves
            else:  # (a move played leaves the invalid-move count as the last check found it)
                over = self.is_over(game)
        else:
            feedback = self._answer(text, state)
            over = self.is_over(game) or state["invalid_moves"] >= self.max_invalid_moves
        reply = {"role": "user", "content": feedback}
        completion.append(reply)
        if over:
            return [reply], self._natural_stop(state, True)
        # `_limit_stop`, inlined (the turn limit is the default one: see `_fused_turn`).
        if 0 < self.max_turns <= turn:
            return [reply], "max_turns"
        budget = self.rollout_token_budget
        if budget is not None and state["completion_tokens"] >= budget:
            return [reply], "token_budget"
        return [reply], None

    def env_response(
        self, messages: Messages, state: State, **kwargs: Any
    ) -> tuple[Messages, State]:
        text = messages[-1].get("content") if isinstance(messages, list) else messages
        return [{"role": "user", "content": self._answer(text, state)}], state

    def _answer(self, text: str | None, state: State) -> str:
        """The feedback to the model's turn, whose content is `text`: the move applied,
        or why it was not."""
        if self._starts_turns:
            self.start_turn(state["game_state"])
        # extract_move, inlined: this runs on every move, and the usual reply (one
        # lowercase tag pair) is read with a match rather than a search.
        text = text or ""
        if (one := _ONE_MOVE_TAG(text)) is not None:
            move = one[1].strip()
        elif tagged := MOVE_TAG.findall(text):
            move = tagged[-1].strip()
        else:
            move = text.strip()
            one = tagged = None
        # A tagged move counts for `format_reward` when the tags hold one: an empty pair
        # follows the format no more than an untagged reply does.
        if move and (one is not None or tagged):
            state["tagged_moves"] += 1
        try:
            if not move:
                raise InvalidMove(_NO_MOVE)
            feedback = self.apply_move(state["game_state"], move)
        except InvalidMove as exc:
            return self._refused(state, exc)
        if type(feedback) is not str:
            raise self._bad_feedback(feedback)
        return feedback

    def _bad_feedback(self, feedback: Any) -> TypeError:
        """The error for an `apply_move` that returned no text: the player would read
        "None" (or the next request would fail at the model server)."""
        return TypeError(
            f"{type(self).__name__}.apply_move must return the feedback text (a str) the "
            f"player reads after its move, got {type(feedback).__name__}: {feedback!r:.60}; "
            "end it with `return feedback`, or raise InvalidMove for a refused move"
        )

    def _refused(self, state: State, exc: InvalidMove) -> str:
        """Count an invalid move and say why it was refused and how many are left
        (after a full stop, so a reason ending in a number does not run into the count)."""
        state["invalid_moves"] += 1
        left = self.max_invalid_moves - state["invalid_moves"]
        reason = str(exc)
        if not reason.endswith((".", "!", "?")):
            reason += "."
        return f"Invalid move: {reason} {_invalid_tail(left)}"

    def render_state(self, state: State) -> str:
        """Text rendering of the episode's position (used by the Gym adapter's render)."""
        return self.render(state["game_state"])

    # ---------------------------------------------------------------- policies

    def make_random_policy(self, seed: int = 0) -> Callable[[Messages], ChatMessage]:
        """A baseline that plays random moves (seeded, so reproducible)."""
        rng = random.Random(seed)

        def random_policy(messages: Messages) -> ChatMessage:
            return move_message(self.random_move(messages, rng))

        return random_policy

    # ------------------------------------------------------------------ rubric

    def build_rubric(self) -> Rubric:
        """Episodic reward plus metrics (weight 0): turns, invalid moves, efficiency, format."""
        game = self

        def win(state: State) -> float:
            # (a game still going, the usual end under a turn limit, needs one call)
            if not game.is_over(state["game_state"]) or game.lost_on_invalid_moves(state):
                return 0.0
            return float(game.score(state["game_state"]))

        def turns(state: State) -> float:
            return float(state.get("turn", 0))

        def invalid_moves(state: State) -> float:
            return float(state.get("invalid_moves", 0))

        def efficiency(state: State) -> float:
            if win(state) <= 0:
                return 0.0
            return float(game.efficiency(state["game_state"], state))

        def format_reward(state: State) -> float:
            return state.get("tagged_moves", 0) / max(1, state.get("turn", 0))

        return GameRubric(self, [win, turns, invalid_moves, efficiency, format_reward])


class GameRubric(Rubric):
    """The catalogue's rubric: the reward of a won game, and four metrics.

    Its five functions are ordinary reward functions, scored as any rubric's are. A
    Gym episode's end, though, is scored in one pass over the State
    (`score_state_sync`) while the functions and weights are the ones built here:
    five calls, each checked on its own, cost a game's Gym step about a twentieth of
    its time. Anything unusual (a value that is not finite, a method that raises,
    changed functions or weights) is scored by the functions themselves, so the
    result and the errors recorded are always theirs.
    """

    #: The win counts; the four metrics are reported with weight 0.
    WEIGHTS = (1.0, 0.0, 0.0, 0.0, 0.0)

    def __init__(self, game: TextGame, funcs: list[RewardFunc]) -> None:
        super().__init__(funcs=funcs, weights=list(self.WEIGHTS))
        self._game = game
        self._built = list(funcs), list(self.WEIGHTS)

    def score_state_sync(self, state: State) -> tuple[float, dict[str, float]]:
        started = perf_counter()
        funcs, weights = self._built
        if self.reward_funcs != funcs or self.reward_weights != weights:
            return super().score_state_sync(state)
        game = self._game
        try:
            board = state["game_state"]
            win = efficiency = 0.0
            if game.is_over(board) and not game.lost_on_invalid_moves(state):
                win = float(game.score(board))
                if win > 0:
                    efficiency = float(game.efficiency(board, state))
            turn = state.get("turn", 0)
            tagged = state.get("tagged_moves", 0) / max(1, turn)
            turns, invalid = float(turn), float(state.get("invalid_moves", 0))
        except Exception:
            return super().score_state_sync(state)
        # A finite x times 0.0 is 0.0; NaN and the infinities give NaN.
        if (win + efficiency) * 0.0 != 0.0 or type(tagged) is not float:
            return super().score_state_sync(state)
        metrics = {
            "win": win,
            "turns": turns,
            "invalid_moves": invalid,
            "efficiency": efficiency,
            "format_reward": tagged,
            REWARD_ERRORS: 0.0,
        }
        # `add_scoring_time`, inlined for the State's own timing dict.
        elapsed = (perf_counter() - started) * 1000.0
        timing = state.get("timing")
        if type(timing) is dict:
            timing["scoring_ms"] = elapsed
            timing["total_ms"] = timing.get("total_ms", 0.0) + elapsed
        else:
            add_scoring_time(state, elapsed)
        # The weighted sum in the functions' order: 0.0 + win * 1.0, and each metric
        # times 0.0 adds nothing to a finite sum.
        return 0.0 + win, metrics


#: The rules a subclass supplies, all called as plain functions by the turn loop.
_RULES = (
    "new_game",
    "apply_move",
    "is_over",
    "score",
    "render",
    "start_turn",
    "efficiency",
    "lost_on_invalid_moves",
)


def _refuse_async_rules(cls: type[TextGame]) -> None:
    """Refuse a rule written as `async def`: its call returns a coroutine, which is
    truthy (an `is_over` ends every game at once, scored as won) or becomes the text
    the player reads, with no error. A game's rules are plain sync code."""
    for name in _RULES:
        rule = getattr(cls, name, None)
        if inspect.iscoroutinefunction(rule) or inspect.isasyncgenfunction(rule):
            raise TypeError(
                f"{cls.__name__}.{name} is async: a TextGame's rules are called as plain "
                f"functions, so write it with plain `def`. For work that must wait (a "
                "sandbox, an HTTP judge), subclass vf.MultiTurnEnv, whose hooks may be async"
            )


def check_whole(knob: str, value: Any, example: int) -> None:
    """Refuse a count knob that is not an int. A float, a bool or a str slips past a
    range check (2.5 is between 1 and 9; True is 1) and then fails far from the knob,
    shows up in the feedback ("0.5 more invalid moves") or, as a search depth that never
    reaches 0, never ends. Ranges are each game's own check, after this one."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{knob} must be a whole number (int) such as {example}, not {value!r}")


def check_flag(knob: str, value: Any) -> None:
    """Refuse a yes/no knob that is not a bool: "false" is a true value, and a game would
    quietly play the rule the caller meant to turn off."""
    if not isinstance(value, bool):
        raise TypeError(f"{knob} must be True or False, not {value!r}")


def check_choice(knob: str, value: Any, choices: Collection[Any]) -> None:
    """Refuse a knob value outside its choices, naming them (in their own order)."""
    if value not in choices:
        options = sorted(choices) if isinstance(choices, set | frozenset) else list(choices)
        raise ValueError(f"{knob} must be one of {options}, not {value!r}")


def game_rows(
    name: str,
    generate: Callable[[random.Random, int], tuple[str, dict[str, Any], str]],
    num_examples: int,
    seed: int,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """Dataset rows from a generator `(rng, index) -> (question, info, answer)`.

    Each item gets its own generator seeded by (game, seed, index), so item k is
    the same whatever `num_examples` is.
    """
    check_whole("num_examples", num_examples, example=100)
    # Items are seeded by the text of (game, seed, index): "0", 0.0 or True would each
    # quietly give another dataset than seed 0's.
    check_whole("seed", seed, example=0)
    if num_examples < 1:
        raise ValueError("num_examples must be at least 1")
    if num_examples > EVAL_OFFSET:
        # Training rows are indices 0.., evaluation rows EVAL_OFFSET..: more would overlap.
        raise ValueError(
            f"num_examples must be at most {EVAL_OFFSET:,}, not {num_examples:,}: the "
            f"evaluation split starts at index {EVAL_OFFSET:,}, and a larger training "
            "split would share items with it"
        )
    rows = []
    for i in range(offset, offset + num_examples):
        question, info, answer = generate(item_rng(name, seed, i), i)
        rows.append(
            {"question": question, "info": {**info, "seed": seed, "index": i}, "answer": answer}
        )
    return rows
