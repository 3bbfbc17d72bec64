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

How the class is built: `GymEnv` is this module's public calls over a stack of
layers, each a module with one job — `episode` (the attributes and the bookkeeping
both paths share), `copying`, `rows` (which dataset row a reset starts from),
`rendering`, `observing` (observations and infos), `loops` (which event loop an
episode lives on), `async_path` and `sync_path` (the two ways an episode's hooks are
driven); `settings` checks what the env is made with. The layers are base classes,
not objects it calls, so splitting them costs a step no call and no lookup.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Literal

import gymnasium as gym

from vfgym.engine._async import is_async_callable, maybe_await
from vfgym.envs.environment import Environment
from vfgym.envs.multiturn_env import MultiTurnEnv
from vfgym.gym.episode import Action, Observation, ObservationMode
from vfgym.gym.rows import RESET_OPTIONS
from vfgym.gym.settings import check_settings, check_token_counter, made_with
from vfgym.gym.shipping import in_vector_worker, use_delta_shipping
from vfgym.gym.spaces import DEFAULT_MAX_TEXT_LENGTH, MessagesSpace, ModelTurnSpace, UnicodeText
from vfgym.gym.sync_path import SyncEpisodes
from vfgym.gym.text import FORBIDDEN
from vfgym.types import State


class GymEnv(SyncEpisodes):
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

    __slots__ = ()

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
        per_step_reward, step_reward, rows = check_settings(
            env,
            observation_mode=observation_mode,
            per_step_reward=per_step_reward,
            render_mode=render_mode,
            render_modes=self.metadata["render_modes"],
            dataset=dataset,
            max_text_length=max_text_length,
            count_tokens=count_tokens,
        )
        self.environment = env
        self.owns_environment = owns_environment
        # Read-only (see `made_with`): the spaces and the step path are built from them.
        self._observation_mode = observation_mode
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
        self._step_reward = step_reward if per_step_reward else None
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
        self._episode_loop = None
        self._state = None
        self._view = None
        self._done = True
        self._cleaned = True
        self._busy = False
        self._closed = False
        self._loop = None
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
        self._outbox = None
        self._prompt_texts = {}
        self._row_cache = {}
        # Rows are drawn by a Python generator seeded from `np_random` (see `_drawn_row`).
        self._row_rng = None
        self._row_rng_source = None
        self._episodes = 0

    observation_mode = made_with("observation_mode")

    per_step_reward = made_with("per_step_reward")

    render_mode = made_with("render_mode")  # type: ignore[assignment]

    max_text_length = made_with("max_text_length")

    @property
    def count_tokens(self) -> Callable[[str], int] | None:
        """How many tokens a model's turn took, given its text (see the class doc)."""
        return self._count_tokens

    @count_tokens.setter
    def count_tokens(self, count_tokens: Callable[[str], int] | None) -> None:
        check_token_counter(count_tokens)
        self._count_tokens = count_tokens
        self._plain_text = self._steps_plain_text()

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
        # (read duck-typed below: one message dict, or anything else for `_observe`)
        env_messages: Any
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

    def __repr__(self) -> str:
        name = self.environment.env_id or type(self.environment).__name__
        return f"<GymEnv {name} ({self.observation_mode})>"


__all__ = ["RESET_OPTIONS", "GymEnv", "ObservationMode"]
