"""`generate` and `evaluate` on a Ray cluster: the same batch, results.jsonl, resume
and outputs as `Environment.generate`, with whole groups played by workers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openai import AsyncOpenAI, OpenAI

from vfgym.cluster.dispatch import DEFAULT_GROUPS_PER_WORKER, ClusterGroups, ClusterSettings
from vfgym.envs.environment import Environment
from vfgym.types import GenerateOutputs, SamplingArgs


def worker_args(
    env: Environment,
    client: AsyncOpenAI | OpenAI,
    model: str,
    sampling_args: SamplingArgs | None,
    score_rollouts: bool,
    state_columns: list[str] | None,
) -> dict[str, Any]:
    """What each worker needs to rebuild the run: environments do not travel between
    processes (they hold locks, pools, clients), so workers load theirs by id."""
    if not env.env_id:
        raise ValueError(
            "a cluster run rebuilds the environment on each worker by its id, and this one "
            "has none: load it with vfgym.load_environment('ID', ...) (register a custom one "
            "under the 'vfgym.environments' entry point) rather than constructing it"
        )
    return {
        "env_id": env.env_id,
        "env_args": dict(env.env_args),
        "base_url": str(client.base_url),
        "api_key": client.api_key,
        "model": model,
        "sampling_args": sampling_args,
        "score_rollouts": score_rollouts,
        "state_columns": state_columns,
    }


async def generate(
    env: Environment,
    inputs: Any,
    client: AsyncOpenAI | OpenAI,
    model: str,
    *,
    ray: str = "auto",
    workers: int | None = None,
    groups_per_worker: int = DEFAULT_GROUPS_PER_WORKER,
    sampling_args: SamplingArgs | None = None,
    num_examples: int | None = None,
    rollouts_per_example: int = 1,
    score_rollouts: bool = True,
    results_path: str | Path | None = None,
    state_columns: list[str] | None = None,
    resume: bool = False,
    use_tqdm: bool = False,
    on_result: Any = None,
) -> GenerateOutputs:
    """`env.generate(...)` spread over the Ray cluster at `ray` ('auto' joins the running
    cluster, 'local' starts one here, or a cluster address).

    Workers (one per node unless `workers` says how many) each play
    `groups_per_worker` groups at once with their own event loop, model client and
    sandbox pool; every group of `rollouts_per_example` rows goes to one worker. The
    driver writes each group's lines to `results_path` as it comes back, so resume,
    the summary and the outputs are those of a local run; metadata.json adds a
    "cluster" entry (workers, nodes, rollouts per node, workers lost). A worker or
    node that dies costs only time: its groups are played again elsewhere.
    """
    from vfgym.engine.runner import run_batch

    settings = ClusterSettings(address=ray, workers=workers, groups_per_worker=groups_per_worker)
    args = worker_args(env, client, model, sampling_args, score_rollouts, state_columns)
    async with ClusterGroups(settings, args) as remote:
        return await run_batch(
            env,
            inputs,
            client=client,
            model=model,
            sampling_args=sampling_args,
            num_examples=num_examples,
            rollouts_per_example=rollouts_per_example,
            score_rollouts=score_rollouts,
            results_path=results_path,
            state_columns=state_columns,
            resume=resume,
            use_tqdm=use_tqdm,
            on_result=on_result,
            remote=remote,
        )


async def evaluate(
    env: Environment,
    client: AsyncOpenAI | OpenAI,
    model: str,
    *,
    num_examples: int = -1,
    rollouts_per_example: int = 1,
    **options: Any,
) -> GenerateOutputs:
    """`env.evaluate(...)` on a Ray cluster; the options are `generate`'s."""
    inputs = env.get_eval_inputs(num_examples, rollouts_per_example)
    return await generate(
        env, inputs, client, model, rollouts_per_example=rollouts_per_example, **options
    )
