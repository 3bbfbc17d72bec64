"""The wire format of `vfgym serve-env`: OpenEnv's WebSocket protocol, as vfgym speaks it.

One WebSocket connection to `/ws` is one session, one environment episode at a time.
Frames are JSON text, each `{"type": ..., "data": ...}`:

- client → server: `reset` (data: `seed`, `options`, as Gymnasium's `reset` takes
  them), `step` (data: the action), `state`, `close`;
- server → client: `observation` (data: `observation`, `reward`, `done`, `metadata`),
  `state` (data: the episode so far), `error` (data: `message`, `code`).

The error codes are OpenEnv's (`openenv.core.env_server.types.WSErrorCode`), so its
`GenericEnvClient` reports them as it reports its own server's.

An action is the model's turn as an assistant message without its role:
`{"content": "<move>crane</move>"}`, or with `tool_calls` in the OpenAI wire format
for a tool environment. An observation is `{"text": ...}`, Gymnasium's text
observation; `done` is Gymnasium's `terminated or truncated`, and `metadata` keeps
the two apart (`terminated`, `truncated`) beside the episode's `turn` and, on the last
step, its `stop_reason`, `episode_reward` and `metrics`.
"""

from __future__ import annotations

import json
import math
from typing import Any

#: OpenEnv's error codes (the values of its `WSErrorCode`).
INVALID_JSON = "INVALID_JSON"
UNKNOWN_TYPE = "UNKNOWN_TYPE"
VALIDATION_ERROR = "VALIDATION_ERROR"
EXECUTION_ERROR = "EXECUTION_ERROR"
CAPACITY_REACHED = "CAPACITY_REACHED"
FACTORY_ERROR = "FACTORY_ERROR"
SESSION_ERROR = "SESSION_ERROR"

ERROR_CODES = (
    INVALID_JSON,
    UNKNOWN_TYPE,
    VALIDATION_ERROR,
    EXECUTION_ERROR,
    CAPACITY_REACHED,
    FACTORY_ERROR,
    SESSION_ERROR,
)

#: The frame types a client may send.
CLIENT_FRAME_TYPES = ("reset", "step", "state", "close")

#: WebSocket close codes the server ends a session with (RFC 6455 and its registry).
CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001  # the server is shutting down
CLOSE_POLICY = 1008  # idle too long, or refused at connection time
CLOSE_TOO_BIG = 1009  # a frame over the server's limit
CLOSE_TRY_AGAIN = 1013  # at capacity

#: The JSON schema of an action, served by `/schema`.
ACTION_SCHEMA: dict[str, Any] = {
    "title": "ModelTurn",
    "description": "The model's turn: an assistant message without its role.",
    "type": "object",
    "properties": {
        "content": {"type": ["string", "null"], "description": "the model's text"},
        "tool_calls": {
            "type": "array",
            "description": "tool calls in the OpenAI wire format (tool environments)",
            "items": {"type": "object"},
        },
    },
    "additionalProperties": True,
}

#: The JSON schema of an observation, served by `/schema`.
OBSERVATION_SCHEMA: dict[str, Any] = {
    "title": "TextObservation",
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "the environment's new messages' text"}
    },
    "required": ["text"],
}

#: The JSON schema of a `state` frame's data, served by `/schema`.
STATE_SCHEMA: dict[str, Any] = {
    "title": "EpisodeState",
    "type": "object",
    "properties": {
        "episode_id": {"type": ["string", "null"]},
        "step_count": {"type": "integer", "minimum": 0},
        "done": {"type": "boolean"},
        "turn": {"type": "integer"},
        "messages": {"type": "array", "items": {"type": "object"}},
        "stop_reason": {"type": ["string", "null"]},
    },
}


class FrameError(ValueError):
    """A client frame the server cannot act on; `code` is the OpenEnv error code.

    Internal to the server, which answers it with an error frame: never raised to a user.
    """

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def error_frame(message: str, code: str, **extra: Any) -> str:
    """An `error` frame: what went wrong, in a sentence that says what to do."""
    return encode({"type": "error", "data": {"message": message, "code": code, **extra}})


def encode(frame: dict[str, Any]) -> str:
    """`frame` as strict JSON text (NaN and infinity become null, as JSON has neither)."""
    return json.dumps(_finite(frame), separators=(",", ":"), default=_plain)


def parse_client_frame(text: str | bytes) -> tuple[str, dict[str, Any]]:
    """`(type, data)` of a client frame, or FrameError with the code OpenEnv uses."""
    try:
        frame = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise FrameError(
            f"Invalid JSON: {exc}. Send one JSON object per frame, e.g. "
            '{"type": "reset", "data": {"seed": 0}}',
            INVALID_JSON,
        ) from None
    if not isinstance(frame, dict):
        raise FrameError(
            f"a frame must be a JSON object, not {type(frame).__name__}, e.g. "
            '{"type": "step", "data": {"content": "..."}}',
            VALIDATION_ERROR,
        )
    kind = frame.get("type", "")
    if kind not in CLIENT_FRAME_TYPES:
        raise FrameError(
            f"Unknown message type: {kind!r}; send one of {', '.join(CLIENT_FRAME_TYPES)}",
            UNKNOWN_TYPE,
        )
    data = frame.get("data", {})
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FrameError(
            f"a {kind} frame's 'data' must be a JSON object, not {type(data).__name__}",
            VALIDATION_ERROR,
        )
    return kind, data


def reset_arguments(data: dict[str, Any]) -> tuple[int | None, dict[str, Any] | None]:
    """`(seed, options)` of a reset frame's data, checked; FrameError names a bad one.

    Other keys OpenEnv clients send (`episode_id`) are accepted and ignored, as
    OpenEnv's own server ignores keys an environment's `reset` does not take.
    """
    seed = data.get("seed")
    if seed is not None and (type(seed) is not int or seed < 0):
        raise FrameError(
            f"reset 'seed' must be a non-negative integer or null, not {seed!r}",
            VALIDATION_ERROR,
        )
    options = data.get("options")
    if options is not None and not isinstance(options, dict):
        raise FrameError(
            "reset 'options' must be a JSON object (e.g. {\"index\": 3}) or null, not "
            f"{type(options).__name__}",
            VALIDATION_ERROR,
        )
    return seed, options


def action_of(data: dict[str, Any]) -> str | dict[str, Any]:
    """The GymEnv action a step frame's data carries: the text alone when it is
    only text (the fast path of a game), else the assistant message dict."""
    content = data.get("content")
    extra = {key for key in data if key not in ("content", "role", "metadata")}
    if not extra and isinstance(content, str):
        return content
    if not extra and content is None:
        raise FrameError(
            "a step frame's data is the model's turn: give its text as 'content' "
            '(e.g. {"content": "<move>crane</move>"}), with \'tool_calls\' for tool calls',
            VALIDATION_ERROR,
        )
    message = {key: value for key, value in data.items() if key != "metadata"}
    message.setdefault("role", "assistant")
    return message


def action_frame(action: Any) -> dict[str, Any]:
    """The step frame's data for a Gym action: text becomes `{"content": text}`, and a
    message dict (or an openai message object) goes as it is, without its role."""
    if isinstance(action, str):
        return {"content": action}
    if hasattr(action, "model_dump"):
        action = action.model_dump(exclude_none=True)
    if not isinstance(action, dict):
        raise TypeError(
            "an action is the model's text (str) or an assistant message dict, not "
            f"{type(action).__name__}"
        )
    return {key: value for key, value in action.items() if key != "role"}


def observation_data(
    text: str, reward: float | None, terminated: bool, truncated: bool, info: dict[str, Any]
) -> dict[str, Any]:
    """The data of an `observation` frame, from a Gym reset or step."""
    metadata: dict[str, Any] = {
        "terminated": terminated,
        "truncated": truncated,
        "turn": info.get("turn", 0),
    }
    for key in ("stop_reason", "episode_reward", "metrics"):
        if key in info:
            metadata[key] = info[key]
    return {
        "observation": {"text": text},
        "reward": reward,
        "done": terminated or truncated,
        "metadata": metadata,
    }


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def _plain(value: Any) -> Any:
    """A JSON form of what json cannot encode itself (numpy scalars, pydantic models)."""
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return repr(value)
