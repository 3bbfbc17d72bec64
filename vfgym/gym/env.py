"""`GymEnv`: any vfgym `MultiTurnEnv` as a `gymnasium.Env`.

The adapter walks the rollout engine's turn loop from outside: `reset()` builds
the State the way a rollout does (`init_state`, then `setup_state`); `step(action)`
records the action as the model's turn and lets the environment answer
(`advance`); when the episode ends it marks how (`finish`), releases what the
episode held (`cleanup_state`) and scores it with the rubric.

How hooks are driven: when every hook is plain computation (`env.hooks_are_sync`,
true for the built-in games) `reset()` and `step()` are plain sync code — the
engine's `text_turn_sync` for a text action (the model's turn recorded and
answered in one call, which a game fuses), `advance_sync` after any other, and the
rubric's `score_rollout_sync` when its reward functions are sync — with no event
loop and no coroutine at all. Otherwise sync
`step()` runs the hooks on a private event loop, or — when called inside a running
loop, as in a notebook — on a fresh loop in a helper thread; asyncio code should
`await env.astep(...)` instead.

Hooks an environment may define for the adapter (all optional):

- `render_state(state) -> str`: the board or position, shown by `render()`.
- `step_reward(state) -> float`: a reward for the transition just made, called
  after every step when `GymEnv(..., per_step_reward=True)`; the episodic reward
  is added to it on the last step.
"""

from __future__ import annotations

import asyncio
import copy
import json
import random
import sys
from collections.abc import Callable, Coroutine, Mapping
from operator import attrgetter, itemgetter
from typing import Any, Literal, TypeVar

import gymnasium as gym
import numpy as np

from vfgym.engine._async import (
    call_inline,
    close_loop,
    is_async_callable,
    maybe_await,
    new_private_loop,
    run_on,
    settle_inline,
)
from vfgym.engine.data import fresh_copy
from vfgym.engine.state import fill_state_defaults, new_state
from vfgym.envs.environment import Environment
from vfgym.envs.multiturn_env import TRUNCATING, MultiTurnEnv
from vfgym.errors import SyncScoringUnavailable, error_record
from vfgym.gym.actions import model_turn
from vfgym.gym.shipping import (
    Conversation,
    Outbox,
    in_vector_worker,
    new_outbox,
    use_delta_shipping,
)
from vfgym.gym.spaces import DEFAULT_MAX_TEXT_LENGTH, MessagesSpace, ModelTurnSpace, UnicodeText
from vfgym.gym.state_view import StateView
from vfgym.gym.text import (
    FORBIDDEN,
    clean_strings,
    clean_text,
    content_text,
    conversation_text,
    fit_text,
    observation_text,
)
from vfgym.rubrics.reward_call import to_reward
from vfgym.rubrics.rubric import Rubric, rollout_args
from vfgym.types import ChatMessage, Messages, State

T = TypeVar("T")
ObservationMode = Literal["text", "messages"]
Observation = str | list[ChatMessage]
Action = str | ChatMessage

#: How many prompts' observation texts a GymEnv remembers (see `_observe_prompt`).
PROMPT_TEXTS_KEPT = 4096

#: How many dataset rows a GymEnv keeps read (see `_row_args`).
ROWS_KEPT = 4096

#: A message's content, read in C (`_observe_prompt`).
_CONTENT = itemgetter("content")

#: Keys `reset(options=...)` understands.
RESET_OPTIONS = frozenset({"index"})


def _made_with(name: str) -> property:
    """A setting of `GymEnv.__init__` that reads back but cannot be assigned later.

    The spaces and the step path are built from it when the env is made, so a new
    value assigned afterwards (`env.unwrapped.per_step_reward = True`, or a vector
    env's `set_attr`) would be silently ignored, or half applied; the error says how
    to get an env with that setting instead. Reads go through `attrgetter` (C code).
    """

    def refuse(self: GymEnv, value: Any) -> None:
        raise AttributeError(
            f"GymEnv.{name} is fixed when the env is made (its spaces and step path are "
            f"built from it), so it cannot be set afterwards; make a new env with it: "
            f"gym.make(id, {name}={value!r}) or GymEnv(env, {name}={value!r})"
        )

    return property(attrgetter(f"_{name}"), refuse, doc=f"`{name}` as the env was made with.")


class GymEnv(gym.Env[Observation, Action]):
    """A `gymnasium.Env` over a vfgym `MultiTurnEnv` (and so `SingleTurnEnv`, `ToolEnv`).

    Args:
        env: the vfgym environment.
        observation_mode: "text" (default) gives each observation as one string —
            at reset the prompt's message contents joined by a blank line, after a
            step the environment's new messages joined the same way. "messages"
            gives the message dicts themselves.
        per_step_reward: reward every step with the environment's
            `step_reward(state)` hook (the episodic reward is added at the end).
            Off by default: the reward is 0.0 until the last step, which carries
            the rubric's episodic reward.
        render_mode: None, "ansi" (render returns the transcript) or "human"
            (render prints it).
        dataset: which rows reset draws from: "eval" (the evaluation rows, or
            the training rows when there are none) or "train".
        max_text_length: the bound of the text spaces; longer observation text is
            cut with a note (the full messages stay in `info["messages"]`).
        count_tokens: how many tokens a model's turn took, given its text (e.g.
            `lambda text: len(tokenizer.encode(text))`); each step adds it to
            `state["completion_tokens"]`, which the environment's
            `rollout_token_budget` limits. A rollout counts the server's usage
            figures; an action carries none, so without this the budget is not
            enforced (a warning says so when the environment sets one).

    `info` holds `state` (a read-only `StateView` of the episode's State, with
    `game_state` and `tools_called` when the environment keeps them), `messages`
    (the whole conversation so far: a new list of the State's own message dicts, so
    read them, do not modify them) and `turn`; the last step adds `stop_reason`,
    `episode_reward` and the rubric's `metrics`. The live State is `env.state`.
    A training loop that cuts an episode short by a limit of its own can end it with
    `truncate()`, which scores it (Gymnasium's `TimeLimit` does not tell the env).
    In an async vector env the view reaches the main process as a delta each step
    (the new messages and the small entries, never the whole conversation again;
    see `vfgym.gym.shipping`), rebuilt there into the same State.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi", "human"], "render_fps": 4}

    # Slots rather than the instance dict: from 30 keys on, CPython stops sharing an
    # instance dict's keys and every attribute read takes a slower path, and a step
    # reads a dozen of these. (`gym.Env`'s own attributes, `spec` and the random
    # generator, stay in the dict, as does anything a subclass adds.)
    __slots__ = (
        "_async_cleanup",
        "_busy",
        "_chat",
        "_cleaned",
        "_closed",
        "_count_tokens",
        "_default_cleanup",
        "_default_finish",
        "_default_init",
        "_default_setup",
        "_done",
        "_episode_loop",
        "_episodes",
        "_human",
        "_inline",
        "_loop",
        "_max_text_length",
        "_observation_mode",
        "_outbox",
        "_per_step_reward",
        "_plain_reset",
        "_plain_text",
        "_prompt_texts",
        "_render_mode",
        "_row_cache",
        "_row_rng",
        "_row_rng_source",
        "_ship",
        "_state",
        "_step_reward",
        "_text_turn",
        "_view",
        "action_space",
        "environment",
        "observation_space",
        "owns_environment",
        "rows",
    )

    def __init__(
        self,
        env: MultiTurnEnv,
        *,
        observation_mode: ObservationMode = "text",
        per_step_reward: bool = False,
        render_mode: str | None = None,
        dataset: Literal["eval", "train"] = "eval",
        max_text_length: int = DEFAULT_MAX_TEXT_LENGTH,
        count_tokens: Callable[[str], int] | None = None,
        owns_environment: bool = False,
    ) -> None:
        """`owns_environment`: `close()` also releases the environment's resources
        (`aclose()`, e.g. a SandboxEnv's containers); `gym.make` sets it, since the
        environment it builds belongs to this Gym env alone.
        """
        if not isinstance(env, MultiTurnEnv):
            raise TypeError(
                f"GymEnv wraps a vfgym MultiTurnEnv (or SingleTurnEnv, ToolEnv), not "
                f"{type(env).__name__}; build one with vfgym.load_environment(name)"
            )
        if observation_mode not in ("text", "messages"):
            raise ValueError(
                f"observation_mode must be 'text' or 'messages', not {observation_mode!r}"
            )
        if observation_mode == "messages" and env.message_type != "chat":
            raise ValueError(
                "observation_mode='messages' needs a chat environment; this one uses "
                "message_type='completion', so use observation_mode='text'"
            )
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None, 'ansi' or 'human', not {render_mode!r}")
        if dataset not in ("eval", "train"):
            raise ValueError(f"dataset must be 'eval' or 'train', not {dataset!r}")
        if isinstance(max_text_length, bool) or not isinstance(max_text_length, int):
            raise TypeError(f"max_text_length must be an int, not {max_text_length!r}")
        if max_text_length < 1:
            raise ValueError(f"max_text_length must be at least 1, not {max_text_length}")
        _check_token_counter(count_tokens)
        if count_tokens is None and env.rollout_token_budget is not None:
            gym.logger.warn(
                f"{type(env).__name__} has rollout_token_budget={env.rollout_token_budget}, "
                "but a Gym action carries no token count: pass GymEnv(..., count_tokens="
                "lambda text: len(tokenizer.encode(text))) (gym.make takes it too) to "
                "enforce the budget; max_turns still applies"
            )
        if isinstance(per_step_reward, np.bool_):
            per_step_reward = bool(per_step_reward)
        if not isinstance(per_step_reward, bool):  # "no" would turn it on
            raise TypeError(f"per_step_reward must be True or False, not {per_step_reward!r}")
        step_reward = getattr(env, "step_reward", None)
        if per_step_reward and not callable(step_reward):
            raise ValueError(
                f"per_step_reward=True needs the environment to define step_reward(state) -> "
                f"float, and {type(env).__name__} does not; leave per_step_reward off to get "
                "the episodic reward at the end"
            )
        rows = env.get_dataset() if dataset == "train" else env.get_eval_dataset()
        if not rows:
            raise ValueError(f"{type(env).__name__} has no {dataset} rows to start episodes from")

        self.environment = env
        self.owns_environment = owns_environment
        # Read-only (see `_made_with`): the spaces and the step path are built from them.
        self._observation_mode: ObservationMode = observation_mode
        self._per_step_reward = per_step_reward
        self._render_mode = render_mode
        self._max_text_length = max_text_length
        self._count_tokens = count_tokens
        self.rows = rows
        self.observation_space = (
            UnicodeText(max_text_length)
            if observation_mode == "text"
            else MessagesSpace(max_text_length)
        )
        self.action_space = ModelTurnSpace(max_text_length, chat=env.message_type == "chat")

        self._chat = env.message_type == "chat"
        self._step_reward: Callable[[State], Any] | None = step_reward if per_step_reward else None
        # Plain sync steps need every hook they call to be sync, `step_reward` included.
        self._inline = env.hooks_are_sync and not (
            self._step_reward is not None
            and is_async_callable(self._step_reward)
            and not getattr(self._step_reward, "__vfgym_inline__", False)
        )
        self._text_turn = env.text_turn_sync
        # Hooks left at MultiTurnEnv's defaults do nothing: the sync path skips them.
        self._default_setup = type(env).setup_state is MultiTurnEnv.setup_state
        self._default_cleanup = type(env).cleanup_state is MultiTurnEnv.cleanup_state
        self._default_finish = type(env).finish is MultiTurnEnv.finish
        # Only an async cleanup can need the loop its episode opened things on.
        self._async_cleanup = (
            not self._default_cleanup
            and is_async_callable(env.cleanup_state)
            and not getattr(type(env).cleanup_state, "__vfgym_inline__", False)
        )
        self._default_init = (
            type(env).init_state is Environment.init_state
            and type(env).init_completion is Environment.init_completion
            and self._chat
        )
        self._human = render_mode == "human"
        self._episode_loop: asyncio.AbstractEventLoop | None = None
        self._state: State | None = None
        self._view: StateView | None = None
        self._done = True
        self._cleaned = True
        self._busy = False
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        # In a vector env's worker, views cross the pipe as deltas (see vfgym.gym.shipping).
        self._ship = in_vector_worker()
        if self._ship:
            use_delta_shipping()
        self._plain_text = self._steps_plain_text()
        # The same for `reset`, whose shortest way needs the default initial State too.
        self._plain_reset = (
            self._inline
            and self._default_init
            and observation_mode == "text"
            and not self._human
            and not self._ship
        )
        self._outbox: Outbox | None = None
        self._prompt_texts: dict[tuple[Any, ...], Observation] = {}
        self._row_cache: dict[int, _Row] = {}
        # Rows are drawn by a Python generator seeded from `np_random` (see `_drawn_row`).
        self._row_rng: random.Random | None = None
        self._row_rng_source: np.random.Generator | None = None
        self._episodes = 0

    observation_mode = _made_with("observation_mode")
    per_step_reward = _made_with("per_step_reward")
    render_mode = _made_with("render_mode")  # type: ignore[assignment]
    max_text_length = _made_with("max_text_length")

    @property
    def count_tokens(self) -> Callable[[str], int] | None:
        """How many tokens a model's turn took, given its text (see the class doc)."""
        return self._count_tokens

    @count_tokens.setter
    def count_tokens(self, count_tokens: Callable[[str], int] | None) -> None:
        _check_token_counter(count_tokens)
        self._count_tokens = count_tokens
        self._plain_text = self._steps_plain_text()

    # --------------------------------------------------------------- public

    @property
    def state(self) -> State | None:
        """The live State of the current (or last) episode; None before the first reset."""
        return self._state

    @property
    def episode_over(self) -> bool:
        """True before the first reset and once the episode has ended."""
        return self._done

    @property
    def needs_loop(self) -> bool:
        """True when an episode may wait on I/O: a hook of the environment, the rubric's
        scoring or `step_reward` is async. A vector env overlaps such envs on one event
        loop; the others (every built-in game) have nothing to overlap and step inline."""
        if not self._inline:
            return True
        can_score_sync = getattr(self.environment.rubric, "can_score_sync", None)
        return not (callable(can_score_sync) and can_score_sync())

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """Start an episode: draw a row (from `np_random`, or `options["index"]`)."""
        if self._busy:
            self._claim("reset")  # raises, before the seed changes anything
        self._busy = True
        try:
            if not self._inline:  # its hooks will run on the env's own loop
                self._check_next_episode_loop(self._loop, "reset")
            # Options are checked before the seed changes anything.
            index = None if options is None else self._chosen_row(options)
            if seed is not None:  # all that gym.Env.reset does
                super().reset(seed=seed)
            if index is None:
                rng = self._row_rng
                if rng is not None and self._np_random is self._row_rng_source:
                    index = int(rng.random() * len(self.rows))  # `_drawn_row`'s usual draw
                else:
                    index = self._drawn_row()
            if self._plain_reset:
                return self._reset_plain(index)
            if not self._inline:
                return self._drive_loop(self._reset(index))
            return self._reset_sync(index)
        finally:
            self._busy = False

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """`reset` for asyncio code: the environment's hooks run on the caller's loop."""
        self._claim("areset")  # before the seed changes anything
        try:
            if not self._inline:
                self._check_next_episode_loop(asyncio.get_running_loop(), "areset")
            index = None if options is None else self._chosen_row(options)
            super().reset(seed=seed)
            if index is None:
                index = self._drawn_row()
            return await self._reset(index)
        finally:
            self._busy = False

    def step(self, action: Action) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        """Play the model's turn `action` (text, or an assistant message dict)."""
        if not (self._plain_text and type(action) is str):
            return self._step_sync(action)
        # The usual step, a game's: a text action, answered by a one-line reply in one
        # engine call (`text_turn_sync`, which a game fuses), and nothing else asked for
        # (see `_steps_plain_text`). `_step_sync` is the same step with every option.
        if self._busy or self._done:  # (also before the first reset)
            self._refuse_step()
        state: State = self._state  # type: ignore[assignment]
        self._busy = True
        try:
            try:
                env_messages, stop = self._text_turn(state, action)
            except BaseException as exc:
                self._failed(state, exc)
                self._cleanup_sync(state)
                raise
            # `_observe` (`observation_text`'s first case) and `_info`, inlined: the
            # usual answer is one message, whose text is the observation as it is.
            try:
                [reply] = env_messages
                observation = reply["content"]
            except (ValueError, TypeError, KeyError):
                observation = None
            if not (
                type(observation) is str
                and len(observation) <= self._max_text_length
                and (observation.isprintable() or FORBIDDEN.search(observation) is None)
            ):
                observation = self._observe(env_messages)
            info = {
                "state": self._view,
                "messages": state["prompt"] + state["completion"],
                "turn": state["turn"],
            }
            if stop is None:
                return observation, 0.0, False, False, info
            return self._end_sync(state, stop, observation, 0.0, info)
        finally:
            self._busy = False

    async def astep(self, action: Action) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        """`step` for asyncio code: the environment's hooks run on the caller's loop."""
        message = self._model_turn(action)
        self._claim("astep")
        try:
            return await self._step(message, sync_scoring=False)
        finally:
            self._busy = False

    def truncate(self, stop_reason: str = "max_turns") -> tuple[float, dict[str, float]]:
        """End the running episode from outside, for a step limit kept outside the env,
        and return its `(episode_reward, metrics)`.

        Without this, an episode cut short by such a limit would never be scored: the
        env only scores episodes that end within it. The State records `stop_reason`
        (one of the truncating ones), the cleanup runs and the rubric scores the
        episode as it stands; the caller adds the reward to the truncating step.
        """
        self._claim("truncate")
        try:
            if not self._inline:
                return self._drive_loop(self._truncate(stop_reason, sync_scoring=True))
            state = self._truncating(stop_reason)
            self._cleanup_sync(state)
            reward, metrics = self._score_here(state)
            return reward, dict(metrics)
        finally:
            self._busy = False

    async def atruncate(self, stop_reason: str = "max_turns") -> tuple[float, dict[str, float]]:
        """`truncate` for asyncio code: the cleanup and the scoring run on the caller's loop."""
        self._claim("atruncate")
        try:
            return await self._truncate(stop_reason, sync_scoring=False)
        finally:
            self._busy = False

    def render(self) -> str | None:
        """ "ansi": the conversation so far and, for games with `render_state`, the board.

        "human": as Gymnasium's human mode does, `reset` and `step` already print as
        they go (the prompt; then each turn: the model's move, the environment's reply,
        the board), so an episode's output grows with its length, not its square, and
        `render()` has nothing left to print: it returns None.
        """
        if self.render_mode is None:
            gym.logger.warn(
                "render() was called without a render_mode; make the env with "
                "render_mode='ansi' (returns text) or 'human' (prints it)"
            )
            return None
        if self.render_mode == "human":
            return None
        return self._render_text()

    def close(self) -> None:
        """End the running episode (its cleanup runs) and release the private event loop.

        An episode whose async cleanup releases what its hooks opened on an event loop
        (one driven with `areset`/`astep`) ends on that loop: an idle one runs the
        cleanup first; one running (in this thread, as in a notebook, or another) cannot
        be entered from here, so close() is refused, saying to `await env.aclose()`
        there. A close that raised (interrupted, refused, or the environment's release
        failed) can be called again."""
        if self._closed:
            return
        if self._busy:
            self._claim("close")  # raises
        self._end_where_held(self._loop, "close")
        try:
            if not self._cleaned and self._state is not None:
                if self._inline:
                    self._cleanup_sync(self._state)
                else:
                    self._drive(self._cleanup(self._state), "close")
            release = getattr(self.environment, "aclose", None)
            if self.owns_environment and callable(release):  # (sync or async, as in aclose)
                self._drive(maybe_await(release), "close")
        finally:
            self._done = True
            self._close_loop()
        self._closed = True

    async def aclose(self) -> None:
        """`close` for asyncio code: the running episode's cleanup and the environment's
        release (`aclose()`, when this env owns it) run on the caller's loop, where
        resources the episode opened there belong. An episode another loop holds (one
        started with `reset()`, or `areset()` elsewhere) ends there first, as in
        `close()`."""
        if self._closed:
            return
        if self._busy:
            self._claim("aclose")  # raises
        self._end_where_held(asyncio.get_running_loop(), "aclose")
        self._claim("aclose")
        try:
            if not self._cleaned and self._state is not None:
                await self._cleanup(self._state)
            release = getattr(self.environment, "aclose", None)
            if self.owns_environment and callable(release):
                await maybe_await(release)
        finally:
            self._done = True
            self._busy = False
            self._close_loop()
        self._closed = True  # only now: an interrupted close runs again when retried

    def _end_where_held(
        self, here: asyncio.AbstractEventLoop | None, call: Literal["close", "aclose"]
    ) -> None:
        """End the running episode on the event loop that holds it, when `call` would
        otherwise run its async cleanup on `here`, another loop: only the loop its hooks
        opened things on (a sandbox lease, a client) can give them back. An idle loop runs
        the cleanup now (this thread waits); a running one cannot be entered from here,
        so `call` is refused before anything changes, saying where to end the episode.
        (A closed loop holds nothing any more: the cleanup runs on `here`.)"""
        held = self._holding_loop()
        if held is None or held is here or held.is_closed():
            return
        if held.is_running():
            raise RuntimeError(_unreachable_loop(held, call))
        self._busy = True
        try:
            self._done = True
            run_on(held, self._cleanup(self._state))  # type: ignore[arg-type]
        finally:
            self._busy = False

    def _truncating(self, stop_reason: str) -> State:
        """The running episode, marked as ended by `stop_reason`; raises before anything
        changes when there is no running episode or the reason is not a truncation."""
        if stop_reason not in TRUNCATING:
            raise ValueError(
                f"truncate() ends an episode cut short; stop_reason must be one of "
                f"{sorted(TRUNCATING)}, not {stop_reason!r}"
            )
        state = self._require_running("truncate")
        self.environment.finish(state, stop_reason)
        self._done = True
        return state

    async def _truncate(
        self, stop_reason: str, *, sync_scoring: bool
    ) -> tuple[float, dict[str, float]]:
        if self._state is not None and not self._done:
            self._check_episode_loop("truncate")
        state = self._truncating(stop_reason)
        await self._cleanup(state)
        reward, metrics = await self._ascore(state, sync_scoring=sync_scoring)
        return reward, dict(metrics)

    def _close_loop(self) -> None:
        loop, self._loop = self._loop, None
        close_loop(loop)

    # ------------------------------------------------------------ episode
    #
    # Each piece of an episode comes twice: as a coroutine, for environments whose
    # hooks may wait (run on an event loop), and as plain sync code for those whose
    # hooks never do (`env.hooks_are_sync`), where a loop, or even driving a
    # coroutine, would cost more than a game's move. The two differ only in how the
    # hooks are called; what happens around them lives in the shared helpers below
    # (`_row_args`, `_started`, `_failed`, `_cleanup_failed`, `_last_step`).

    async def _reset(self, index: int) -> tuple[Observation, dict[str, Any]]:
        self._closed = False
        if self._state is not None and not self._cleaned:  # reset in mid-episode
            self._done = True
            await self._cleanup(self._state)
        env = self.environment
        prompt, answer, task, info, example_id = self._row_args(index)
        # What the hooks open (a sandbox session, a client) belongs to this loop.
        self._episode_loop = asyncio.get_running_loop()
        completion = await maybe_await(env.init_completion)
        args = (prompt, completion, answer, task, info, example_id)
        state = await maybe_await(env.init_state, *args)
        state = _with_defaults(state, prompt, completion, answer, task, info, example_id)
        self._state, self._done, self._cleaned = state, False, False
        try:
            # (a sync setup through the environment's offloader, as in its rollouts)
            ready = await env.call_hook(env.setup_state, (state,), {})
        except BaseException as exc:
            self._failed(state, exc)
            await self._cleanup(state)
            raise
        return self._started(state, ready)

    def _reset_sync(self, index: int) -> tuple[Observation, dict[str, Any]]:
        self._closed = False
        if self._state is not None and not self._cleaned:  # reset in mid-episode
            self._done = True
            self._cleanup_sync(self._state)
        env = self.environment
        prompt, answer, task, info, example_id = self._row_args(index)
        self._episode_loop = None  # plain sync hooks: no loop holds anything of it
        if self._default_init:
            state = new_state(prompt, [], answer, task, info, example_id)
        else:
            completion = call_inline(env.init_completion)
            state = call_inline(env.init_state, prompt, completion, answer, task, info, example_id)
            state = _with_defaults(state, prompt, completion, answer, task, info, example_id)
        self._state, self._done, self._cleaned = state, False, False
        ready = None
        if not self._default_setup:
            try:
                ready = env.setup_state(state)
                if hasattr(ready, "__await__"):  # an async hook that never suspends
                    ready = settle_inline(ready)
            except BaseException as exc:
                self._failed(state, exc)
                self._cleanup_sync(state)
                raise
        return self._started(state, ready)

    def _reset_plain(self, index: int) -> tuple[Observation, dict[str, Any]]:
        """`_reset_sync` for the usual env, a game's (see `_plain_reset`), with
        `_row_args`, `_started`, `_observe_prompt` and `_info` inlined: their calls cost
        a game's reset a fifth of its time. The same State and the same result."""
        self._closed = False
        if self._state is not None and not self._cleaned:  # reset in mid-episode
            self._done = True
            self._cleanup_sync(self._state)
        row = self._row_cache.get(index) or self._cached_row(index)
        prompt = list(map(dict, row.prompt)) if row.chat else row.prompt
        info = dict(row.info) if row.flat_info else fresh_copy(row.info)
        state = new_state(prompt, [], row.answer, row.task, info, row.example_id)
        self._episode_loop = None
        self._state, self._done, self._cleaned = state, False, False
        if not self._default_setup:
            try:
                ready = self.environment.setup_state(state)
                if ready is not state and hasattr(ready, "__await__"):
                    ready = settle_inline(ready)
            except BaseException as exc:
                self._failed(state, exc)
                self._cleanup_sync(state)
                raise
            if ready is not None and ready is not state:
                state.update(ready)
        view = self._view = StateView(state)
        prompt = state["prompt"]
        # The observation of the prompt this row showed before, while the episode's is
        # the same (a `setup_state` may rewrite it): comparing the two costs a fifth of
        # looking the texts up.
        shown = row.shown
        if shown is not None and prompt == shown[0]:
            observation = shown[1]
        else:
            observation = self._observe_prompt(prompt)
            if shown is None:  # (a setup that rewrites every prompt: the first stays)
                row.shown = fresh_copy(prompt), observation
        messages = prompt + state["completion"]
        return observation, {"state": view, "messages": messages, "turn": state["turn"]}

    async def _step(
        self, message: ChatMessage | str, *, sync_scoring: bool
    ) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        state = self._require_running()
        self._check_episode_loop()
        env = self.environment
        try:
            if self._count_tokens is not None:
                self._count_turn(state, message)
        except BaseException as exc:
            self._failed(state, exc)
            await self._cleanup(state)
            raise
        env.record_model_turn(state, message)
        try:
            env_messages, stop = await env.advance(state)
            reward = 0.0
            if self._step_reward is not None:
                reward = self._step_reward_value(await maybe_await(self._step_reward, state))
        except BaseException as exc:
            self._failed(state, exc)
            await self._cleanup(state)
            raise
        observation = self._observe(env_messages)
        info = self._info(state)
        if stop is None:
            if self._human:
                self._show_turn(message, env_messages)
            return observation, reward, False, False, info
        env.finish(state, stop)
        self._done = True
        await self._cleanup(state)
        score = await self._ascore(state, sync_scoring=sync_scoring)
        if self._human:
            self._show_turn(message, env_messages)
        return self._last_step(observation, reward, info, stop, score)

    def _end_sync(
        self, state: State, stop: str, observation: Observation, reward: float, info: dict[str, Any]
    ) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        """The end of a sync step that ended the episode: finish, clean up, score.

        Every episode ends here, so the default `finish` and an absent cleanup are
        inlined, and the metrics, a dict made for this call, are not copied."""
        if self._default_finish:
            state["stop_reason"] = stop
            state["is_truncated"] = truncated = stop in TRUNCATING
        else:
            self.environment.finish(state, stop)
            truncated = stop in TRUNCATING
        self._done = True
        if self._default_cleanup:
            self._cleaned = True
        else:
            self._cleanup_sync(state)
        rubric = self.environment.rubric
        if type(rubric).score_rollout_sync is Rubric.score_rollout_sync:
            # `_score_here` and `_score_sync`, inlined for the usual rubric (a game's):
            # two calls cost a game's episode end a tenth of its time.
            try:
                episode_reward, metrics = rubric.score_state_sync(state)
            except SyncScoringUnavailable:
                episode_reward, metrics = self._score_here(state)
            except Exception as exc:
                _scoring_failed(state, exc)
                raise
        else:
            episode_reward, metrics = self._score_here(state)
        info["stop_reason"] = stop
        info["episode_reward"] = episode_reward
        info["metrics"] = metrics
        return observation, reward + episode_reward, not truncated, truncated, info

    def _score_here(self, state: State) -> tuple[float, dict[str, float]]:
        """The finished episode's (reward, metrics), scored in this thread, or on the
        private loop when the rubric has async reward functions."""
        rubric = self.environment.rubric
        try:
            score = _score_sync(rubric, state)
            if score is None:
                verdict = self._drive_loop(rubric.score_rollout(*rollout_args(state)))
                score = verdict.reward, dict(verdict.metrics)
        except Exception as exc:
            _scoring_failed(state, exc)
            raise
        return score

    async def _ascore(self, state: State, *, sync_scoring: bool) -> tuple[float, dict[str, float]]:
        """The finished episode's (reward, metrics) on the running loop; in this thread
        first when `sync_scoring` (a sync caller, whose loop has nothing else to run)."""
        rubric = self.environment.rubric
        try:
            score = _score_sync(rubric, state) if sync_scoring else None
            if score is None:
                verdict = await rubric.score_rollout(*rollout_args(state))
                score = verdict.reward, verdict.metrics
        except Exception as exc:
            _scoring_failed(state, exc)
            raise
        return score

    def _step_sync(self, action: Action) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        """`step` with every option: message actions, a token counter, per-step rewards,
        human rendering, a vector worker's views, hooks that need the event loop."""
        if self._inline and type(action) is str:
            turn, move = self._text_turn, action
        else:
            move = self._model_turn(action)  # raises before anything changes
            if not self._inline:
                return self._drive(self._step(move, sync_scoring=True), "step")
            turn = self._record_and_advance
        if self._busy or self._done:
            self._refuse_step()
        state: State = self._state  # type: ignore[assignment]
        self._busy = True
        try:
            try:
                if self._count_tokens is not None:
                    self._count_turn(state, move)
                env_messages, stop = turn(state, move)
                reward = 0.0
                if self._step_reward is not None:
                    reward = self._step_reward_value(call_inline(self._step_reward, state))
            except BaseException as exc:
                self._failed(state, exc)
                self._cleanup_sync(state)
                raise
            observation = self._observe(env_messages)
            info = self._info(state)
            if stop is None:
                result = observation, reward, False, False, info
            else:
                result = self._end_sync(state, stop, observation, reward, info)
            if self._human:
                self._show_turn(move, env_messages)
            return result
        finally:
            self._busy = False

    def _refuse_step(self) -> None:
        """Raise why a step cannot run now: another reset/step of this env is running,
        or no episode is (`_require_running` says which)."""
        if self._busy:
            self._claim("step")
        self._require_running()

    def _steps_plain_text(self) -> bool:
        """Whether `step` may take its shortest way for a text action: sync hooks, text
        observations, and none of a token counter, per-step rewards, human rendering or
        a vector worker's views (`_step_sync` handles those)."""
        return (
            self._inline
            and self._observation_mode == "text"
            and self._count_tokens is None
            and self._step_reward is None
            and not self._human
            and not self._ship
        )

    def _record_and_advance(
        self, state: State, message: ChatMessage | str
    ) -> tuple[Messages, str | None]:
        """The turn of a checked message: what `text_turn_sync` is for text."""
        self.environment.record_model_turn(state, message)
        return self.environment.advance_sync(state)

    def _episode_running(self) -> bool:
        """True while an episode's cleanup has not run."""
        return self._state is not None and not self._cleaned

    def _holding_loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the running episode must end on: the one its hooks opened
        what its async cleanup releases. None when no episode runs, or when its cleanup
        is sync and so can run anywhere."""
        if not (self._async_cleanup and self._episode_running()):
            return None
        return self._episode_loop

    async def _abandon(self) -> None:
        """End the running episode as a reset in mid-episode ends it: over and cleaned
        up on the running loop (a failed cleanup recorded in the State), not scored,
        since no one asked for its result. A vector env does this before it starts
        episodes on another loop."""
        if not self._episode_running():
            return
        self._claim("end_episodes")
        try:
            self._done = True
            await self._cleanup(self._state)  # type: ignore[arg-type]
        finally:
            self._busy = False

    def _abandon_sync(self) -> None:
        """`_abandon` for an episode whose cleanup needs no event loop."""
        if not self._episode_running():
            return
        self._claim("end_episodes")
        try:
            self._done = True
            self._cleanup_sync(self._state)  # type: ignore[arg-type]
        finally:
            self._busy = False

    async def _cleanup(self, state: State) -> None:
        """`cleanup_state`, at most once per episode; a failure is recorded, not raised."""
        if self._cleaned:
            return
        self._cleaned = True
        env = self.environment
        try:
            await env.call_hook(env.cleanup_state, (state,), {})
        except Exception as exc:
            self._cleanup_failed(state, exc)
        except asyncio.CancelledError:
            # An async cleanup was interrupted: a later close() runs it again. A sync
            # one ran to its end (the cancellation waited for its thread).
            if is_async_callable(env.cleanup_state):
                self._cleaned = False
            raise
        except BaseException:  # interrupted: a later close() runs it again
            self._cleaned = False
            raise

    def _cleanup_sync(self, state: State) -> None:
        if self._cleaned:
            return
        self._cleaned = True
        try:
            if not self._default_cleanup:
                call_inline(self.environment.cleanup_state, state)
        except Exception as exc:
            self._cleanup_failed(state, exc)
        except BaseException:  # interrupted: a later close() runs it again
            self._cleaned = False
            raise

    def _row_args(self, index: int) -> tuple[Messages, Any, str, dict[str, Any], int]:
        """A fresh copy of dataset row `index`'s prompt, answer, task, info and example id."""
        row = self._row_cache.get(index) or self._cached_row(index)
        prompt = row.prompt
        if row.chat:
            prompt = list(map(dict, prompt))
        info = dict(row.info) if row.flat_info else fresh_copy(row.info)
        return prompt, row.answer, row.task, info, row.example_id

    def _cached_row(self, index: int) -> _Row:
        """Dataset row `index` as a reset reads it, kept for the next reset that draws it."""
        if len(self._row_cache) >= ROWS_KEPT:
            self._row_cache.clear()
        row = self._row_cache[index] = _Row(self.rows[index])
        return row

    def _started(self, state: State, ready: Any) -> tuple[Observation, dict[str, Any]]:
        """What `reset` returns, once `setup_state` gave back `ready`."""
        if ready is not None and ready is not state:
            state.update(ready)
        # One view per episode: it reads the live State, so a new one per step would
        # show nothing more, while a new one per episode keeps showing its own.
        self._view = StateView(state)
        if self._human:
            self._show_turn(None, state["prompt"])
        if self._ship:
            self._episodes += 1
            stream = None if self._outbox is None else self._outbox.stream
            self._outbox = new_outbox(stream, self._episodes)
        return self._observe_prompt(state["prompt"]), self._info(state)

    def _observe_prompt(self, prompt: Messages) -> Observation:
        """`_observe(prompt)`, remembered by the prompt's texts in text mode: every reset
        shows one of the dataset's prompts, and cleaning a long system prompt each time
        costs more than the rest of a reset."""
        if self._observation_mode != "text" or type(prompt) is not list:
            return self._observe(prompt)
        try:
            key = tuple(map(_CONTENT, prompt))
            text = self._prompt_texts.get(key)
        except (KeyError, TypeError):  # no content, or content parts (unhashable)
            return self._observe(prompt)
        if text is None:
            if len(self._prompt_texts) >= PROMPT_TEXTS_KEPT:
                self._prompt_texts.clear()
            text = self._prompt_texts[key] = self._observe(prompt)
        return text

    def _failed(self, state: State, exc: BaseException) -> None:
        """A hook raised: the episode ends as an error (its cleanup follows)."""
        state["error"] = error_record(exc)
        self.environment.finish(state, "error")
        self._done = True

    def _cleanup_failed(self, state: State, exc: Exception) -> None:
        state["cleanup_error"] = error_record(exc)
        self.environment.logger.warning("cleanup of a Gym episode failed: %s", exc)

    def _count_turn(self, state: State, turn: ChatMessage | str) -> None:
        """Add the model's turn to `state["completion_tokens"]`, as a rollout adds the
        server's count: its text and, for tool calls, each call's name and arguments."""
        if isinstance(turn, str):
            text = turn
        else:
            parts = [turn.get("content") or ""]
            for call in turn.get("tool_calls") or ():
                function = call.get("function") or {}
                parts += [function.get("name") or "", function.get("arguments") or ""]
            text = "".join(parts)
        count = self._count_tokens(text)  # type: ignore[misc]
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
            raise TypeError(f"count_tokens must return a token count (an int >= 0), not {count!r}")
        state["completion_tokens"] += int(count)

    def _step_reward_value(self, value: Any) -> float:
        """`step_reward`'s result as the step's reward: what a reward function may
        return (a number, a numpy scalar or bool, a Fraction...), anything else refused."""
        try:
            return to_reward("step_reward", value)
        except TypeError:
            raise TypeError(
                f"{type(self.environment).__name__}.step_reward(state) must return a "
                f"number (the reward of the step just made), not {value!r}"
            ) from None

    def _last_step(
        self,
        observation: Observation,
        reward: float,
        info: dict[str, Any],
        stop: str,
        score: tuple[float, dict[str, float]],
    ) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        """What the episode's last step returns, given the rubric's (reward, metrics)."""
        episode_reward, metrics = score
        info["stop_reason"] = stop
        info["episode_reward"] = episode_reward
        info["metrics"] = dict(metrics)
        truncated = stop in TRUNCATING
        return observation, reward + episode_reward, not truncated, truncated, info

    # ------------------------------------------------------------ helpers

    def _drive(self, coro: Coroutine[Any, Any, T], what: str) -> T:
        """Run one of the adapter's coroutines from sync code (hooks that may wait)."""
        self._claim(what)
        try:
            return self._drive_loop(coro)
        finally:
            self._busy = False

    def _drive_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on this env's private loop, the same one for every call of an
        episode (from a helper thread inside a running loop, as in a notebook), so
        what the hooks opened on it stays usable from step to step."""
        if self._loop is None or self._loop.is_closed():
            self._loop = new_private_loop(self)
        return run_on(self._loop, coro)

    def _claim(self, what: str) -> None:
        """Refuse a second reset/step on this env while one is running."""
        if self._busy:
            if what in _ENDING_CALLS:
                raise RuntimeError(
                    f"{what}() was called while a reset/step of this env is still running; "
                    f"let it finish (await it; a cancelled one first unwinds), then call "
                    f"{what}() again"
                )
            raise RuntimeError(
                f"{what}() was called while another reset/step of this env is still "
                "running (or, cancelled, still unwinding: await its task first); one env "
                "plays one episode at a time — use a vector env or one GymEnv per "
                "concurrent episode"
            )
        self._busy = True

    def _chosen_row(self, options: Any) -> int | None:
        """The dataset row `reset(options=...)` picks (None: draw one), or an error
        saying what is wrong with the options; checked before a reset changes anything
        (the seed, the running episode), so a typo loses nothing."""
        if not isinstance(options, Mapping):
            raise TypeError(
                f"reset() options must be a dict such as {{'index': 3}} (or None), not "
                f"{type(options).__name__}"
            )
        unknown = set(options) - RESET_OPTIONS
        if unknown:
            raise ValueError(
                f"reset() got unknown option(s) {sorted(unknown)}; it understands "
                f"{sorted(RESET_OPTIONS)} (options={{'index': i}} picks dataset row i)"
            )
        if "index" not in options:
            return None
        index = options["index"]
        if isinstance(index, bool) or not isinstance(index, int | np.integer):
            raise TypeError(f"options['index'] must be an int, not {index!r}")
        if not -len(self.rows) <= index < len(self.rows):
            raise IndexError(
                f"options['index']={index} is outside the {len(self.rows)} dataset rows"
            )
        return int(index) % len(self.rows)

    def _drawn_row(self) -> int:
        """A dataset row drawn for a reset that picks none."""
        # The draw comes from a Python generator seeded by one draw of `np_random`, made
        # again whenever `np_random` is another generator (reseeded by `reset(seed=...)`,
        # or set by the user): the rows stay a function of the seed, and a draw costs a
        # tenth of numpy's. A uniform float scaled to the row count: the bias (below
        # 2**-30 for up to 2**23 rows) is far beyond anything a dataset could show.
        source = self._np_random
        if source is None or source is not self._row_rng_source:
            source = self.np_random  # made (randomly seeded) on first use
            self._row_rng = random.Random(int(source.integers(2**63)))
            self._row_rng_source = source
        return int(self._row_rng.random() * len(self.rows))  # type: ignore[union-attr]

    def _check_episode_loop(self, call: str = "step") -> None:
        """Refuse to step an episode on another event loop than the one it started on:
        its hooks may hold what they opened there, which no other loop can use."""
        started_on = self._episode_loop
        if started_on is None or started_on.is_closed():  # nothing of it is held there
            return
        if started_on is asyncio.get_running_loop():
            return
        if started_on is self._loop:
            raise RuntimeError(
                "this episode started with reset(), so its hooks run on the env's own "
                f"event loop: call {call}(), not a{call}() (or start it with areset())"
            )
        raise RuntimeError(
            "this episode started on another event loop (with areset() there, or with "
            f"reset()): call a{call}() on that loop or {call}() throughout, and call "
            "areset() to start one on this loop"
        )

    def _check_next_episode_loop(
        self, here: asyncio.AbstractEventLoop | None, call: Literal["reset", "areset"]
    ) -> None:
        """Refuse to start an episode on `here` while the running one is held by another
        open event loop: starting one first cleans up the last, and its cleanup must run
        where its hooks opened what it releases (a sandbox, a client); from any other
        loop it fails and what it held stays taken. (A sync cleanup waits on no loop.)"""
        started_on = self._episode_loop
        if not self._async_cleanup or self._state is None or self._cleaned:
            return
        if started_on is None or started_on is here:
            return
        if started_on.is_closed():  # nothing of it is held there
            return
        if started_on is self._loop:
            raise RuntimeError(
                "the running episode started with reset(), so its hooks run on the env's "
                "own event loop: call reset() to start the next one there (or end this "
                f"one with truncate() or close() first), not {call}()"
            )
        raise RuntimeError(
            "the running episode started on another event loop, which holds what its "
            "hooks opened: end it there first (await env.areset() on that loop starts "
            "the next one, or await env.aclose()/atruncate() there), then call "
            f"{call}() here"
        )

    def _require_running(self, call: str = "step") -> State:
        """The running episode's State; raises, naming `call`, when none runs."""
        if self._state is None:
            raise gym.error.ResetNeeded(f"call reset() before {call}()")
        if self._closed:
            raise gym.error.ResetNeeded(
                "this env was closed; call reset() to start a new episode (or make a new env)"
            )
        if self._done:
            raise gym.error.ResetNeeded(
                f"the episode has ended (stop reason: {self._state.get('stop_reason')}"
                f"{_error_told(self._state)}); call reset() to start a new one"
            )
        return self._state

    def _model_turn(self, action: Any) -> ChatMessage | str:
        """The action as the message to record; raises before anything changes."""
        if isinstance(action, str):
            return {"role": "assistant", "content": action} if self._chat else action
        return model_turn(action, chat=self._chat)

    def _observe(self, messages: Messages) -> Observation:
        if self._observation_mode == "text":
            return observation_text(messages, self._max_text_length)
        limit = self._max_text_length
        out = []
        # One or two messages of a role and a content (a step's usual reply) fit the
        # space's JSON bound by construction: 2 * (2 * limit + 64) < 4 * limit + 4096.
        plain = len(messages) <= 2
        for message in messages:
            copied = dict(message)
            content = copied.get("content")
            if content is not None:
                if type(content) is not str:  # content parts become their text, as in text mode
                    content = content_text(content)
                copied["content"] = fit_text(clean_text(content), limit)
            if len(copied) > 2:  # tool calls, a tool_call_id, a name: their text too
                plain = False
                for key, value in copied.items():
                    if key != "content":
                        copied[key] = clean_strings(value)
            out.append(copied)
        if not plain:
            capacity = self.observation_space.shared_memory_chars  # type: ignore[union-attr]
            if _json_size_bound(out) > capacity:
                _fit_json(out, capacity)
        return out

    def _info(self, state: State) -> dict[str, Any]:
        messages = state["prompt"] + state["completion"]  # a new list (or str) every call
        if self._outbox is None:
            return {"state": self._view, "messages": messages, "turn": state["turn"]}
        view = StateView(state, self._outbox)
        if type(messages) is list:
            messages = Conversation(messages, view)
        return {"state": view, "messages": messages, "turn": state["turn"]}

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

    def __repr__(self) -> str:
        name = self.environment.env_id or type(self.environment).__name__
        return f"<GymEnv {name} ({self.observation_mode})>"

    def __deepcopy__(self, memo: dict[int, Any]) -> GymEnv:
        """A copy of the env and its episode, for a policy that searches ahead from the
        current position. The private event loop is not copied (no loop can be): the
        copy makes its own when it needs one."""
        if self._busy:
            raise RuntimeError(
                "cannot copy an env while a reset/step of it is running (the copy would "
                "hold a half-played turn); copy it between steps"
            )
        copied = type(self).__new__(type(self))
        memo[id(self)] = copied
        # The dataset is shared, not copied: no episode writes to it (a reset copies the
        # row it starts from), and copying 100 rows took longer than the rest.
        env = self.environment
        for shared in (self.rows, env.dataset, env.eval_dataset, *self._row_cache.values()):
            if shared is not None:
                memo[id(shared)] = shared
        try:
            for key, value in _fields(self):
                if key not in _LOOPS:
                    object.__setattr__(copied, key, copy.deepcopy(value, memo))
        except Exception as exc:  # e.g. a sandbox's connection: live resources do not copy
            raise TypeError(
                f"this env cannot be copied: its {type(self.environment).__name__} holds "
                f"something that cannot be ({type(exc).__name__}: {exc}). Games copy; an "
                "env with live resources (sandboxes, connections) does not — replay the "
                "episode's actions on a new env instead"
            ) from exc
        copied._loop = copied._episode_loop = None
        copied._busy = False
        return copied

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError(
            "a GymEnv cannot be pickled: its environment holds functions and live "
            "resources. To build envs in other processes, send a function that makes one, "
            "e.g. functools.partial(gym.make, 'vfgym/Wordle-v0'); copy.deepcopy(env) "
            "copies one in this process"
        )


class _Row:
    """A dataset row's fields as a reset copies them, read from the row once."""

    __slots__ = (
        "answer",
        "chat",
        "example_id",
        "flat_info",
        "info",
        "prompt",
        "shown",
        "task",
    )

    def __init__(self, row: Mapping[str, Any]) -> None:
        #: The prompt the last reset of this row showed (a copy) and its observation.
        self.shown: tuple[Messages, Observation] | None = None
        self.prompt = row["prompt"]
        self.chat = isinstance(self.prompt, list)
        self.answer = row["answer"]
        self.task = row["task"]
        self.info = row["info"]
        self.example_id = row["example_id"]
        # Only scalars inside: a shallow copy is a fresh copy.
        self.flat_info = type(self.info) is dict and all(
            type(v) in _FLAT for v in self.info.values()
        )


#: Value types a flat `info` holds (immutable, so `dict(info)` copies it fully).
_FLAT = frozenset({str, int, float, bool, type(None)})


#: Calls that end the episode, told to wait for a running reset/step (see `_claim`).
_ENDING_CALLS = frozenset({"close", "aclose", "truncate", "atruncate", "end_episodes"})


def _error_told(state: State) -> str:
    """What ended an episode that ended in an error, for the error a later step raises:
    "stop reason: error" alone does not say that a step was cancelled, or what failed."""
    if state.get("stop_reason") != "error":
        return ""
    error = state.get("error")
    if not isinstance(error, Mapping):
        return ""
    kind, message = error.get("type"), error.get("message")
    if kind == "CancelledError":
        return ": a reset/step of it was cancelled (e.g. by asyncio.wait_for), which ends it"
    return f": {kind}: {str(message)[:200]}" if message else f": {kind}"


#: GymEnv attributes holding event loops, which `copy.deepcopy` leaves out.
_LOOPS = frozenset({"_loop", "_episode_loop"})


def _fields(env: GymEnv) -> list[tuple[str, Any]]:
    """Every attribute `env` has, in its slots (a subclass's too) and in its dict."""
    fields = [
        (name, getattr(env, name))
        for cls in type(env).__mro__
        for name in cls.__dict__.get("__slots__", ())
        if hasattr(env, name)
    ]
    return fields + list(env.__dict__.items())


def _with_defaults(
    state: State,
    prompt: Messages,
    completion: Messages,
    answer: str,
    task: str,
    info: dict[str, Any],
    example_id: int,
) -> State:
    """An `init_state` override's State with the keys the turn loop keeps that it left
    out (a State shaped like the type reference's example has no `completion_tokens`),
    as a rollout completes it."""
    defaults = new_state(prompt, completion, answer, task, info, example_id)
    return fill_state_defaults(state, defaults)


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


def _unreachable_loop(loop: asyncio.AbstractEventLoop, call: str) -> str:
    """Why `call` (close or aclose) cannot end an episode held by `loop`, which is
    running, and what to do instead."""
    try:
        here = asyncio.get_running_loop()
    except RuntimeError:
        here = None
    if loop is here:
        return (
            f"{call}(): this episode started on the event loop running in this thread (with "
            "areset()/astep()), and its async cleanup_state must run there to give back what "
            "its hooks opened, which a sync call made from that loop cannot do: use "
            "`await env.aclose()`"
        )
    return (
        f"{call}(): this episode started on an event loop running in another thread, and "
        "its async cleanup_state must run there to give back what its hooks opened: end it "
        f"on that loop first (`await env.aclose()` there), then call {call}() here if needed"
    )


def _check_token_counter(count_tokens: Any) -> None:
    """Refuse a `count_tokens` that is not a function (at make time and when set later)."""
    if count_tokens is not None and not callable(count_tokens):
        raise TypeError(
            "count_tokens must be a function from a turn's text to its token count, "
            f"not {type(count_tokens).__name__}"
        )


def _print_human(text: str) -> None:
    """Print for human mode, replacing what the terminal's encoding cannot show (the
    visible stand-ins for control characters are not ASCII)."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    print(text.encode(encoding, "replace").decode(encoding), file=sys.stdout, flush=True)


def _fit_json(messages: list[dict[str, Any]], capacity: int) -> None:
    """Cut the longest contents of `messages` (a messages-mode observation) until its
    JSON form, what an `AsyncVectorEnv`'s shared memory carries, fits `capacity`
    characters; each content already fits the text bound, but their number does not."""
    size = len(json.dumps(messages, ensure_ascii=False))
    while size > capacity:
        longest = max(messages, key=lambda m: len(m.get("content") or ""))
        content = longest.get("content") or ""
        if not content:
            raise ValueError(
                f"an observation of {len(messages)} messages needs {size} characters as "
                f"JSON even with no content, more than the {capacity} its space allows; "
                "make the env with a larger max_text_length"
            )
        # (8 more: the note that says where the cut is adds an escaped newline)
        longest["content"] = fit_text(content, max(0, len(content) - (size - capacity) - 8))
        size = len(json.dumps(messages, ensure_ascii=False))


def _json_size_bound(messages: list[dict[str, Any]]) -> int:
    """An upper bound on the JSON length of a messages-mode observation, cheap to get.

    Cleaned text escapes at most to twice its length (tab, newline, carriage return,
    quote, backslash; no other control characters are left, and `ensure_ascii=False`
    keeps the rest as it is). A message's role and keys take under 64 more; the
    rarer other entries (`tool_call_id`, `tool_calls`) are measured."""
    bound = 2
    for message in messages:
        content = message.get("content")
        bound += 64 + (2 * len(content) if isinstance(content, str) else 0)
        if len(message) > 2 or ("role" not in message or "content" not in message):
            rest = {k: v for k, v in message.items() if k not in ("role", "content")}
            bound += len(json.dumps(rest, ensure_ascii=False, default=str))
    return bound


def _score_sync(rubric: Rubric, state: State) -> tuple[float, dict[str, float]] | None:
    """The finished episode's reward and metrics computed in this thread, or None when
    the rubric needs an event loop (async reward functions, or scoring of its own)."""
    try:
        if type(rubric).score_rollout_sync is Rubric.score_rollout_sync:
            return rubric.score_state_sync(state)
        verdict = rubric.score_rollout_sync(*rollout_args(state))
    except SyncScoringUnavailable:
        return None
    return verdict.reward, dict(verdict.metrics)


def _scoring_failed(state: State, exc: Exception) -> None:
    """The rubric itself raised (a misconfigured rubric, a `score_rollout` of its own):
    the State records it as `generate` does, and the exception goes to the caller,
    since a made-up reward would mislead training."""
    state["error"] = error_record(exc)


__all__ = ["GymEnv", "ObservationMode"]
