"""The batch scheduler behind `generate` and `evaluate`.

Each rollout is one task that plays, scores and records itself as soon as it
ends, so a result line is on disk the moment a rollout is done, and one slow
rollout never holds back the scoring of the others. The exception is a rubric
with a `score_group` hook (ranking, voting): there the rollouts of one example
are scored and recorded together once the last of them ends. Inputs in, outputs
out, no process-global state: a batch can be sharded across workers as it is.

This module is the per-rollout work (play, score, record, deliver); the inputs'
checks are in `batch_inputs.py`, the client handling in `clients.py`, when rollouts
start in `launch.py`, and what a batch reports in `batch_results.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from openai import AsyncOpenAI, OpenAI

from vfgym.engine.batch_inputs import (
    check_groups,
    check_max_concurrent,
    check_num_examples,
    check_rollouts_per_example,
    normalize_inputs,
    size_hint,
)
from vfgym.engine.batch_results import (
    NAN,
    callback_error,
    incomplete_groups,
    metric_columns,
    summarize,
)
from vfgym.engine.breaker import DEFAULT_BREAKER_THRESHOLD, CircuitBreaker, breaker_of_run
from vfgym.engine.clients import as_async_client, loop_local_client
from vfgym.engine.gcpolicy import AUTO_FREEZE_ROLLOUTS, frozen_gc
from vfgym.engine.launch import launch, progress_bar
from vfgym.engine.seeds import seeded_sampling_args
from vfgym.engine.state import errored_state
from vfgym.errors import error_record
from vfgym.results.jsonl import ResultsWriter, inputs_digest, make_record
from vfgym.types import GenerateOutputs, SamplingArgs, State

if TYPE_CHECKING:
    from vfgym.envs.environment import Environment


class RemoteGroups(Protocol):
    """Plays whole groups elsewhere (a Ray cluster's workers, `vfgym.cluster`): given
    the rows of one group, it returns their result records, played and scored. The
    batch writes them itself, so a cluster run's results.jsonl, resume and summary
    are a local run's."""

    async def run_group(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]: ...

    def describe(self) -> dict[str, Any]:
        """What metadata.json records about where the groups ran."""
        ...


async def run_batch(
    env: Environment,
    inputs: Any,
    *,
    client: AsyncOpenAI | OpenAI,
    model: str,
    sampling_args: SamplingArgs | None = None,
    num_examples: int | None = None,
    rollouts_per_example: int = 1,
    score_rollouts: bool = True,
    max_concurrent: int | None = -1,
    semaphore: asyncio.Semaphore | None = None,
    results_path: str | Path | None = None,
    state_columns: list[str] | None = None,
    resume: bool = False,
    use_tqdm: bool = False,
    on_result: Callable[[dict[str, Any]], Awaitable[None] | None] | None = None,
    gc_freeze: bool | None = None,
    remote: RemoteGroups | None = None,
    max_connection_failures: int = DEFAULT_BREAKER_THRESHOLD,
) -> GenerateOutputs:
    """Run, score and record every input row, once each; see `Environment.generate`.

    With `remote`, each group (all `rollouts_per_example` copies of an example) is
    played and scored by `remote.run_group` and its lines are written here together
    as it comes back; a resume then plays again any group not whole in the file.

    The rows must come in groups of `rollouts_per_example` copies of one example
    (see `check_groups`); this is checked before any rollout starts.

    `on_result` gets each rollout's result record as soon as it is recorded. If
    it raises, nothing is lost and nothing stops: the batch goes on, offering it
    every later result, writes everything, and then raises `ResultCallbackError`
    (its `outputs` are the return value, its `errors` the callback's exceptions,
    chained from the first). A callback therefore cannot stop a batch by raising;
    cancel the task running it instead. Rollouts restored by `resume` are not
    offered to it again.

    A `seed` in the sampling arguments seeds each rollout with its own seed derived
    from it and the rollout's index (see `vfgym.engine.seeds`): copies differ, a
    rerun repeats. After `max_connection_failures` rollouts in a row could not reach
    the server, the rollouts not yet started end errored at once (see
    `vfgym.engine.breaker`) and the run's status is "stopped"; it is "complete" when
    no rollout errored and "complete_with_errors" otherwise.

    `gc_freeze` keeps garbage-collector pauses short while the batch runs (see
    `vfgym.engine.gcpolicy`); None turns it on for batches of 1,000 rollouts or more.

    A rubric with a `score_group` hook (`env.rubric.has_group_hook()`) is scored
    per group, when scoring is on: once every rollout of an example (its
    `rollouts_per_example` adjacent rows) has ended, the hook runs over their
    states, errored ones included, with the columns `Rubric.score_rollouts`
    passes, then each rollout that did not error is scored (an errored one gets
    NaN), and then the group's lines are written and offered to `on_result`
    together. A group is written only whole, so an interrupted run never leaves
    part of one; a resume plays again in full any group it does not find whole
    and without error in results.jsonl (a group with an errored rollout, or a
    line lost to a kill), since the group's rewards come from one hook over the
    whole group and a restored line keeps only part of its State. A hook that
    raises errors its group's rollouts. Without a hook, each rollout is scored
    and recorded the moment it ends.
    """
    per = check_rollouts_per_example(rollouts_per_example)
    examples = check_num_examples(num_examples)
    limit_workers = check_max_concurrent(max_concurrent)
    # Copying ten thousand input rows allocates enough to set off a full collection
    # of everything alive; a large batch freezes first (see vfgym.engine.gcpolicy).
    early_freeze = size_hint(inputs) >= AUTO_FREEZE_ROLLOUTS if gc_freeze is None else gc_freeze
    async with frozen_gc(early_freeze):
        rows = normalize_inputs(env, inputs)
    check_groups(rows, per)  # before any request is made or any file written
    if examples is not None:
        rows = rows[: examples * per]
    n = len(rows)
    aclient = as_async_client(client)
    # Only the async twin of a sync client is ours to close: a `with_options` copy
    # shares the caller's connection pool, and closing it closed the caller's client.
    owned = aclient is not client
    if aclient.max_retries:
        # The RetryPolicy decides retries; the client's own would multiply them.
        aclient = aclient.with_options(max_retries=0)
    started = time.perf_counter()

    # The prompt and info as played (a `setup_state` may add to them), by rollout.
    prompts: list[Any] = [row["prompt"] for row in rows]
    infos: list[Any] = [row["info"] for row in rows]
    completions: list[Any] = [None] * n
    states: list[State] = [{}] * n
    rewards: list[float] = [NAN] * n
    metrics: list[dict[str, float]] = [{}] * n

    merged_args = env.merged_sampling_args(sampling_args)
    breaker = CircuitBreaker(max_connection_failures, str(aclient.base_url))
    metadata = {
        "env_id": env.env_id,
        "env_args": env.env_args,
        "model": model,
        "base_url": str(aclient.base_url),
        "sampling_args": merged_args,
        "num_inputs": n,
        "rollouts_per_example": per,
        "num_examples": n // per,
    }
    writer = None
    if results_path:
        writer = ResultsWriter(
            results_path,
            {**metadata, "inputs_digest": inputs_digest(rows)},
            resume=resume,
            rows=rows,
        )

    # A caller's semaphore is shared with other batches: every rollout takes it.
    # Our own limit is kept by running at most `max_concurrent` workers instead.
    limit = semaphore if semaphore is not None else contextlib.nullcontext()
    workers = limit_workers if semaphore is None else 0
    progress = progress_bar(n, use_tqdm)
    callback_errors: dict[int, BaseException] = {}

    async def deliver(i: int, record: dict[str, Any]) -> None:
        """Hand `record` to `on_result` (awaited when it is a coroutine function); its
        failure is kept for the end, not raised here."""
        assert on_result is not None
        try:
            delivered = on_result(record)
            if inspect.isawaitable(delivered):
                await delivered
        except Exception as exc:
            if not callback_errors:  # say so now: the batch may run for hours yet
                env.logger.warning(
                    "on_result raised on rollout %d (%s: %s); the batch goes on and raises "
                    "ResultCallbackError once every rollout is done",
                    i,
                    type(exc).__name__,
                    exc,
                )
            callback_errors[i] = exc

    async def play(i: int) -> tuple[Any, State]:
        """Roll out row `i`; a custom rollout that raised gives an errored State."""
        row = rows[i]
        prompt = row["prompt"]
        # A given opening completion (GenerateInputs.completion), as `run_rollouts`
        # passes its `completions`: the rollout continues from it.
        opening = row.get("completion")
        async with limit:
            if breaker.tripped:  # the server is gone: no request, no retries
                state = errored_state(
                    env.message_type,
                    prompt,
                    row["answer"],
                    row["task"],
                    row["info"],
                    row["example_id"],
                    breaker.refusal(),
                )
                return state["completion"], state
            try:
                played = await env.rollout(
                    aclient,
                    model,
                    list(prompt) if isinstance(prompt, list) else prompt,
                    list(opening) if isinstance(opening, list) else opening,
                    answer=row["answer"],
                    task=row["task"],
                    info=dict(row["info"]),
                    example_id=row["example_id"],
                    sampling_args=seeded_sampling_args(sampling_args, merged_args, i),
                )
                breaker.record(played[1])
                return played
            except Exception as exc:  # a custom rollout that raised: record, go on
                state = errored_state(
                    env.message_type,
                    prompt,
                    row["answer"],
                    row["task"],
                    row["info"],
                    row["example_id"],
                    exc,
                )
                return state["completion"], state

    async def score(i: int, completion: Any, state: State) -> None:
        """Score rollout `i` (unless it errored or scoring is off) and keep its outputs."""
        row = rows[i]
        prompt, info = row["prompt"], row["info"]
        reward, scores = NAN, {}
        if score_rollouts and not state.get("error"):
            try:
                # What the State holds, as the Gym adapter scores: `setup_state` may have
                # filled in the info or the prompt, and a reward function's `info` and
                # `state["info"]` must agree.
                score = await env.rubric.score_rollout(
                    state.get("prompt", prompt),
                    completion,
                    state.get("answer", row["answer"]),
                    state,
                    task=state.get("task", row["task"]),
                    info=state.get("info", info),
                    example_id=row["example_id"],
                )
                reward, scores = score.reward, dict(score.metrics)
            except Exception as exc:
                state["error"] = error_record(exc)
        state["reward"] = reward
        state["metrics"] = scores
        completions[i], states[i], rewards[i], metrics[i] = completion, state, reward, scores
        prompts[i], infos[i] = state.get("prompt", prompt), state.get("info", info)

    def write(i: int) -> dict[str, Any] | None:
        """Rollout `i`'s result record, appended to results.jsonl when there is one."""
        if writer is None and on_result is None:
            return None
        state = states[i]
        record = make_record(
            i, rows[i], completions[i], state, rewards[i], metrics[i], state_columns
        )
        if writer is not None:
            writer.write(record)
        return record

    async def run_one(i: int) -> None:
        completion, state = await play(i)
        await score(i, completion, state)
        record = write(i)
        if record is not None and on_result is not None:  # (a record whenever on_result)
            await deliver(i, record)
        if progress is not None:
            progress.update(1)

    # Group scoring: a group is scored, written and delivered once its last rollout
    # ends, by the worker that played that one.
    grouped = score_rollouts and env.rubric.has_group_hook()
    playing = dict.fromkeys(range(0, n, per), per) if grouped else {}

    async def run_in_group(i: int) -> None:
        completions[i], states[i] = await play(i)
        start = i - i % per
        playing[start] -= 1
        if playing[start]:
            return
        members = range(start, start + per)
        await _run_group_hook(env, rows, members, completions, states)
        if per == 1:
            await score(start, completions[start], states[start])
        else:
            await asyncio.gather(*(score(j, completions[j], states[j]) for j in members))
        # Every line of the group before any callback: a cancellation (which can only
        # come at an await) never leaves part of a group on disk.
        records = [write(j) for j in members]
        for j, record in zip(members, records, strict=True):
            if record is not None and on_result is not None:
                await deliver(j, record)
            if progress is not None:
                progress.update(1)

    async def run_remote(start: int) -> None:
        """Group `start`, played by `remote`: keep, write and deliver its records."""
        assert remote is not None
        members = range(start, start + per)
        records = await remote.run_group([rows[j] for j in members])
        for j, record in zip(members, records, strict=True):
            record["index"] = j  # the worker numbered them from 0
            restore(j, record)
        if writer is not None:
            for record in records:  # every line of the group before any callback
                writer.write(record)
        for j, record in zip(members, records, strict=True):
            if on_result is not None:
                await deliver(j, record)
            if progress is not None:
                progress.update(1)

    def restore(i: int, record: dict[str, Any]) -> None:
        state = {k: v for k, v in record.items() if k not in ("prompt", "completion", "metrics")}
        state.update(record.get("state") or {})
        state["prompt"], state["completion"] = record["prompt"], record["completion"]
        reward = record.get("reward")
        completions[i], states[i] = record["completion"], state
        prompts[i], infos[i] = record["prompt"], record.get("info", infos[i])
        rewards[i] = NAN if reward is None else float(reward)
        metrics[i] = {k: NAN if v is None else float(v) for k, v in record["metrics"].items()}

    status = "interrupted"
    pending: list[int] = []
    try:
        with writer if writer is not None else contextlib.nullcontext():
            finished = writer.finished if writer is not None else {}
            whole_groups = grouped or remote is not None
            replay = incomplete_groups(finished, n, per) if whole_groups else set()
            for i in range(n):
                done = finished.get(i) if i not in replay else None
                if done is not None:
                    restore(i, done)
                    if progress is not None:
                        progress.update(1)
                else:
                    pending.append(i)
            if writer is not None:
                writer.metadata["resumed_rollouts"] = n - len(pending)
            freeze = len(pending) >= AUTO_FREEZE_ROLLOUTS if gc_freeze is None else gc_freeze
            async with frozen_gc(freeze):
                with breaker_of_run(breaker):
                    if remote is None:
                        await launch(run_in_group if grouped else run_one, pending, workers)
                    else:  # whole groups; the remote side limits how many run at once
                        try:
                            await launch(run_remote, sorted({i - i % per for i in pending}))
                        finally:  # an interrupted run's metadata says where it ran too
                            if writer is not None:
                                writer.metadata.update(remote.describe())
            status = _final_status(states, breaker)
            if writer is not None:
                writer.close(status, summarize(rewards, states))
    finally:
        if progress is not None:
            progress.close()
        if owned and isinstance(aclient, AsyncOpenAI):  # (an async twin is all it owns)
            await aclient.close()

    # The engine built every field itself: validating 10,000 conversations again
    # would hold the event loop for most of a second.
    outputs = GenerateOutputs.model_construct(
        prompt=prompts,
        completion=completions,
        answer=[row["answer"] for row in rows],
        state=states,
        info=infos,
        task=[row["task"] for row in rows],
        reward=rewards,
        metrics=metric_columns(metrics),
        example_id=[row["example_id"] for row in rows],
        metadata={
            **metadata,
            **summarize(rewards, states),
            **(remote.describe() if remote is not None else {}),
            "status": status,
            "duration_s": time.perf_counter() - started,
        },
    )
    if callback_errors:
        error = callback_error(callback_errors, len(pending), outputs, results_path)
        raise error from next(iter(callback_errors.values()))
    return outputs


def _final_status(states: list[State], breaker: CircuitBreaker) -> str:
    """A finished run's status: whether every rollout ran, and whether the server was lost."""
    if breaker.tripped:
        return "stopped"
    if any(isinstance(state, dict) and state.get("error") for state in states):
        return "complete_with_errors"
    return "complete"


async def _run_group_hook(
    env: Environment,
    rows: list[dict[str, Any]],
    members: range,
    completions: list[Any],
    states: list[State],
) -> None:
    """Run the rubric's `score_group` over one example's rollouts (errored ones
    included), with the per-rollout columns `Rubric.score_rollouts` passes.

    A hook that raises fails its group, not the batch: each of the group's rollouts
    not errored already is errored with what the hook raised, so it is reported
    (reward NaN) rather than scored without the hook's results, and a resume plays
    the group again.
    """
    rubric = env.rubric
    group = [states[j] for j in members]
    picked = list(zip(members, group, strict=True))
    try:
        await rubric.offloader.call(
            rubric.score_group,
            group,
            prompts=[s.get("prompt", rows[j]["prompt"]) for j, s in picked],
            completions=[completions[j] for j in members],
            answers=[s.get("answer", rows[j]["answer"]) for j, s in picked],
            tasks=[s.get("task", rows[j]["task"]) for j, s in picked],
            infos=[s.get("info", rows[j]["info"]) for j, s in picked],
            example_ids=[rows[j]["example_id"] for j in members],
        )
    except Exception as exc:
        error = error_record(exc)
        error["message"] = (
            f"{type(rubric).__name__}.score_group raised on the group of example "
            f"{rows[members[0]]['example_id']!r} (rollouts {members[0]} to {members[-1]}): "
            f"{error['message']}; its rollouts are not scored. Fix the hook; a resume "
            "plays the group again"
        )
        for state in group:
            if not state.get("error"):
                state["error"] = dict(error)


__all__ = [
    "RemoteGroups",
    "as_async_client",
    "loop_local_client",
    "normalize_inputs",
    "run_batch",
    "summarize",
]
