"""Dataset rows: accept what users have, hand the engine plain dicts.

Rows are kept as a list of dicts rather than an Arrow table: the engine reads
them one at a time on the hot path, and game `info` dicts vary in shape from row
to row, which a columnar schema would reject or pad.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Union

from vfgym.types import ChatMessage, Messages, MessageType

if TYPE_CHECKING:
    import datasets

DatasetLike = Union["datasets.Dataset", list[dict[str, Any]], tuple[dict[str, Any], ...]]


def to_rows(data: Any) -> list[dict[str, Any]]:
    """A list of row dicts from a `datasets.Dataset`, a list of dicts or a dict of columns."""
    if isinstance(data, list | tuple):
        bad = next((i for i, row in enumerate(data) if not isinstance(row, Mapping)), None)
        if bad is not None:
            raise TypeError(f"dataset row {bad} is {type(data[bad]).__name__}, expected a dict")
        return [dict(row) for row in data]
    if isinstance(data, Mapping):
        columns = {k: list(v) for k, v in data.items() if v is not None}
        lengths = {len(v) for v in columns.values()}
        if len(lengths) > 1:
            raise ValueError(
                "dataset columns have different lengths: "
                f"{ {k: len(v) for k, v in columns.items()} }"
            )
        n = lengths.pop() if lengths else 0
        return [{k: v[i] for k, v in columns.items()} for i in range(n)]
    to_list = getattr(data, "to_list", None)
    if callable(to_list):  # datasets.Dataset
        return list(to_list())
    raise TypeError(
        f"a dataset must be a datasets.Dataset, a list of dicts or a dict of columns, "
        f"not {type(data).__name__}"
    )


def build_prompt(
    question: str,
    system_prompt: str | None = None,
    few_shot: Iterable[ChatMessage] | None = None,
) -> list[ChatMessage]:
    """The chat prompt for one question: system prompt, few-shot turns, the question."""
    messages: list[ChatMessage] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    if few_shot:
        messages.extend(dict(m) for m in few_shot)  # type: ignore[misc]
    messages.append({"role": "user", "content": question})
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
    """A dataset prompt's chat message as a dict of its own, without the `None` keys
    Arrow pads every message with (a `datasets.Dataset` gives each message every key
    any message has): a real server refuses `"name": null`, a chat template renders it.
    `content` is kept even when None (an assistant turn that only calls tools)."""
    if not isinstance(message, Mapping):
        raise TypeError(
            f"dataset row {row}: 'prompt' item {item} is {type(message).__name__}, expected a "
            "chat message dict such as {'role': 'user', 'content': '...'} (or give the "
            "prompt as one text)"
        )
    return {k: v for k, v in message.items() if v is not None or k == "content"}  # type: ignore[return-value]


def _with_system_prompt(prompt: list[ChatMessage], system_prompt: str | None) -> list[ChatMessage]:
    if system_prompt and not (prompt and prompt[0].get("role") == "system"):
        return [{"role": "system", "content": system_prompt}, *prompt]
    return list(prompt)


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


def format_rows(
    rows: list[dict[str, Any]],
    *,
    message_type: MessageType,
    system_prompt: str | None = None,
    few_shot: list[ChatMessage] | None = None,
) -> list[dict[str, Any]]:
    """Give every row `prompt`, `answer`, `info`, `task` and `example_id`.

    A row brings either a ready `prompt` or a `question` to wrap in the chat
    format; other columns are kept as they are.
    """
    formatted = []
    for i, row in enumerate(rows):
        out = dict(row)
        prompt: Messages | None = out.get("prompt")
        if prompt is None:
            if "question" not in out:
                raise ValueError(
                    f"dataset row {i} has neither 'prompt' nor 'question' "
                    f"(its columns: {sorted(out)})"
                )
            if out["question"] is None:
                raise ValueError(
                    f"dataset row {i} has no question (its 'question' is None); give each "
                    "row a question, or a ready 'prompt'"
                )
            question = str(out["question"])
            prompt = (
                build_prompt(question, system_prompt, few_shot)
                if message_type == "chat"
                else question
            )
        elif message_type == "chat":
            if isinstance(prompt, str):
                prompt = build_prompt(prompt, system_prompt, few_shot)
            else:
                messages = [_message(m, i, j) for j, m in enumerate(prompt)]
                prompt = _with_system_prompt(messages, system_prompt)
        elif not isinstance(prompt, str):
            raise ValueError(f"dataset row {i}: message_type='completion' needs a text prompt")
        out["prompt"] = prompt
        out["answer"] = "" if out.get("answer") is None else str(out["answer"])
        out["info"] = _parse_info(out.get("info"))
        out["task"] = out.get("task") or "default"
        out.setdefault("example_id", i)
        formatted.append(out)
    return formatted
