"""Many unscored rollouts at once: the body of `Environment.run_rollouts`.

Split from `environment.py`: `run_rollouts` is the lower-level call verifiers
trainers make (columns in, `(completion, state)` pairs out, no scoring or
results), apart from `generate`'s engine in `vfgym.engine.runner`. Also here: the
verifiers-era keyword arguments `generate` accepts and ignores.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from openai import AsyncOpenAI, OpenAI

from vfgym.engine.batch_inputs import check_max_concurrent
from vfgym.engine.launch import progress_bar
from vfgym.engine.state import errored_state
from vfgym.types import Info, Messages, SamplingArgs, State

if TYPE_CHECKING:
    from vfgym.envs.environment import Environment


async def run_unscored_rollouts(
    env: Environment,
    client: AsyncOpenAI | OpenAI,
    model: str,
    prompts: list[Messages],
    completions: list[Messages] | None,
    answers: list[str] | None,
    states: list[State] | None,
    tasks: list[str] | None,
    infos: list[Info] | None,
    example_ids: list[int] | None,
    sampling_args: SamplingArgs | None,
    max_concurrent: int | None,
    semaphore: asyncio.Semaphore | None,
    use_tqdm: bool,
    kwargs: dict[str, Any],
) -> list[tuple[Messages, State]]:
    """`env.run_rollouts(...)`: each rollout through `env.run_rollout`, in input order;
    one that raises ends errored while the others go on."""
    workers = check_max_concurrent(max_concurrent)
    n = len(prompts)

    def column(name: str, values: list[Any] | None, default: Callable[[int], Any]) -> list[Any]:
        if not values:
            return [default(i) for i in range(n)]
        if len(values) != n:
            raise ValueError(f"{n} prompts but {len(values)} {name}; give one per prompt")
        return list(values)

    rows = zip(
        prompts,
        column("completions", completions, lambda i: None),
        column("answers", answers, lambda i: ""),
        column("states", states, lambda i: None),
        column("tasks", tasks, lambda i: "default"),
        column("infos", infos, lambda i: {}),
        column("example_ids", example_ids, lambda i: i),
        strict=True,
    )
    if semaphore is None:
        limit: AbstractAsyncContextManager[Any] = (
            asyncio.Semaphore(workers) if workers > 0 else nullcontext()
        )
    else:
        limit = semaphore
    progress = progress_bar(n, use_tqdm)

    async def one(row: tuple[Any, ...]) -> tuple[Messages, State]:
        prompt, completion, answer, state, task, info, example_id = row
        try:
            result = await env.run_rollout(
                limit,
                client,
                model,
                prompt,
                completion,
                answer,
                state,
                task,
                info,
                example_id,
                sampling_args,
                **kwargs,
            )
        except Exception as exc:  # the others go on; this one is reported as errored
            failed = errored_state(env.message_type, prompt, answer, task, info, example_id, exc)
            env.logger.warning("rollout %s failed: %s", example_id, exc)
            result = (failed["completion"], failed)
        if progress is not None:
            progress.update(1)
        return result

    try:
        return list(await asyncio.gather(*(one(row) for row in rows)))
    finally:
        if progress is not None:
            progress.close()


# verifiers-era tuning knobs that vfgym's scheduler has no use for: scoring runs
# as each rollout ends and results stream as they finish, so these change nothing.
_IGNORED_GENERATE_KWARGS = frozenset(
    {
        "max_concurrent_generation",
        "max_concurrent_scoring",
        "generation_semaphore",
        "scoring_semaphore",
        "interleave_scoring",
        "save_every",
    }
)


def compat_generate_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Keep the keyword arguments `run_batch` understands; refuse unknown ones."""
    unknown = set(kwargs) - _IGNORED_GENERATE_KWARGS - {"semaphore", "gc_freeze"}
    if unknown:
        raise TypeError(f"generate() got unexpected keyword argument(s) {sorted(unknown)}")
    return {k: v for k, v in kwargs.items() if k in ("semaphore", "gc_freeze")}
