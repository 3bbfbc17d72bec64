"""The batch scheduler behind `generate` and `evaluate`.

Each rollout is one task that plays, scores and records itself as soon as it
ends, so a result line is on disk the moment a rollout is done, and one slow
rollout never holds back the scoring of the others. The exception is a rubric
with a `score_group` hook (ranking, voting): there the rollouts of one example
are scored and recorded together once the last of them ends. Inputs in, outputs
out, no process-global state: a batch can be sharded across workers as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sized
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openai import AsyncOpenAI, DefaultAsyncHttpxClient, OpenAI

from vfgym.engine.data import answer_text, row_count, row_info, task_name, to_rows
from vfgym.engine.gcpolicy import AUTO_FREEZE_ROLLOUTS, frozen_gc
from vfgym.engine.state import errored_state
from vfgym.errors import ResultCallbackError, error_record
from vfgym.inference.messages import check_message
from vfgym.results.jsonl import RESULTS_FILE, ResultsWriter, inputs_digest, make_record
from vfgym.types import GenerateInputs, GenerateOutputs, SamplingArgs, State

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from vfgym.envs.environment import Environment

NAN = float("nan")


def _callback_error(
    errors: dict[int, BaseException],
    delivered: int,
    outputs: GenerateOutputs,
    results_path: str | Path | None,
) -> ResultCallbackError:
    first_index, first = next(iter(errors.items()))
    where = f" and written to {Path(results_path) / RESULTS_FILE}" if results_path else ""
    return ResultCallbackError(
        f"on_result raised for {len(errors)} of {delivered} results (first on rollout "
        f"{first_index}: {type(first).__name__}: {first}); every rollout still finished{where}, "
        "and this error's `outputs` holds what generate would have returned. "
        "Fix the callback, or catch exceptions inside it.",
        errors=errors,
        outputs=outputs,
    )


def normalize_inputs(env: Environment, inputs: Any) -> list[dict[str, Any]]:
    """One row per rollout, with prompt, answer, info, task and example_id.

    Rows without a prompt (or with a None one, as Arrow pads a question row of a
    dataset that mixes both) go through `env.format_dataset`; rows with one keep it
    as given, but it is checked as a dataset's is (see `_check_given_prompt`) and
    their `info` is read the same way (a dict, or the JSON text of one).
    """
    if isinstance(inputs, GenerateInputs):
        inputs = inputs.model_dump(exclude_none=True)
    rows = to_rows(inputs)
    message_type = env.message_type
    if any(row.get("prompt") is None for row in rows):
        formatted = env.format_dataset(rows)
        for i, row in enumerate(formatted):
            if row.get("completion") is not None:
                _check_opening(row["completion"], f"input row {i}", message_type)
        return formatted
    # An EnvGroup routes each row by its task: one naming no member would fail every
    # rollout of it, so it is refused here, as a row without a prompt is when formatted.
    route = getattr(env, "get_env_for_task", None)
    for i, row in enumerate(rows):  # (rows of to_rows are new dicts: changed in place)
        where = f"input row {i}"
        _check_given_prompt(row["prompt"], where, message_type)
        if row.get("completion") is not None:
            _check_opening(row["completion"], where, message_type)
        # The answer and task as a dataset row's become (text), so every row's are str
        # (a text, the usual case, as it is: this runs once per rollout).
        answer, task = row.get("answer"), row.get("task")
        row["answer"] = answer if type(answer) is str else answer_text(answer)
        row["info"] = row_info(row.get("info"), where)
        row["task"] = task if type(task) is str and task else task_name(task, i)
        row.setdefault("example_id", i)
        if route is not None:
            try:
                route(row["task"])
            except KeyError as exc:  # UnknownTaskError
                raise ValueError(f"{where}: {exc.args[0]}") from None
    return rows


def _check_opening(completion: Any, where: str, message_type: str) -> None:
    """Refuse a given opening completion of the wrong form for the environment: the
    rollout would fail on it (or, in chat, render a text as something else)."""
    if message_type == "chat" and not isinstance(completion, list):
        raise TypeError(
            f"{where}: 'completion' (the rollout's opening) is of type "
            f"{type(completion).__name__}; in chat give a list of messages, or leave it out"
        )
    if message_type != "chat" and not isinstance(completion, str):
        raise TypeError(
            f"{where}: 'completion' (the rollout's opening) is of type "
            f"{type(completion).__name__}; with message_type='completion' give one str, "
            "or leave it out"
        )


#: Roles whose message is complete with a role and a text content alone.
_TEXT_ROLES = frozenset({"system", "user", "assistant"})


def _check_given_prompt(prompt: Any, where: str, message_type: str) -> None:
    """Refuse a ready prompt the model server would refuse, naming `where` (its row).

    A dataset's prompts are checked when the environment is built; a prompt given to
    `generate` is kept as given, so it is checked here, before any rollout starts.
    Otherwise every rollout of the row would fail at the server (a 400 that names
    neither the row nor the message) or be rendered by a chat template as something
    else. Each message is checked with `vfgym.inference.messages.check_message`.
    """
    if isinstance(prompt, str):
        return
    if message_type != "chat":
        raise ValueError(
            f"{where}: message_type='completion' needs a text prompt, not a "
            f"{type(prompt).__name__}; give the prompt as one str, or use message_type='chat' "
            "for chat messages"
        )
    if isinstance(prompt, Mapping):
        raise TypeError(
            f"{where}: 'prompt' is one message dict; wrap it in a list, as in "
            "[{'role': 'user', 'content': '...'}] (or give the prompt as one text)"
        )
    if not isinstance(prompt, list | tuple):
        raise TypeError(
            f"{where}: 'prompt' is of type {type(prompt).__name__}; give a list of chat "
            "messages such as [{'role': 'user', 'content': '...'}], or the prompt as one text"
        )
    for j, message in enumerate(prompt):
        if (
            type(message) is dict
            and len(message) == 2
            and message.get("role") in _TEXT_ROLES
            and type(message.get("content")) is str
        ):
            continue  # the usual message, which check_message would pass: no text made
        if not isinstance(message, Mapping):
            raise TypeError(
                f"{where}: 'prompt' item {j} is {type(message).__name__}, expected a chat "
                "message dict such as {'role': 'user', 'content': '...'}"
            )
        check_message(message, f"{where}: 'prompt' item {j}")


def _check_rollouts_per_example(rollouts_per_example: Any) -> int:
    """`rollouts_per_example` checked to be a whole number of at least 1, and returned.

    Reading zero or a negative count as 1 would hide a caller's arithmetic mistake
    behind a run of the wrong size.
    """
    if isinstance(rollouts_per_example, bool) or not isinstance(rollouts_per_example, int):
        raise TypeError(
            f"rollouts_per_example must be a whole number, not {rollouts_per_example!r}"
        )
    if rollouts_per_example < 1:
        raise ValueError(f"rollouts_per_example must be at least 1, not {rollouts_per_example}")
    return rollouts_per_example


def _check_num_examples(num_examples: Any) -> int | None:
    """`num_examples` as a row count, or None for every example (None or -1).

    Zero is refused rather than read: `evaluate` would run nothing and `generate`
    everything, and either hides a caller's mistake behind a run of the wrong size.
    Anything but a whole number is refused as a dataset's row count is.
    """
    if type(num_examples) in (int, float) and num_examples == 0:
        raise ValueError(
            "num_examples=0 asks for no examples; give a positive number, or -1 (None) for all"
        )
    return row_count(num_examples)


def _check_groups(rows: list[dict[str, Any]], rollouts_per_example: int) -> None:
    """Refuse rows that are not groups of `rollouts_per_example` copies of one example.

    `generate` runs one rollout per row; `rollouts_per_example` only says how the
    rows are grouped, and sets `num_examples` slicing and metadata. Rows passed
    once each with `rollouts_per_example=2` would otherwise run once each under
    metadata that counts half the examples there are. A group's copies share an
    `example_id` (the dataset row's index, which `get_eval_inputs` repeats), so
    comparing ids is exact and costs nothing next to a rollout; prompts are not
    compared, since two examples of a game can share a prompt and differ in `info`.
    """
    per = rollouts_per_example
    if per == 1:
        return
    n = len(rows)
    fix = (
        "generate runs one rollout per input row, and rollouts_per_example only says how the "
        "rows are grouped (the copies of one example adjacent, sharing its example_id). Repeat "
        f"each row {per} times in a row, as env.get_eval_inputs(n, {per}) does (or "
        f"env.evaluate(..., rollouts_per_example={per}), which does it for you), or pass "
        "rollouts_per_example=1 to run each row once"
    )
    if n % per:
        raise ValueError(
            f"rollouts_per_example={per}, but the {n} input rows are not groups of {per}: {fix}"
        )
    for start in range(0, n, per):
        first = rows[start].get("example_id", start)
        for j in range(start + 1, start + per):
            other = rows[j].get("example_id", j)
            if other != first:
                raise ValueError(
                    f"rollouts_per_example={per}, but input rows {start} to {start + per - 1} "
                    f"are not copies of one example: rows {start} and {j} have example_ids "
                    f"{first!r} and {other!r} (a row without an example_id is numbered by its "
                    f"position). {fix}"
                )


def _check_max_concurrent(max_concurrent: Any) -> int:
    """`max_concurrent` as a number of workers, 0 for no limit (None, 0 or negative).

    A fraction, a text or a bool failed deep in the scheduler with a TypeError that
    named neither the argument nor what to pass (and True ran one at a time).
    """
    if max_concurrent is None:
        return 0
    if isinstance(max_concurrent, float) and max_concurrent.is_integer():
        max_concurrent = int(max_concurrent)
    if isinstance(max_concurrent, bool) or not isinstance(max_concurrent, int):
        raise TypeError(
            f"max_concurrent must be a whole number of rollouts at a time (-1, 0 or None "
            f"for no limit), not {max_concurrent!r}"
        )
    return max(max_concurrent, 0)


def has_own_http_client(client: AsyncOpenAI | OpenAI) -> bool:
    """True when `client` was made with an `http_client` of the caller's (a proxy, TLS
    settings, a transport), which no copy of the client could rebuild."""
    http = getattr(client, "_client", None)
    if http is None:
        return False
    try:
        from openai._base_client import AsyncHttpxClientWrapper, SyncHttpxClientWrapper
    except ImportError:  # another openai layout: assume the client's own pool
        return False
    return type(http) not in (SyncHttpxClientWrapper, AsyncHttpxClientWrapper)


def as_async_client(client: AsyncOpenAI | OpenAI) -> AsyncOpenAI | OpenAI:
    """An async twin of a sync client, so a batch never parks one thread per request.

    The twin has the same key, base URL, organization, project, timeouts, retries
    and the headers and query parameters the caller added (a gateway's auth
    header, an api-version). A sync client made with an `http_client` of its own
    (a proxy, TLS settings) is returned as it is, since no twin could carry that
    over: its requests then run in worker threads.
    """
    if isinstance(client, AsyncOpenAI) or has_own_http_client(client):
        return client
    return AsyncOpenAI(
        api_key=client.api_key,
        base_url=client.base_url,
        organization=client.organization,
        project=client.project,
        timeout=client.timeout,
        max_retries=client.max_retries,
        default_headers=dict(getattr(client, "_custom_headers", None) or {}) or None,
        default_query=dict(getattr(client, "_custom_query", None) or {}) or None,
    )


@contextlib.asynccontextmanager
async def loop_local_client(
    client: AsyncOpenAI | OpenAI,
) -> AsyncIterator[AsyncOpenAI | OpenAI]:
    """An async client whose connections belong to the running event loop, closed on exit.

    An `AsyncOpenAI` keeps its connection pool bound to the loop that first used
    it, and `generate_sync` / `evaluate_sync` run on a loop of their own each
    time; reusing the caller's pool there fails every request ("Event loop is
    closed", "bound to a different event loop"). So the run gets a copy with a
    fresh pool; key, base URL, headers, query and timeouts are kept. An `http_client`
    of the caller's (a proxy, TLS settings) cannot be: an async one belongs to its own
    loop, which a warning says, and a sync client with one is used as it is (its
    requests run in worker threads) and left open.
    """
    if isinstance(client, AsyncOpenAI):
        if has_own_http_client(client):
            logger.warning(
                "this run has an event loop of its own, where the AsyncOpenAI client's own "
                "http_client (bound to the loop it was used on) cannot serve; its requests "
                "go through a default connection pool, without that http_client's settings "
                "(a proxy, TLS). To keep them, pass a sync OpenAI client made with an "
                "equivalent http_client, or await the async call on the client's loop"
            )
        local = client.copy(http_client=DefaultAsyncHttpxClient())
    elif has_own_http_client(client):
        yield client
        return
    else:
        local = as_async_client(client)
    try:
        yield local
    finally:
        await local.close()


def _metric_columns(scored: list[dict[str, float]]) -> dict[str, list[float]]:
    names: dict[str, None] = {}
    for metrics in scored:
        names.update(dict.fromkeys(metrics))
    return {name: [m.get(name, NAN) for m in scored] for name in names}


def summarize(rewards: list[float], states: list[State]) -> dict[str, Any]:
    """Counts and means for metadata and reports; errored rollouts counted apart."""
    ok = [
        r for r, s in zip(rewards, states, strict=True) if not s.get("error") and not math.isnan(r)
    ]
    return {
        "num_rollouts": len(states),
        "num_errored": sum(1 for s in states if s.get("error")),
        "num_truncated": sum(1 for s in states if s.get("is_truncated")),
        "avg_reward": (sum(ok) / len(ok)) if ok else None,
        "completion_tokens": sum(int(s.get("completion_tokens") or 0) for s in states),
    }


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
) -> GenerateOutputs:
    """Run, score and record every input row, once each; see `Environment.generate`.

    The rows must come in groups of `rollouts_per_example` copies of one example
    (see `_check_groups`); this is checked before any rollout starts.

    `on_result` gets each rollout's result record as soon as it is recorded. If
    it raises, nothing is lost and nothing stops: the batch goes on, offering it
    every later result, writes everything, and then raises `ResultCallbackError`
    (its `outputs` are the return value, its `errors` the callback's exceptions,
    chained from the first). A callback therefore cannot stop a batch by raising;
    cancel the task running it instead. Rollouts restored by `resume` are not
    offered to it again.

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
    per = _check_rollouts_per_example(rollouts_per_example)
    examples = _check_num_examples(num_examples)
    limit_workers = _check_max_concurrent(max_concurrent)
    # Copying ten thousand input rows allocates enough to set off a full collection
    # of everything alive; a large batch freezes first (see vfgym.engine.gcpolicy).
    early_freeze = _size_hint(inputs) >= AUTO_FREEZE_ROLLOUTS if gc_freeze is None else gc_freeze
    async with frozen_gc(early_freeze):
        rows = normalize_inputs(env, inputs)
    _check_groups(rows, per)  # before any request is made or any file written
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

    metadata = {
        "env_id": env.env_id,
        "env_args": env.env_args,
        "model": model,
        "base_url": str(aclient.base_url),
        "sampling_args": env.merged_sampling_args(sampling_args),
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
    progress = _progress_bar(n, use_tqdm)
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
            try:
                return await env.rollout(
                    aclient,
                    model,
                    list(prompt) if isinstance(prompt, list) else prompt,
                    list(opening) if isinstance(opening, list) else opening,
                    answer=row["answer"],
                    task=row["task"],
                    info=dict(row["info"]),
                    example_id=row["example_id"],
                    sampling_args=sampling_args,
                )
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
        if on_result is not None:
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
            replay = _incomplete_groups(finished, n, per) if grouped else set()
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
                await _launch(run_in_group if grouped else run_one, pending, workers)
            status = "complete"
            if writer is not None:
                writer.close(status, summarize(rewards, states))
    finally:
        if progress is not None:
            progress.close()
        if owned:
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
        metrics=_metric_columns(metrics),
        example_id=[row["example_id"] for row in rows],
        metadata={
            **metadata,
            **summarize(rewards, states),
            "status": status,
            "duration_s": time.perf_counter() - started,
        },
    )
    if callback_errors:
        error = _callback_error(callback_errors, len(pending), outputs, results_path)
        raise error from next(iter(callback_errors.values()))
    return outputs


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


def _incomplete_groups(finished: Mapping[int, Any], n: int, per: int) -> set[int]:
    """The rollouts of every group of `per` that `finished` (a resume's restored
    rows) does not hold whole: a group's rewards come from one `score_group` over
    the whole group, so such a group is played again in full."""
    replay: set[int] = set()
    if not finished:
        return replay
    for start in range(0, n, per):
        block = range(start, start + per)
        if any(i not in finished for i in block):
            replay.update(block)
    return replay


def _size_hint(inputs: Any) -> int:
    """How many rows `inputs` holds, as far as that is cheap to tell (0 when not)."""
    if isinstance(inputs, GenerateInputs):
        return len(inputs.prompt)
    if isinstance(inputs, Mapping):
        column = inputs.get("prompt", inputs.get("question"))
        return len(column) if isinstance(column, Sized) else 0
    return len(inputs) if isinstance(inputs, Sized) else 0


LAUNCH_SLICE = 64


async def _launch(run_one: Callable[[int], Any], indices: list[int], limit: int = 0) -> None:
    """Run `run_one` for every index, at most `limit` at a time (no limit when 0).

    Worker tasks take the next index whenever they finish one, which costs less
    than a task per rollout (and a semaphore round trip). They are started a slice
    at a time, and only while indices are left: when this coroutine resumes after
    yielding, every worker still alive is waiting on I/O, so another slice is what
    keeps more rollouts in flight. Rollouts that never wait are all done by the
    first slice; ones that wait get up to `limit` workers, as a task per rollout
    would. Starting a slice, not thousands of tasks, at a time keeps the loop free
    for the rollouts already running. If this is cancelled, every worker is
    cancelled (and each rollout's cleanup runs).
    """
    total = len(indices)
    limit = total if limit <= 0 else min(limit, total)
    taken = 0

    async def worker() -> None:
        nonlocal taken
        while taken < total:
            i = indices[taken]
            taken += 1
            await run_one(i)

    tasks: list[asyncio.Task[Any]] = []
    create_task = asyncio.get_running_loop().create_task  # a quarter cheaper than ensure_future
    try:
        while taken < total and len(tasks) < limit:
            tasks.extend(
                create_task(worker()) for _ in range(min(LAUNCH_SLICE, limit - len(tasks)))
            )
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _progress_bar(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="rollouts", unit="rollout")


__all__ = [
    "as_async_client",
    "loop_local_client",
    "normalize_inputs",
    "run_batch",
    "summarize",
]
