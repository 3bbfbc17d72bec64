"""The public vocabulary: the seed's types, as pydantic models and plain aliases.

Messages and State stay plain dicts and lists on purpose: environments build and
mutate them on every turn, and a dict costs nothing to create, copy or serialise.
The batch-level containers are pydantic models so a result can be validated,
dumped to JSON and loaded back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, NotRequired

from openai.types.chat import ChatCompletion, ChatCompletionMessageToolCall
from openai.types.chat.chat_completion_tool_param import ChatCompletionToolParam
from openai.types.completion import Completion
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict


class ChatMessage(TypedDict, total=False):
    """One chat message in the OpenAI wire format.

    `content` is required by the protocol for every role except an assistant turn
    that only calls tools, so every key is optional here and validated where used.
    """

    role: str
    content: str | None
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


class GenerateOutputs(ColumnsModel):
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


class RolloutScore(BaseModel):
    """The rubric's verdict on one rollout."""

    reward: float
    metrics: dict[str, float] = Field(default_factory=dict)


class RolloutScores(ColumnsModel):
    """The rubric's verdicts on many rollouts, column-wise."""

    reward: list[float]
    metrics: dict[str, list[float]] = Field(default_factory=dict)


class ProcessedOutputs(ColumnsModel):
    """Token-level training data: ids, masks and logprobs per rollout."""

    prompt_ids: list[list[int]]
    prompt_mask: list[list[int]]
    completion_ids: list[list[int]]
    completion_mask: list[list[int]]
    completion_logprobs: list[list[float]]
    rewards: list[float]
    is_truncated: list[bool] = Field(default_factory=list)


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
