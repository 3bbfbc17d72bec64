"""A batch's inputs: rows normalised and checked before any rollout starts.

Split from `runner.py`: everything `generate` refuses (a malformed prompt, an
opening of the wrong form, rows that are not groups of `rollouts_per_example`, a
count that is not a whole number) is refused here, before a request is made or a
results file is written, and the scheduler only ever sees rows that are fine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sized
from typing import TYPE_CHECKING, Any

from vfgym.engine.data import answer_text, row_count, row_info, task_name, to_rows
from vfgym.inference.messages import check_message
from vfgym.types import GenerateInputs

if TYPE_CHECKING:
    from vfgym.envs.environment import Environment


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


def check_rollouts_per_example(rollouts_per_example: Any) -> int:
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


def check_num_examples(num_examples: Any) -> int | None:
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


def check_groups(rows: list[dict[str, Any]], rollouts_per_example: int) -> None:
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


def check_max_concurrent(max_concurrent: Any) -> int:
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


def size_hint(inputs: Any) -> int:
    """How many rows `inputs` holds, as far as that is cheap to tell (0 when not)."""
    if isinstance(inputs, GenerateInputs):
        return len(inputs.prompt)
    if isinstance(inputs, Mapping):
        column = inputs.get("prompt", inputs.get("question"))
        return len(column) if isinstance(column, Sized) else 0
    return len(inputs) if isinstance(inputs, Sized) else 0
