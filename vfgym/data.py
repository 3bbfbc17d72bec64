"""Dataset rows: accept what users have, hand the engine plain dicts.

Rows are kept as a list of dicts rather than an Arrow table: the engine reads
them one at a time on the hot path, and game `info` dicts vary in shape from row
to row, which a columnar schema would reject or pad.
"""

from __future__ import annotations

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
                prompt = _with_system_prompt([dict(m) for m in prompt], system_prompt)  # type: ignore[misc]
        elif not isinstance(prompt, str):
            raise ValueError(f"dataset row {i}: message_type='completion' needs a text prompt")
        out["prompt"] = prompt
        out["answer"] = "" if out.get("answer") is None else str(out["answer"])
        out["info"] = _parse_info(out.get("info"))
        out["task"] = out.get("task") or "default"
        out.setdefault("example_id", i)
        formatted.append(out)
    return formatted
