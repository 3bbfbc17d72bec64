"""The public vocabulary: the seed's types, as pydantic models and plain aliases.

Messages and State stay plain dicts and lists on purpose: environments build and
mutate them on every turn, and a dict costs nothing to create, copy or serialise.
The batch-level containers are pydantic models so a result can be validated,
dumped to JSON and loaded back.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable
from typing import Any, Literal, NotRequired, Self

from openai.types.chat import ChatCompletion, ChatCompletionMessageToolCall
from openai.types.chat.chat_completion_tool_param import ChatCompletionToolParam
from openai.types.completion import Completion
from pydantic import BaseModel, ConfigDict, Field, model_validator, with_config
from typing_extensions import TypedDict


@with_config(ConfigDict(extra="allow"))
class ChatMessage(TypedDict, total=False):
    """One chat message in the OpenAI wire format.

    `content` is required by the protocol for every role except an assistant turn
    that only calls tools, so every key is optional here and validated where used.
    It may be content parts (`[{"type": "text", "text": ...}]`, images), as the
    protocol allows and dataset rows accept. Keys beyond these (`reasoning_content`,
    a server's own fields) are kept: a model holding a conversation must not drop
    what the server is sent.
    """

    role: str
    content: str | list[dict[str, Any]] | None
    tool_calls: NotRequired[list[Any]]
    tool_call_id: NotRequired[str]
    name: NotRequired[str]


Message = ChatMessage
Messages = str | list[ChatMessage]
MessageType = Literal["chat", "completion"]
State = dict[str, Any]
Info = dict[str, Any]
SamplingArgs = dict[str, Any]
ModelResponse = ChatCompletion | Completion | None
RewardFunc = Callable[..., float | Awaitable[float]]


def _nan_for_nulls(value: Any) -> Any:
    """A score, or a column of them, with JSON's nulls read as NaN."""
    if value is None:
        return math.nan
    if type(value) is list:
        return [math.nan if item is None else item for item in value]
    return value


class ScoresFromJSON(BaseModel):
    """A model holding `reward` and `metrics`, read back from its own JSON.

    NaN is the "no value" of a reward or a metric (a failed reward function, an
    errored rollout), and JSON has no NaN: `model_dump_json` writes it as null (as
    results.jsonl does). Reading JSON, those nulls are NaN again. Python's None is
    still refused: there it is a scorer's mistake, not a NaN that went through JSON.
    The reading is done here, once per document, not by a validator on every score:
    a rubric builds a `RolloutScore` for every rollout.
    """

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **kwargs: Any) -> Self:
        data = json.loads(json_data)
        if isinstance(data, dict):
            if "reward" in data:
                data["reward"] = _nan_for_nulls(data["reward"])
            metrics = data.get("metrics")
            if isinstance(metrics, dict):
                data["metrics"] = {name: _nan_for_nulls(v) for name, v in metrics.items()}
        return cls.model_validate(data, **kwargs)


class GenerateInputs(BaseModel):
    """A batch of rollout inputs, one entry per rollout (copies of an example adjacent)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    prompt: list[Messages]
    answer: list[str] | None = None
    info: list[dict] | None = None
    task: list[str] | None = None
    completion: list[Messages] | None = None
    example_id: list[int] | None = None


class _Count:
    """Stands for a list in a repr: how many items, not the items."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size

    def __repr__(self) -> str:
        return f"<{self.size} item{'' if self.size == 1 else 's'}>"


def _summarised(value: Any) -> Any:
    if isinstance(value, list):
        return _Count(len(value))
    if isinstance(value, dict) and any(isinstance(v, list) for v in value.values()):
        return {key: _summarised(item) for key, item in value.items()}
    return value


class ColumnsModel(BaseModel):
    """A pydantic model of per-rollout columns, whose repr gives the columns' lengths.

    The full repr of a thousand multi-turn rollouts is megabytes of text: useless
    in a notebook and slow wherever something formats it (`asyncio.run` does, on
    Python 3.11 and 3.12). The data itself is untouched; `model_dump()` has it all.
    """

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            yield name, _summarised(value)


class GenerateOutputs(ColumnsModel, ScoresFromJSON):
    """Everything a batch of rollouts produced, in input order."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    prompt: list[Messages]
    completion: list[Messages]
    answer: list[str]
    state: list[State]
    info: list[Info]
    task: list[str]
    reward: list[float]
    metrics: dict[str, list[float]] = Field(default_factory=dict)
    example_id: list[int] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)


class RolloutScore(ScoresFromJSON):
    """The rubric's verdict on one rollout."""

    reward: float
    metrics: dict[str, float] = Field(default_factory=dict)


class RolloutScores(ColumnsModel, ScoresFromJSON):
    """The rubric's verdicts on many rollouts, column-wise."""

    reward: list[float]
    metrics: dict[str, list[float]] = Field(default_factory=dict)


class ProcessedOutputs(ColumnsModel):
    """Token-level training data: ids, masks and logprobs per rollout.

    Every column has one row per rollout (per exact sample, see `rollout_index`), and
    each mask (and the logprobs) is as long as its ids: a trainer zips them token by
    token, so a short row would mask the wrong tokens with no sign of it. That is
    checked when the model is built.
    `is_truncated`, which the reference does not list, is all False when not given.
    """

    prompt_ids: list[list[int]]
    prompt_mask: list[list[int]]
    completion_ids: list[list[int]]
    completion_mask: list[list[int]]
    completion_logprobs: list[list[float]]
    rewards: list[float]
    is_truncated: list[bool] = Field(default_factory=list)
    #: The rollout each row came from: a rollout whose ids split into several exact
    #: samples gives several rows (see `process_env_results`). 0..n-1 when not given.
    rollout_index: list[int] = Field(default_factory=list)

    @model_validator(mode="after")
    def _columns_line_up(self) -> ProcessedOutputs:
        n = len(self.prompt_ids)
        if not self.is_truncated and "is_truncated" not in self.model_fields_set:
            self.is_truncated = [False] * n
        if not self.rollout_index and "rollout_index" not in self.model_fields_set:
            self.rollout_index = list(range(n))
        _check_rows(self, n)
        for k in range(n):
            _check_tokens(self, k, "prompt_ids", ("prompt_mask",))
            _check_tokens(self, k, "completion_ids", ("completion_mask", "completion_logprobs"))
        return self


def _check_rows(processed: ProcessedOutputs, n: int) -> None:
    """Refuse a column of `processed` whose row count is not `n`, the prompts'."""
    for name in type(processed).model_fields:
        size = len(getattr(processed, name))
        if size != n:
            raise ValueError(
                f"ProcessedOutputs: {name} has {size} row(s) but prompt_ids has {n}; give every "
                "column one row per rollout"
            )


def _check_tokens(processed: ProcessedOutputs, k: int, ids: str, others: tuple[str, ...]) -> None:
    """Refuse rollout `k` when a column in `others` is not as long as its `ids` row."""
    size = len(getattr(processed, ids)[k])
    for name in others:
        length = len(getattr(processed, name)[k])
        if length != size:
            raise ValueError(
                f"ProcessedOutputs: rollout {k}: {ids} has {size} token(s) but {name} "
                f"{length}; give one {name.split('_')[-1]} entry per token id"
            )


__all__ = [
    "ChatCompletion",
    "ChatCompletionMessageToolCall",
    "ChatCompletionToolParam",
    "ChatMessage",
    "Completion",
    "GenerateInputs",
    "GenerateOutputs",
    "Info",
    "Message",
    "MessageType",
    "Messages",
    "ModelResponse",
    "ProcessedOutputs",
    "RewardFunc",
    "RolloutScore",
    "RolloutScores",
    "SamplingArgs",
    "State",
]
