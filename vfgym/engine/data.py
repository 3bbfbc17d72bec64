"""Dataset rows: accept what users have, hand the engine plain dicts.

Rows are kept as a list of dicts rather than an Arrow table: the engine reads
them one at a time on the hot path, and game `info` dicts vary in shape from row
to row, which a columnar schema would reject or pad.
"""

from __future__ import annotations

import copy
import json
import math
import numbers
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Union

from vfgym.inference.messages import check_message
from vfgym.types import ChatMessage, Messages, MessageType

if TYPE_CHECKING:
    import datasets

DatasetLike = Union["datasets.Dataset", list[dict[str, Any]], tuple[dict[str, Any], ...]]


def to_rows(data: Any) -> list[dict[str, Any]]:
    """A list of row dicts from a `datasets.Dataset`, a list of dicts, a dict of columns
    or a pandas DataFrame (whose empty cells are NaN: `format_rows` reads those in the
    columns it knows as missing)."""
    if _is_frame(data):
        return list(data.to_dict(orient="records"))
    if isinstance(data, list | tuple):
        bad = next((i for i, row in enumerate(data) if not isinstance(row, Mapping)), None)
        if bad is not None:
            raise TypeError(f"dataset row {bad} is {type(data[bad]).__name__}, expected a dict")
        return [dict(row) for row in data]
    if isinstance(data, Mapping):
        return _column_rows(data)
    to_list = getattr(data, "to_list", None)
    if callable(to_list):  # datasets.Dataset
        return list(to_list())
    raise TypeError(
        f"a dataset must be a datasets.Dataset, a list of dicts, a dict of columns or a "
        f"pandas DataFrame, not {type(data).__name__}"
    )


def _is_frame(data: Any) -> bool:
    """A pandas DataFrame, recognised without importing pandas."""
    return all(hasattr(type(data), name) for name in ("to_dict", "columns", "iloc"))


#: The columns `format_rows` reads; in these a pandas missing cell means "not given".
_KNOWN_COLUMNS = ("prompt", "question", "answer", "info", "task", "example_id")


def _is_missing(value: Any) -> bool:
    """None, or the way pandas marks an empty cell: NaN, `pd.NA`, `pd.NaT`.

    A frame with one empty answer cell holds NaN there (a column with an empty cell
    becomes floats): read as text it was the answer "nan", the task "nan", or an
    `info` of type float.
    """
    if value is None:
        return True
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        try:
            return math.isnan(value)
        except (TypeError, ValueError, OverflowError):
            return False
    return type(value).__name__ in ("NAType", "NaTType")


def _without_missing(row: dict[str, Any]) -> dict[str, Any]:
    """`row` as a new dict, its known columns' missing markers (see `_is_missing`) None."""
    out = dict(row)
    for key in _KNOWN_COLUMNS:
        if key in out and out[key] is not None and _is_missing(out[key]):
            out[key] = None
    return out


def _column_rows(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rows of a dict of columns, refusing what only looks like one.

    A `DatasetDict` is a dict of splits, and one row given as a dict has a text for
    each column: read as columns, the first became rows of whole splits and the second
    one row per character of its text.
    """
    splits = sorted(k for k, v in data.items() if hasattr(v, "column_names"))
    if splits and len(splits) == len(data):
        first = "train" if "train" in splits else splits[0]
        raise TypeError(
            f"the dataset is a dict of splits {splits} (a DatasetDict); pass one split, "
            f"such as dataset[{first!r}] (and another as eval_dataset)"
        )
    columns: dict[str, list[Any]] = {}
    for key, values in data.items():
        if values is None:
            continue
        if isinstance(values, str | bytes | Mapping) or not (
            hasattr(values, "__len__") and hasattr(values, "__iter__")
        ):
            raise TypeError(
                f"dataset column {key!r} is one {type(values).__name__}, not a list: a dict of "
                "columns gives each column one value per row, as in {'question': ['q1', "
                "'q2'], 'answer': ['a1', 'a2']}; to give rows, pass a list of rows, as in "
                "[{'question': 'q1', 'answer': 'a1'}]"
            )
        columns[key] = list(values)
    lengths = {len(v) for v in columns.values()}
    if len(lengths) > 1:
        raise ValueError(
            "dataset columns have different lengths: "
            f"{ {k: len(v) for k, v in columns.items()} }; give each column one value per row"
        )
    n = lengths.pop() if lengths else 0
    return [{k: v[i] for k, v in columns.items()} for i in range(n)]


def build_prompt(
    question: str,
    system_prompt: str | None = None,
    few_shot: Iterable[ChatMessage] | None = None,
) -> list[ChatMessage]:
    """The chat prompt for one question: system prompt, few-shot turns, the question.

    The system prompt and the few-shot turns are checked first, so a bad one is
    refused here, saying what to give, rather than sent to the server.
    """
    _check_system_prompt(system_prompt)
    return _built_prompt(question, system_prompt, _few_shot_messages(few_shot))


def _built_prompt(
    question: str, system_prompt: str | None, few_shot: list[ChatMessage]
) -> list[ChatMessage]:
    """`build_prompt` with its parts already checked: `format_rows` checks them once
    for the whole dataset, not once per row."""
    messages: list[ChatMessage] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    messages.extend(dict(m) for m in few_shot)  # type: ignore[misc]
    messages.append({"role": "user", "content": question})
    return messages


def _check_system_prompt(system_prompt: Any) -> None:
    """A system prompt is text; anything else would be sent as the message's content."""
    if system_prompt is not None and not isinstance(system_prompt, str):
        raise TypeError(
            f"system_prompt must be text (a str), not {type(system_prompt).__name__}; for "
            "several messages before each question, use few_shot"
        )


def _few_shot_messages(few_shot: Any) -> list[ChatMessage]:
    """The few-shot turns as checked chat messages (without Arrow's None padding, as a
    `datasets.Dataset` of them gives), or a TypeError/ValueError saying what to give.

    A text or one message dict would otherwise be read one character or key at a time.
    """
    if not few_shot:
        return []
    example = "[{'role': 'user', 'content': 'What is 1+1?'}, {'role': 'assistant', 'content': '2'}]"
    if isinstance(few_shot, str | bytes):
        raise TypeError(
            f"few_shot is a {type(few_shot).__name__}; give a list of chat messages: {example}"
        )
    if isinstance(few_shot, Mapping):
        raise TypeError(f"few_shot is one message dict; wrap it in a list: {example}")
    messages = []
    for i, message in enumerate(few_shot):
        where = f"few_shot item {i}"
        if not isinstance(message, Mapping):
            shown = repr(message) if isinstance(message, str) else f"a {type(message).__name__}"
            raise TypeError(
                f"{where} is {shown}, expected a chat message dict; few_shot is a list of "
                f"messages: {example}"
            )
        messages.append(_unpadded(message, where))
    return messages


#: Types `fresh_copy` hands back as they are (immutable).
_SCALARS = frozenset({str, int, float, bool, type(None)})


def fresh_copy(value: Any) -> Any:
    """A deep copy of JSON-like data (dicts, lists, scalars), several times faster than
    `copy.deepcopy` on the small `info` dicts every rollout copies; other objects still
    go through `copy.deepcopy`, and one that cannot be copied (a lock, a client) is
    shared, as a live resource is meant to be.

    Each rollout gets its own copy of its row's `info`, so a game that deals from
    `info["deck"]` in place changes neither the dataset nor the example's other copies.
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {k: v if type(v) in _SCALARS else fresh_copy(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _SCALARS else fresh_copy(v) for v in value]
    try:
        return copy.deepcopy(value)
    except Exception:  # uncopyable: the row's own object, as before copies were made
        return value


def _message(message: Any, row: int, item: int) -> ChatMessage:
    """A dataset prompt's chat message as a dict of its own, checked (see
    `vfgym.inference.messages.check_message`) and without Arrow's None padding (see `_unpadded`)."""
    if not isinstance(message, Mapping):
        raise TypeError(
            f"dataset row {row}: 'prompt' item {item} is {type(message).__name__}, expected a "
            "chat message dict such as {'role': 'user', 'content': '...'} (or give the "
            "prompt as one text)"
        )
    return _unpadded(message, f"dataset row {row}: 'prompt' item {item}")


def _unpadded(message: Mapping[str, Any], where: str) -> ChatMessage:
    """`message` as a dict of its own without the `None` keys Arrow pads every message
    and every content part with (a `datasets.Dataset` gives each one every key any of
    them has): a real server refuses `"name": null` or a text part's `"image_url": null`,
    a chat template renders them. `content` is kept even when None (an assistant turn
    that only calls tools); an empty `tool_calls` (no calls, which OpenAI refuses) is
    dropped. Then checked, naming `where` in the error."""
    out = {k: v for k, v in message.items() if v is not None or k == "content"}
    if isinstance(out.get("tool_calls"), list | tuple) and not out["tool_calls"]:
        del out["tool_calls"]
    content = out.get("content")
    if isinstance(content, list):
        out["content"] = [
            {k: v for k, v in part.items() if v is not None} if isinstance(part, Mapping) else part
            for part in content
        ]
    check_message(out, where)
    return out  # type: ignore[return-value]


def _with_system_and_few_shot(
    prompt: list[ChatMessage], system_prompt: str | None, few_shot: list[ChatMessage]
) -> list[ChatMessage]:
    """A ready chat prompt with the environment's system prompt (unless it has a system
    message of its own) and few-shot turns (after its leading system messages, unless
    it already has them there), so that it gets them as a question's prompt does, once:
    formatting a formatted row again adds nothing."""
    if system_prompt and not (prompt and prompt[0].get("role") == "system"):
        prompt = [{"role": "system", "content": system_prompt}, *prompt]
    else:
        prompt = list(prompt)
    if few_shot:
        at = 0
        while at < len(prompt) and prompt[at].get("role") in ("system", "developer"):
            at += 1
        if prompt[at : at + len(few_shot)] != few_shot:
            prompt[at:at] = [dict(m) for m in few_shot]  # type: ignore[misc]
    return prompt


def _parse_info(info: Any) -> dict[str, Any]:
    if info is None:
        return {}
    if isinstance(info, str):  # Arrow-backed datasets often store info as JSON text
        try:
            info = json.loads(info) if info.strip() else {}
        except json.JSONDecodeError:
            raise ValueError(f"a row's 'info' is text that is not JSON: {info[:80]!r}") from None
    if not isinstance(info, Mapping):
        raise TypeError(f"a row's 'info' must be a dict, not {type(info).__name__}")
    return dict(info)


def row_info(info: Any, where: str) -> dict[str, Any]:
    """A row's `info` as a dict, or an error that names the row (`where`, such as
    "dataset row 3") and says what to give: dataset rows and generate's inputs with
    ready prompts are read alike."""
    try:
        return _parse_info(info)
    except (TypeError, ValueError) as exc:
        given = f"a {type(info).__name__}"
        if isinstance(info, str):
            not_json = " (not JSON)" if isinstance(exc, ValueError) else ""
            given = f"the text {info[:80]!r}{not_json}"
        raise type(exc)(
            f"{where}: 'info' must be a dict or the JSON text of one (such as "
            f"'{{\"level\": 2}}'), not {given}"
        ) from None


def _question(row: dict[str, Any], index: int) -> str:
    """Row `index`'s question as text: numbers are written out; a list or a dict (chat
    messages given under the wrong name) would be sent as its Python repr."""
    if "question" not in row:
        raise ValueError(
            f"dataset row {index} has neither 'prompt' nor 'question' (its columns: {sorted(row)})"
        )
    question = row["question"]
    if question is None:
        raise ValueError(
            f"dataset row {index} has no question (its 'question' is None, or an empty "
            "cell of a DataFrame); give each row a question, or a ready 'prompt'"
        )
    if isinstance(question, str):
        return question
    if isinstance(question, numbers.Number):
        return str(question)
    raise TypeError(
        f"dataset row {index}: 'question' is a {type(question).__name__}; a question is the "
        "user's text (a str). Chat messages go in a column named 'prompt' instead"
    )


def _chat_prompt(
    prompt: Any,
    index: int,
    system_prompt: str | None,
    few_shot: list[ChatMessage],
) -> list[ChatMessage]:
    """Row `index`'s ready chat prompt (text, or a list of messages), checked, with the
    environment's system prompt and few-shot turns. Any sequence of messages is taken
    (a list column read through pandas is a numpy array)."""
    if isinstance(prompt, str):
        return _built_prompt(prompt, system_prompt, few_shot)
    if isinstance(prompt, Mapping):
        raise TypeError(
            f"dataset row {index}: 'prompt' is one message dict; wrap it in a list, as in "
            "[{'role': 'user', 'content': '...'}] (or give the prompt as one text)"
        )
    if isinstance(prompt, bytes) or not (
        hasattr(prompt, "__len__") and hasattr(prompt, "__iter__")
    ):
        raise TypeError(
            f"dataset row {index}: 'prompt' is of type {type(prompt).__name__}; give a list of "
            "chat messages such as [{'role': 'user', 'content': '...'}], or the prompt as "
            "one text"
        )
    if len(prompt) == 0:
        raise ValueError(
            f"dataset row {index}: 'prompt' has no messages; give at least the user's turn, "
            "as in [{'role': 'user', 'content': '...'}], or a 'question'"
        )
    messages = [_message(m, index, j) for j, m in enumerate(prompt)]
    return _with_system_and_few_shot(messages, system_prompt, few_shot)


def answer_text(answer: Any) -> str:
    """The answer as the text reward functions compare: a dict or a list as JSON (which
    `json.loads` reads back; its Python repr would not be), anything else as `str`."""
    if answer is None:
        return ""
    if isinstance(answer, str):
        return answer
    if isinstance(answer, Mapping | list | tuple):
        try:
            return json.dumps(answer, ensure_ascii=False)
        except (TypeError, ValueError):  # not JSON data (numpy values, objects)
            return str(answer)
    return str(answer)


def task_name(task: Any, index: int) -> str:
    """The row's task name: "default" when it has none; a number (a task id) as its
    text, so a task 0 is not read as none."""
    if task is None or task == "":
        return "default"
    if isinstance(task, str):
        return task
    if isinstance(task, numbers.Number):
        return str(task)
    raise TypeError(
        f"dataset row {index}: 'task' is a {type(task).__name__}; a task is a name (a str) "
        "such as 'math', or leave it out for 'default'"
    )


def _check_example_ids(rows: list[dict[str, Any]]) -> None:
    """Refuse a dataset that gives some rows an `example_id` and not others, or two
    rows the same one.

    A row without one is numbered by its position, which can be the id another row
    was given (results and summaries would then merge two examples); Arrow gives such
    a row None.
    """
    given = next((i for i, row in enumerate(rows) if row.get("example_id") is not None), None)
    if given is None:
        return
    missing = next((i for i, row in enumerate(rows) if row.get("example_id") is None), None)
    if missing is not None:
        raise ValueError(
            f"dataset row {given} has an example_id and row {missing} has none; give every "
            "row an example_id, or none (rows are then numbered by their position)"
        )
    first_row: dict[Any, int] = {}
    for i, row in enumerate(rows):
        example_id = row["example_id"]
        try:
            earlier = first_row.setdefault(example_id, i)
        except TypeError:  # unhashable: refused with its type when the row is formatted
            continue
        if earlier != i:
            raise ValueError(
                f"dataset rows {earlier} and {i} have the same example_id {example_id!r}; "
                "give each example its own id (results, pass@k and resumes group rollouts "
                "by it), or leave example_id out to number rows by their position"
            )


def format_rows(
    rows: list[dict[str, Any]],
    *,
    message_type: MessageType,
    system_prompt: str | None = None,
    few_shot: list[ChatMessage] | None = None,
) -> list[dict[str, Any]]:
    """Give every row `prompt`, `answer`, `info`, `task` and `example_id`.

    A row brings either a ready `prompt` or a `question` to wrap in the chat
    format; other columns are kept as they are. In the columns read here an empty
    cell of a DataFrame (NaN) counts as not given. Every row is checked here, so a bad
    one is refused when the environment is built, naming the row, rather than by the
    model server on every rollout of it.
    """
    _check_system_prompt(system_prompt)
    shots = _few_shot_messages(few_shot)
    rows = [_without_missing(row) for row in rows]
    _check_example_ids(rows)
    chat = message_type == "chat"
    formatted = []
    for i, out in enumerate(rows):
        prompt: Messages | None = out.get("prompt")
        if prompt is None:
            question = _question(out, i)
            prompt = _built_prompt(question, system_prompt, shots) if chat else question
        elif chat:
            prompt = _chat_prompt(prompt, i, system_prompt, shots)
        elif not isinstance(prompt, str):
            raise ValueError(
                f"dataset row {i}: message_type='completion' needs a text prompt, not a "
                f"{type(prompt).__name__}; give the prompt as one str, or use "
                "message_type='chat' for chat messages"
            )
        out["prompt"] = prompt
        out["answer"] = answer_text(out.get("answer"))
        out["info"] = row_info(out.get("info"), f"dataset row {i}")
        out["task"] = task_name(out.get("task"), i)
        if out.get("example_id") is None:
            out["example_id"] = i
        formatted.append(out)
    return formatted


def row_count(n: Any) -> int | None:
    """`n` rows as an int, or None for all of them (None or a negative number).

    A text or a fraction failed deep inside slicing, and True was read as 1.
    """
    if n is None:
        return None
    if isinstance(n, float) and n.is_integer():
        n = int(n)
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(
            "the row count n must be a whole number of rows (-1 or None for all; "
            f"num_examples when evaluating), not {n!r}"
        )
    return None if n < 0 else n
