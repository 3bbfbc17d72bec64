"""The base of every environment: data, prompts, model calls, generate and evaluate.

`Environment` is the public face; the work behind its methods lives by job in
`env_settings.py` (its constructor's arguments checked), `sampling.py` (defaults
and the caller's sampling arguments merged and checked),
`dataset_rows.py` (row-level dataset steps), `batch_rollouts.py` (`run_rollouts`)
and `vfgym.engine.runner` (`generate`'s scheduling, scoring and results).
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openai import AsyncOpenAI, OpenAI

from vfgym.compat.kwargs import keep_unknown_kwargs
from vfgym.engine._async import run_sync
from vfgym.engine.batch_inputs import check_num_examples, check_rollouts_per_example
from vfgym.engine.clients import loop_local_client
from vfgym.engine.data import DatasetLike, build_prompt, format_rows, to_rows
from vfgym.engine.state import errored_state, fill_state_defaults, new_state
from vfgym.envs.batch_rollouts import compat_generate_kwargs, run_unscored_rollouts
from vfgym.envs.dataset_rows import no_rows_message, renamed_columns, take_rows
from vfgym.envs.env_settings import (
    IGNORED_COMPAT_KWARGS,
    check_env_settings,
    checked_token_budget,
)
from vfgym.envs.sampling import env_sampling_args, merge_sampling_args
from vfgym.inference.client import RetryPolicy, request_model_response
from vfgym.parsers import Parser
from vfgym.rubrics import Rubric
from vfgym.types import (
    ChatCompletionToolParam,
    ChatMessage,
    GenerateInputs,
    GenerateOutputs,
    Info,
    Messages,
    MessageType,
    ModelResponse,
    ProcessedOutputs,
    SamplingArgs,
    State,
)

if TYPE_CHECKING:
    from vfgym.training.processing import Tokenizer


class Environment(ABC):
    """Holds the data and the rubric of a task and runs rollouts against a model.

    Subclasses implement `rollout`; `MultiTurnEnv` gives the usual turn loop.
    """

    def __init__(
        self,
        dataset: DatasetLike | None = None,
        eval_dataset: DatasetLike | None = None,
        system_prompt: str | None = None,
        few_shot: list[ChatMessage] | None = None,
        parser: Parser | None = None,
        rubric: Rubric | None = None,
        sampling_args: SamplingArgs | None = None,
        message_type: MessageType = "chat",
        oai_tools: list[ChatCompletionToolParam] | None = None,
        env_id: str | None = None,
        env_args: dict[str, Any] | None = None,
        retry: RetryPolicy | None = None,
        rollout_token_budget: int | None = None,
        **kwargs: Any,
    ):
        check_env_settings(
            type(self).__name__,
            kwargs,
            message_type,
            system_prompt,
            few_shot,
            dataset,
            eval_dataset,
        )
        rollout_token_budget = checked_token_budget(rollout_token_budget)
        self.logger = logging.getLogger(f"vfgym.envs.{type(self).__name__}")
        self.message_type: MessageType = message_type
        self.system_prompt = system_prompt
        self.few_shot = list(few_shot) if few_shot else None
        self.parser = parser if parser is not None else Parser()
        self.rubric = rubric if rubric is not None else Rubric(parser=self.parser)
        self.oai_tools = oai_tools
        self.sampling_args: SamplingArgs = env_sampling_args(sampling_args)
        self.env_id = env_id or ""
        self.env_args = dict(env_args or {})
        self.retry = retry or RetryPolicy()
        self.rollout_token_budget = rollout_token_budget
        self.dataset = self.format_dataset(dataset) if dataset is not None else None
        self.eval_dataset = self.format_dataset(eval_dataset) if eval_dataset is not None else None
        # (code written for verifiers 0.1.x: its unknown keywords kept, as 0.1.x kept them)
        keep_unknown_kwargs(
            self, {k: v for k, v in kwargs.items() if k not in IGNORED_COMPAT_KWARGS}
        )

    # ------------------------------------------------------------------ data

    def format_prompt(
        self,
        prompt_str: str,
        system_prompt: str | None = None,
        few_shot: list[ChatMessage] | None = None,
    ) -> list[ChatMessage]:
        """The chat prompt for one question (see `vfgym.engine.data.build_prompt`)."""
        return build_prompt(prompt_str, system_prompt, few_shot)

    def format_dataset(
        self,
        dataset: DatasetLike,
        system_prompt: str | None = None,
        few_shot: list[ChatMessage] | None = None,
        question_key: str = "question",
        answer_key: str = "answer",
        map_kwargs: dict[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """Rows with a ready `prompt`, plus `answer`, `info`, `task` and `example_id`.

        `system_prompt` and `few_shot` default to the environment's own;
        `question_key` and `answer_key` name the columns to read when they are
        not "question" and "answer". `map_kwargs` is accepted for verifiers
        compatibility and has no effect (rows are plain dicts, not mapped).
        """
        rows = to_rows(dataset)
        if question_key != "question" or answer_key != "answer":
            rows = [renamed_columns(row, i, question_key, answer_key) for i, row in enumerate(rows)]
        return format_rows(
            rows,
            message_type=self.message_type,
            system_prompt=self.system_prompt if system_prompt is None else system_prompt,
            few_shot=self.few_shot if few_shot is None else few_shot,
        )

    def get_dataset(self, n: int | None = -1, seed: int | None = None) -> list[dict[str, Any]]:
        """The training rows (the first `n`, shuffled first when `seed` is given).

        The list is the caller's own, so shuffling or trimming it leaves the
        environment's dataset as it was; an empty dataset is refused here, where its
        rows are wanted, rather than evaluated as a run of no rollouts.
        """
        if self.dataset is None:
            raise ValueError(f"{type(self).__name__} has no training dataset; use eval_dataset")
        if not self.dataset:
            raise ValueError(no_rows_message(type(self).__name__, "dataset"))
        return take_rows(self.dataset, n, seed)

    def get_eval_dataset(self, n: int | None = -1, seed: int | None = None) -> list[dict[str, Any]]:
        """The evaluation rows, falling back to the training rows when there is no
        eval_dataset (None). An empty eval_dataset is refused, not read as none: it
        would otherwise evaluate nothing, or the training rows in its place."""
        if self.eval_dataset is not None:
            if not self.eval_dataset:
                raise ValueError(
                    no_rows_message(type(self).__name__, "eval_dataset")
                    + ", or eval_dataset=None to evaluate on the training rows"
                )
            return take_rows(self.eval_dataset, n, seed)
        if not self.dataset:
            raise ValueError(no_rows_message(type(self).__name__, "dataset"))
        return take_rows(self.dataset, n, seed)

    def get_reward_funcs(self) -> list[Callable[..., Any]]:
        return self.rubric.get_reward_funcs()

    def get_reward_weights(self) -> list[float]:
        return self.rubric.get_reward_weights()

    # ----------------------------------------------------------------- model

    def merged_sampling_args(self, sampling_args: SamplingArgs | None) -> SamplingArgs:
        """The environment's defaults overlaid with the caller's (extra_body merged)."""
        return merge_sampling_args(self.sampling_args, sampling_args)

    async def get_model_response(
        self,
        client: AsyncOpenAI | OpenAI,
        model: str,
        prompt: Messages,
        oai_tools: list[ChatCompletionToolParam] | None = None,
        sampling_args: SamplingArgs | None = None,
        message_type: MessageType | None = None,
        **kwargs: Any,
    ) -> ModelResponse:
        """One model turn through the retry policy (see `vfgym.inference.client`)."""
        return await request_model_response(
            client,
            model,
            prompt,
            message_type=message_type or self.message_type,
            oai_tools=oai_tools,
            sampling_args=sampling_args,
            retry=self.retry,
        )

    # --------------------------------------------------------------- rollouts

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
        """The State every rollout starts from (see the type reference)."""
        return new_state(prompt, completion, answer, task, info, example_id)

    @abstractmethod
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
        """Run one episode and return `(completion, state)`."""

    async def run_rollout(
        self,
        sem: AbstractAsyncContextManager[Any],
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
        """`rollout` while holding `sem`, for trainers written against verifiers."""
        async with sem:
            return await self.rollout(
                client,
                model,
                prompt,
                completion=completion,
                answer=answer,
                state=state,
                task=task,
                info=info,
                example_id=example_id,
                sampling_args=sampling_args,
                **kwargs,
            )

    async def run_rollouts(
        self,
        client: AsyncOpenAI | OpenAI,
        model: str,
        prompts: list[Messages],
        completions: list[Messages] | None = None,
        answers: list[str] | None = None,
        states: list[State] | None = None,
        tasks: list[str] | None = None,
        infos: list[Info] | None = None,
        example_ids: list[int] | None = None,
        sampling_args: SamplingArgs | None = None,
        max_concurrent: int | None = -1,
        semaphore: asyncio.Semaphore | None = None,
        use_tqdm: bool = False,
        **kwargs: Any,
    ) -> list[tuple[Messages, State]]:
        """Many rollouts at once, unscored, as `(completion, state)` in input order.

        Columns left out (or empty) take their defaults; `generate` is the usual
        entry point, this is the lower-level call verifiers trainers make. A
        rollout that raises ends with `state["error"]`; the others go on.
        """
        return await run_unscored_rollouts(
            self,
            client,
            model,
            prompts,
            completions,
            answers,
            states,
            tasks,
            infos,
            example_ids,
            sampling_args,
            max_concurrent,
            semaphore,
            use_tqdm,
            kwargs,
        )

    # --------------------------------------------------- generate / evaluate

    async def generate(
        self,
        inputs: GenerateInputs | DatasetLike | Mapping[str, list[Any]],
        client: AsyncOpenAI | OpenAI,
        model: str,
        sampling_args: SamplingArgs | None = None,
        num_examples: int | None = None,
        rollouts_per_example: int | None = None,
        score_rollouts: bool = True,
        max_concurrent: int = -1,
        results_path: str | Path | None = None,
        state_columns: list[str] | None = None,
        resume: bool = False,
        use_tqdm: bool = False,
        on_result: Callable[[dict[str, Any]], Awaitable[None] | None] | None = None,
        **kwargs: Any,
    ) -> GenerateOutputs:
        """Run one rollout per input row, concurrently, and score each as it ends.

        Inputs keep their order in the outputs, so the copies of one example stay
        adjacent (group order, as GRPO needs). `rollouts_per_example` does not
        repeat rows: it says the rows come in groups of that many adjacent copies
        of one example (sharing its `example_id`), as
        `get_eval_inputs(n, rollouts_per_example)` makes them, and sets how
        `num_examples` slices the rows and what the metadata counts. Rows that are
        not such groups, or a count below 1, are refused before anything runs;
        `evaluate` repeats the rows itself. With `results_path` every finished
        rollout is appended to `results.jsonl` there as it ends, and `resume=True`
        skips the rollouts already in that file. `on_result(record)` sees each
        result record as it is recorded (a coroutine function is awaited); if it
        raises, the batch still finishes and then raises `ResultCallbackError`,
        whose `outputs` are what this would have returned. A rubric with a
        `score_group` hook scores, records and delivers each example's group together
        once its last rollout ends (see `vfgym.engine.runner.run_batch`).

        `metrics` has one column per metric any rollout has; NaN marks no value (a
        reward function that failed, a rollout that errored, a metric of another
        task's rubric in an EnvGroup), as in `Rubric.score_rollouts`. It is never
        0.0, which would be a score the rollout did not get: average a column with a
        NaN-aware mean (`numpy.nanmean`), as vfgym's summaries do.
        """
        from vfgym.engine.runner import run_batch

        return await run_batch(
            self,
            inputs,
            client=client,
            model=model,
            sampling_args=sampling_args,
            num_examples=num_examples,
            # None is the default; 0 or less is refused by run_batch, not read as 1.
            rollouts_per_example=1 if rollouts_per_example is None else rollouts_per_example,
            score_rollouts=score_rollouts,
            max_concurrent=max_concurrent,
            results_path=results_path,
            state_columns=state_columns,
            resume=resume,
            use_tqdm=use_tqdm,
            on_result=on_result,
            **compat_generate_kwargs(kwargs),
        )

    def generate_sync(
        self,
        inputs: GenerateInputs | DatasetLike | Mapping[str, list[Any]],
        client: AsyncOpenAI | OpenAI,
        model: str,
        sampling_args: SamplingArgs | None = None,
        **kwargs: Any,
    ) -> GenerateOutputs:
        """`generate` for sync code; works inside a running event loop too (notebooks)."""

        async def run() -> GenerateOutputs:
            async with loop_local_client(client) as local:
                return await self.generate(inputs, local, model, sampling_args, **kwargs)

        return run_sync(run())

    def get_eval_inputs(
        self,
        num_examples: int | None = -1,
        rollouts_per_example: int | None = 1,
        seed: int | None = None,
    ) -> list[dict[str, Any]]:
        """The evaluation rows, each repeated `rollouts_per_example` times in a row
        (None: once, as `generate` reads it)."""
        per = 1 if rollouts_per_example is None else rollouts_per_example
        per = check_rollouts_per_example(per)
        rows = self.get_eval_dataset(n=check_num_examples(num_examples), seed=seed)
        return [row for row in rows for _ in range(per)]

    async def evaluate(
        self,
        client: AsyncOpenAI | OpenAI,
        model: str,
        sampling_args: SamplingArgs | None = None,
        num_examples: int = -1,
        rollouts_per_example: int = 1,
        score_rollouts: bool = True,
        max_concurrent: int = -1,
        results_path: str | Path | None = None,
        state_columns: list[str] | None = None,
        resume: bool = False,
        **kwargs: Any,
    ) -> GenerateOutputs:
        """Evaluate the model on the evaluation rows (training rows if there are none)."""
        inputs = self.get_eval_inputs(num_examples, rollouts_per_example)
        return await self.generate(
            inputs,
            client=client,
            model=model,
            sampling_args=sampling_args,
            rollouts_per_example=1 if rollouts_per_example is None else rollouts_per_example,
            score_rollouts=score_rollouts,
            max_concurrent=max_concurrent,
            results_path=results_path,
            state_columns=state_columns,
            resume=resume,
            **kwargs,
        )

    def evaluate_sync(
        self,
        client: AsyncOpenAI | OpenAI,
        model: str,
        sampling_args: SamplingArgs | None = None,
        num_examples: int = -1,
        rollouts_per_example: int = 1,
        **kwargs: Any,
    ) -> GenerateOutputs:
        """`evaluate` for sync code; works inside a running event loop too (notebooks)."""

        async def run() -> GenerateOutputs:
            async with loop_local_client(client) as local:
                return await self.evaluate(
                    local,
                    model,
                    sampling_args,
                    num_examples=num_examples,
                    rollouts_per_example=rollouts_per_example,
                    **kwargs,
                )

        return run_sync(run())

    # ------------------------------------------------------------ training

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
        """Token ids, masks and logprobs for training (see `vfgym.training.processing`)."""
        from vfgym.training.processing import process_env_results

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
            oai_tools=self.oai_tools,
        )

    def process_env_results_vllm(
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
        """`process_env_results` under its verifiers name, the one trainers call.

        A method that calls `self.process_env_results`, not an alias of it, so a
        subclass that overrides `process_env_results` (EnvGroup does) is used
        whichever name the trainer calls.
        """
        return self.process_env_results(
            prompts,
            completions,
            states,
            rewards,
            processing_class,
            max_seq_len=max_seq_len,
            mask_env_responses=mask_env_responses,
            mask_truncated_completions=mask_truncated_completions,
            zero_truncated_completions=zero_truncated_completions,
            **kwargs,
        )


__all__ = ["Environment", "errored_state", "fill_state_defaults", "new_state"]
