"""Several environments behind one: rows carry a `task`, and each goes to its own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from openai import AsyncOpenAI, OpenAI

from vfgym.envs.environment import Environment
from vfgym.rubrics import Rubric
from vfgym.types import Info, Messages, ProcessedOutputs, RolloutScore, SamplingArgs, State

if TYPE_CHECKING:
    from vfgym.processing import Tokenizer


class EnvGroupRubric(Rubric):
    """Scores each rollout with the rubric of the environment its task names."""

    def __init__(self, env_map: Mapping[str, Environment]):
        super().__init__()
        self.env_map = dict(env_map)

    def get_reward_func_names(self) -> list[str]:
        names: dict[str, None] = {}
        for env in self.env_map.values():
            names.update(dict.fromkeys(env.rubric.get_reward_func_names()))
        return list(names)

    async def score_rollout(
        self,
        prompt: Messages,
        completion: Messages,
        answer: str,
        state: State,
        task: str = "default",
        info: Info | None = None,
        example_id: int | None = None,
        **kwargs: Any,
    ) -> RolloutScore:
        env = self.env_map.get(task)
        if env is None:
            raise KeyError(f"no environment for task {task!r}; tasks are {sorted(self.env_map)}")
        return await env.rubric.score_rollout(
            prompt, completion, answer, state, task=task, info=info, example_id=example_id, **kwargs
        )


class EnvGroup(Environment):
    """Routes each row to the environment named by its `task` column.

    The datasets of the member environments are concatenated with `task` set to
    each environment's name, and example ids renumbered so they stay unique.
    """

    def __init__(
        self,
        envs: list[Environment],
        env_names: list[str] | None = None,
        **kwargs: Any,
    ):
        if not envs:
            raise ValueError("EnvGroup needs at least one environment")
        names = list(env_names) if env_names is not None else [f"env_{i}" for i in range(len(envs))]
        if len(names) != len(envs):
            raise ValueError(f"{len(envs)} environments but {len(names)} env_names")
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
        train = _tagged(names, [e.dataset for e in envs])
        evals = _tagged(
            names, [e.eval_dataset if e.eval_dataset is not None else e.dataset for e in envs]
        )
        super().__init__(
            dataset=train or None,
            eval_dataset=evals or None,
            rubric=EnvGroupRubric(self.env_map),
            message_type=envs[0].message_type,
            **kwargs,
        )

    def format_dataset(self, dataset: Any, *_: Any, **__: Any) -> list[dict[str, Any]]:
        """Member environments already formatted their rows; keep them as they are."""
        return list(dataset)

    def get_env_for_task(self, task: str) -> Environment:
        try:
            return self.env_map[task]
        except KeyError:
            raise KeyError(
                f"no environment for task {task!r}; tasks are {sorted(self.env_map)}"
            ) from None

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

    def process_env_results(
        self,
        prompts: list[Messages],
        completions: list[Messages],
        states: list[State],
        rewards: list[float],
        processing_class: Tokenizer,
        max_seq_len: int = -1,
        mask_env_responses: bool = False,
        mask_truncated_completions: bool = False,
        zero_truncated_completions: bool = False,
        **kwargs: Any,
    ) -> ProcessedOutputs:
        """Tokenize with the tools of each rollout's own environment."""
        from vfgym.processing import process_env_results

        tools = [self.get_env_for_task(s.get("task", "default")).oai_tools for s in states]
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


def _tagged(names: list[str], datasets: list[list[dict[str, Any]] | None]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for name, data in zip(names, datasets, strict=True):
        for row in data or ():
            rows.append({**row, "task": name, "example_id": len(rows)})
    return rows
