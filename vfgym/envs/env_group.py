"""Several environments behind one: rows carry a `task`, and each goes to its own.

`EnvGroup` routes each rollout, hook and turn to its task's environment; its
rubric (`EnvGroupRubric`, routing scores the same way) is in `env_group_rubric.py`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from openai import AsyncOpenAI, OpenAI

from vfgym.engine._async import is_async_callable, maybe_await
from vfgym.engine.data import format_rows, to_rows
from vfgym.envs.env_group_rubric import EnvGroupRubric
from vfgym.envs.environment import Environment
from vfgym.envs.multiturn_env import MultiTurnEnv
from vfgym.errors import UnknownTaskError
from vfgym.types import (
    ChatMessage,
    Info,
    Messages,
    ModelResponse,
    ProcessedOutputs,
    SamplingArgs,
    State,
)

if TYPE_CHECKING:
    from vfgym.training.processing import Tokenizer

#: The columns a formatted row has; a row with all of them is kept as it is.
_ROW_KEYS = ("prompt", "answer", "info", "task", "example_id")


class EnvGroup(MultiTurnEnv):
    """Routes each row to the environment named by its `task` column.

    The datasets of the member environments are concatenated with `task` set to
    each environment's name, and example ids renumbered so they stay unique. A member
    that is itself an EnvGroup keeps its rows' own tasks and routes them on (a task
    two members would claim is refused); env_names are non-empty text, as a row's
    `task` is.

    A rollout is the member's own rollout. The turn-by-turn API (`setup_state`,
    `advance`, `cleanup_state`... what the Gym adapter and `vfgym play` drive) is
    routed by the State's `task` to the member's, so its limits (`max_turns`, token
    budget), hooks and rubric apply in Gym as in a rollout; that needs every member
    to be a `MultiTurnEnv`, which the adapter checks when it wraps the group.
    """

    def __init__(
        self,
        envs: list[Environment],
        env_names: list[str] | None = None,
        **kwargs: Any,
    ):
        if not envs:
            raise ValueError("EnvGroup needs at least one environment")
        _refuse_member_limits(kwargs)
        names = list(env_names) if env_names is not None else [f"env_{i}" for i in range(len(envs))]
        if len(names) != len(envs):
            raise ValueError(f"{len(envs)} environments but {len(names)} env_names")
        _check_names(names)
        if len(set(names)) != len(names):
            raise ValueError(f"env_names must be unique, got {names}")
        kinds = {e.message_type for e in envs}
        if len(kinds) > 1:
            # One group's outputs are one kind of data: chat messages or text, never both.
            members = list(zip(names, envs, strict=True))
            by_kind = {k: [n for n, e in members if e.message_type == k] for k in kinds}
            raise ValueError(
                "EnvGroup members must share a message_type, but "
                + " and ".join(f"{by_kind[k]} use {k!r}" for k in sorted(kinds))
                + "; group the chat environments and the completion ones separately"
            )
        self.envs = list(envs)
        self.env_names = names
        self.env_map = dict(zip(names, envs, strict=True))
        # The member that plays each task a row may carry: a member's own name, and
        # for a member that is an EnvGroup, each task of its own (it routes on).
        self._routes = _routes(names, envs)
        self._all_hooks_sync: bool | None = None  # (see `_driven_inline`)
        train = _tagged(names, envs, [e.dataset for e in envs])
        evals = _tagged(
            names, envs, [e.eval_dataset if e.eval_dataset is not None else e.dataset for e in envs]
        )
        super().__init__(
            dataset=train or None,
            eval_dataset=evals or None,
            rubric=EnvGroupRubric(self._routes),
            message_type=envs[0].message_type,
            **kwargs,
        )
        # The Gym adapter's per-step reward, only when every member gives one: a group
        # whose episodes reward some steps and not others would mislead training.
        given = [getattr(env, "step_reward", None) for env in envs]
        step_rewards = [f for f in given if callable(f)]
        if len(step_rewards) == len(given):
            routed = (
                self._step_reward_async
                if any(is_async_callable(f) for f in step_rewards)
                else self._step_reward_sync
            )
            self.step_reward: Callable[[State], Any] = routed

    # ------------------------------------------------------------------ data

    def format_dataset(self, dataset: Any, *_: Any, **__: Any) -> list[dict[str, Any]]:
        """Rows as the runner plays them: a formatted row (a member's) as it is; a row
        with a prompt given the missing columns; a row without one (a `question`)
        formatted by the member its `task` names, with that member's system prompt and
        few-shot, as the member would format it."""
        rows = dataset if isinstance(dataset, list) else to_rows(dataset)
        out: list[dict[str, Any]] = []
        for i, row in enumerate(rows):
            if all(key in row for key in _ROW_KEYS):
                out.append(row)
                continue
            if row.get("prompt") is not None:
                [formatted] = format_rows([row], message_type=self.message_type)
            else:
                task = row.get("task")
                env = self._routes.get(task) if isinstance(task, str) else None
                if env is None:
                    why = f"its task {task!r} is none of them" if task else "it has no 'task'"
                    raise ValueError(
                        f"input row {i} has no 'prompt', so the environment its task names "
                        f"must format it, and {why}: set the row's 'task' to one of this "
                        f"group's tasks or give it a ready 'prompt'; tasks are "
                        f"{sorted(self._routes)}"
                    )
                [formatted] = env.format_dataset([row])
                formatted["task"] = task
            if "example_id" not in row:
                formatted["example_id"] = i
            out.append(formatted)
        return out

    def get_env_for_task(self, task: str) -> Environment:
        try:
            return self._routes[task]
        except (KeyError, TypeError):
            raise UnknownTaskError(
                f"no environment for task {task!r}; tasks are {sorted(self._routes)} (a "
                "row's 'task' names the environment that plays it)"
            ) from None

    def _player(self, task: str) -> Environment:
        """The environment that plays `task` itself, through any nested groups."""
        env = self.get_env_for_task(task)
        return env._player(task) if isinstance(env, EnvGroup) else env

    # -------------------------------------------------------------- rollouts

    async def rollout(
        self,
        client: AsyncOpenAI | OpenAI,
        model: str,
        prompt: Messages,
        completion: Messages | None = None,
        answer: str = "",
        state: State | None = None,
        task: str = "default",
        info: Info | None = None,
        example_id: int = 0,
        sampling_args: SamplingArgs | None = None,
        **kwargs: Any,
    ) -> tuple[Messages, State]:
        env = self.get_env_for_task(task)
        merged = self.merged_sampling_args(sampling_args)
        return await env.rollout(
            client,
            model,
            prompt,
            completion=completion,
            answer=answer,
            state=state,
            task=task,
            info=info,
            example_id=example_id,
            sampling_args=merged,
            **kwargs,
        )

    async def aclose(self) -> None:
        """Release what every member holds (a SandboxEnv's containers), each member's
        `aclose()` in turn; one that fails does not keep the others holding theirs,
        and the first failure is raised once all have run."""
        failure: BaseException | None = None
        for env in self.envs:
            release = getattr(env, "aclose", None)
            if not callable(release):
                continue
            try:
                await maybe_await(release)
            except Exception as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    # ------------------------------------------------- the turn-by-turn API
    #
    # Routed by the State's `task` to the member, whole: the member records the turn,
    # answers it and checks its own limits, exactly as its own rollout does.

    def get_env_for_state(self, state: Mapping[str, Any]) -> MultiTurnEnv:
        """The member environment that plays the episode of `state` (by its task)."""
        task = state.get("task", "default")
        env = self.get_env_for_task(task)
        if not isinstance(env, MultiTurnEnv):
            raise TypeError(_not_steppable(task, env))
        return env

    @property
    def hooks_are_sync(self) -> bool:
        """True when every member's hooks are (see `MultiTurnEnv.hooks_are_sync`).

        Raises TypeError for a member that is no `MultiTurnEnv`: it runs its own
        rollout loop, so there are no turns to step through (its rollouts work).
        """
        for name, env in self.env_map.items():
            if not isinstance(env, MultiTurnEnv):
                raise TypeError(_not_steppable(name, env))
        return all(env.hooks_are_sync for env in self.env_map.values())  # type: ignore[attr-defined]

    async def init_completion(self) -> Messages:
        return [] if self.message_type == "chat" else ""

    async def init_state(
        self,
        prompt: Messages,
        completion: Messages,
        answer: str,
        task: str,
        info: Info,
        example_id: int,
        **kwargs: Any,
    ) -> State:
        """The member's initial State (its `init_completion` too, when it has one)."""
        env = self.get_env_for_state({"task": task})
        if not completion and type(env).init_completion is not Environment.init_completion:
            completion = await maybe_await(env.init_completion)
        args = (prompt, completion, answer, task, info, example_id)
        if kwargs:
            return await maybe_await(env.init_state, *args, **kwargs)
        return await maybe_await(env.init_state, *args)

    async def call_hook(
        self, hook: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """A routed hook (`setup_state`, ...) as the member's `call_hook` calls its own.

        A driver on an event loop (the Gym adapter's `areset`/`astep`) calls the hooks
        through here: a member's sync hook that blocks then runs through the member's
        offloader, off the loop, even when every member's hooks are sync (which
        otherwise run inline, for the adapter's loop-free `reset`/`step`).
        """
        name = getattr(hook, "__name__", "")
        routed = name in _ROUTED_HOOKS and getattr(hook, "__self__", None) is self
        if not routed or getattr(hook, "__func__", None) is not getattr(EnvGroup, name):
            return await super().call_hook(hook, args, kwargs)
        state = args[-1]  # (every routed hook takes the State last)
        env = self.get_env_for_state(state)
        return await env.call_hook(getattr(env, name), args, kwargs)

    # The member's hooks run as the member's own rollouts run them: a sync one through
    # its offloader, so that a blocking one does not stall every rollout on the loop.
    # Except when every member's hooks are sync: then the Gym adapter drives the
    # group's hooks with no event loop (see `hooks_are_sync`), and they run inline.

    def _member_hook(
        self, state: State, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Awaitable[Any]:
        env = self.get_env_for_state(state)
        hook = getattr(env, name)
        if self._driven_inline():
            return maybe_await(hook, *args, **kwargs)
        return env.call_hook(hook, args, kwargs)

    def _driven_inline(self) -> bool:
        """`hooks_are_sync`, asked once (the members do not change), and False for a
        group with a member that has no turns to step through."""
        if self._all_hooks_sync is None:
            self._all_hooks_sync = all(
                isinstance(env, MultiTurnEnv) and env.hooks_are_sync
                for env in self.env_map.values()
            )
        return self._all_hooks_sync

    async def setup_state(self, state: State, **kwargs: Any) -> State:
        return await self._member_hook(state, "setup_state", (state,), kwargs)  # type: ignore[no-any-return]

    async def cleanup_state(self, state: State, **kwargs: Any) -> None:
        await self._member_hook(state, "cleanup_state", (state,), kwargs)

    async def is_completed(self, messages: Messages, state: State, **kwargs: Any) -> bool:
        return bool(await self._member_hook(state, "is_completed", (messages, state), kwargs))

    async def env_response(
        self, messages: Messages, state: State, **kwargs: Any
    ) -> tuple[Messages, State]:
        return await self._member_hook(state, "env_response", (messages, state), kwargs)  # type: ignore[no-any-return]

    async def max_turns_reached(self, state: State) -> bool:
        return bool(await maybe_await(self.get_env_for_state(state).max_turns_reached, state))

    async def prompt_too_long(self, state: State) -> bool:
        return bool(await maybe_await(self.get_env_for_state(state).prompt_too_long, state))

    async def get_context_messages(self, state: State) -> Messages:
        return await maybe_await(self.get_env_for_state(state).get_context_messages, state)

    def record_model_turn(
        self, state: State, message: ChatMessage | str, response: ModelResponse = None
    ) -> None:
        self.get_env_for_state(state).record_model_turn(state, message, response)

    async def check_stop(
        self, state: State, *, natural_only: bool = False, **kwargs: Any
    ) -> str | None:
        return await self.get_env_for_state(state).check_stop(
            state, natural_only=natural_only, **kwargs
        )

    def check_stop_sync(
        self, state: State, *, natural_only: bool = False, **kwargs: Any
    ) -> str | None:
        return self.get_env_for_state(state).check_stop_sync(
            state, natural_only=natural_only, **kwargs
        )

    async def advance(self, state: State, **kwargs: Any) -> tuple[Messages, str | None]:
        return await self.get_env_for_state(state).advance(state, **kwargs)

    def advance_sync(self, state: State, **kwargs: Any) -> tuple[Messages, str | None]:
        return self.get_env_for_state(state).advance_sync(state, **kwargs)

    def text_turn_sync(self, state: State, text: str) -> tuple[Messages, str | None]:
        return self.get_env_for_state(state).text_turn_sync(state, text)

    def finish(self, state: State, stop_reason: str) -> None:
        self.get_env_for_state(state).finish(state, stop_reason)

    def render_state(self, state: State) -> str:
        """The member's board (its `render_state`), or "" when it shows none."""
        render = getattr(self.get_env_for_state(state), "render_state", None)
        return str(render(state) or "") if callable(render) else ""

    def _step_reward_sync(self, state: State) -> Any:
        return self.get_env_for_state(state).step_reward(state)  # type: ignore[attr-defined]

    async def _step_reward_async(self, state: State) -> Any:
        return await maybe_await(self.get_env_for_state(state).step_reward, state)  # type: ignore[attr-defined]

    # -------------------------------------------------------------- training

    def process_env_results(
        self,
        prompts: list[Messages],
        completions: list[Messages],
        states: list[State],
        rewards: list[float],
        processing_class: Tokenizer,
        max_seq_len: int | None = -1,
        mask_env_responses: bool = False,
        mask_truncated_completions: bool = False,
        zero_truncated_completions: bool = False,
        **kwargs: Any,
    ) -> ProcessedOutputs:
        """Tokenize with the tools of each rollout's own environment."""
        from vfgym.training.processing import process_env_results

        tools = [self._player(s.get("task", "default")).oai_tools for s in states]
        return process_env_results(
            prompts,
            completions,
            states,
            rewards,
            processing_class,
            max_seq_len=max_seq_len,
            mask_env_responses=mask_env_responses,
            mask_truncated_completions=mask_truncated_completions,
            zero_truncated_completions=zero_truncated_completions,
            message_type=self.message_type,
            oai_tools=tools,
        )


#: The hooks the group routes to the member its State's task names (see `call_hook`).
_ROUTED_HOOKS = frozenset({"setup_state", "is_completed", "env_response", "cleanup_state"})


def _check_names(names: list[Any]) -> None:
    """Refuse a name no row could carry as its task: a row's task that is empty (or
    not given) reads as "default", and one that is not text breaks where tasks are
    compared, so every rollout of that member would fail."""
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise TypeError(
                f"env_names[{i}] is {name!r} ({type(name).__name__}), not a str: a row's "
                f"'task' names its environment with text; give it a name such as {str(name)!r}"
            )
        if not name:
            raise ValueError(
                f"env_names[{i}] is an empty name, which a row's 'task' cannot carry (an "
                "empty task reads as 'default'); give every environment a non-empty name"
            )


def _routes(names: list[str], envs: list[Environment]) -> dict[str, Environment]:
    """Each task a row may carry -> the member that plays it. A member that is an
    EnvGroup keeps its rows' own tasks (so it can route them on) and is the member
    for each; a task two members would claim is refused, as it could play only one."""
    routes: dict[str, Environment] = {}
    owners: dict[str, str] = {}
    for name, env in zip(names, envs, strict=True):
        tasks = list(env._routes) if isinstance(env, EnvGroup) else [name]
        for task in tasks:
            if task in routes:
                raise ValueError(
                    f"EnvGroup task {task!r} is claimed by both {owners[task]!r} and {name!r} "
                    "(a member that is an EnvGroup brings its own tasks); rename one so "
                    "every row's 'task' names one environment"
                )
            routes[task], owners[task] = env, name
    return routes


#: Limits each member enforces itself, in its rollouts and in Gym steps alike: one given
#: to the group would be accepted and never enforced.
_MEMBER_LIMITS = {
    "max_turns": "ToolEnv(..., max_turns=5)",
    "rollout_token_budget": "ToolEnv(..., rollout_token_budget=4096)",
}


def _refuse_member_limits(kwargs: dict[str, Any]) -> None:
    """Refuse a limit given to the group: only a member's own limits are enforced."""
    for name, example in _MEMBER_LIMITS.items():
        if name in kwargs:
            raise TypeError(
                f"EnvGroup takes no {name}: each member environment keeps its own "
                f"(give it to the member, e.g. {example})"
            )


def _not_steppable(task: str, env: Environment) -> str:
    """Why the group cannot step an episode of `task`, and what works instead."""
    return (
        f"EnvGroup member {task!r} is a {type(env).__name__}, not a MultiTurnEnv: it runs its "
        "own rollout loop, so it has no turns to step through one at a time (Gym, vfgym play); "
        "generate/evaluate run it, or put only MultiTurnEnv members in a group to step"
    )


def _tagged(
    names: list[str], envs: list[Environment], datasets: list[list[dict[str, Any]] | None]
) -> list[dict[str, Any]]:
    """The members' rows, each tagged with the task that routes it to its member (a
    nested group's rows keep their own) and renumbered so example ids stay unique."""
    rows: list[dict[str, Any]] = []
    for name, env, data in zip(names, envs, datasets, strict=True):
        nested = isinstance(env, EnvGroup)
        for row in data or ():
            rows.append({**row, "task": row["task"] if nested else name, "example_id": len(rows)})
    return rows


__all__ = ["EnvGroup", "EnvGroupRubric"]
