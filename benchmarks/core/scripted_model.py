"""The model stand-in both frameworks are measured against.

One decision rule is the "model" everywhere: offered tools and not yet answered
by a tool, it calls the `lookup` tool; otherwise it writes a short answer. The
same rule drives the in-process zero-latency client (`ScriptedClient`, the
headline: what is left is framework overhead) and the policy of the loopback
HTTP server (`http_policy`). This module imports only the standard library and
`openai`, because it is loaded by the vfgym venv and the reference venv alike.
"""

from __future__ import annotations

import asyncio
import json
import random
from types import SimpleNamespace
from typing import Any

import openai
from openai.types.chat import ChatCompletion

ANSWER = "42"
REPLY_TEXT = (
    "Let me think about this step by step. The question asks for the value, and after "
    f"working through it the result is clear. ANSWER: {ANSWER}"
)
TOOL_NAME = "lookup"
TOOL_ARGUMENTS = json.dumps({"key": "answer"})
ENV_REPLY = "Noted. Check your reasoning once more and answer again."


def wants_tool_call(messages: list[dict[str, Any]], tools: Any) -> bool:
    """The model's one decision: call the tool once, then answer."""
    return bool(tools) and bool(messages) and messages[-1].get("role") != "tool"


def _completion_payload(tool_call: bool) -> dict[str, Any]:
    if tool_call:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_0",
                    "type": "function",
                    "function": {"name": TOOL_NAME, "arguments": TOOL_ARGUMENTS},
                }
            ],
        }
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": REPLY_TEXT}
        finish = "stop"
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": 64, "completion_tokens": 32, "total_tokens": 96},
    }


class ScriptedModel:
    """Answers chat requests by the decision rule, with optional simulated latency.

    latency: None for no wait at all (the request never suspends: pure framework
        overhead), or (low, high) seconds, drawn uniformly per call from a seeded
        generator, awaited with `asyncio.sleep` as a real inference server would be.
    fresh: build a new response object per call, as a real client does after
        parsing JSON; otherwise the two prebuilt responses are handed out again
        and again. Memory measurements need fresh objects.
    """

    def __init__(
        self, latency: tuple[float, float] | None = None, *, fresh: bool = False, seed: int = 0
    ) -> None:
        if latency is not None and not 0 <= latency[0] <= latency[1]:
            raise ValueError(f"latency must be (low, high) with 0 <= low <= high, got {latency}")
        self.latency = latency
        self.fresh = fresh
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._rng = random.Random(seed)
        self._payloads = {flag: _completion_payload(flag) for flag in (False, True)}
        self._prebuilt = {
            flag: ChatCompletion.model_validate(payload) for flag, payload in self._payloads.items()
        }

    async def create(self, *, messages: list[dict[str, Any]], **kwargs: Any) -> ChatCompletion:
        """The `chat.completions.create` of the stand-in client."""
        self.calls += 1
        if self.latency is not None:
            low, high = self.latency
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                await asyncio.sleep(self._rng.uniform(low, high) if high > low else low)
            finally:
                self.in_flight -= 1
        tool_call = wants_tool_call(messages, kwargs.get("tools"))
        if self.fresh:
            return ChatCompletion.model_validate(self._payloads[tool_call])
        return self._prebuilt[tool_call]


class ScriptedClient(openai.AsyncOpenAI):
    """A real `AsyncOpenAI` instance whose chat completions come from a `ScriptedModel`.

    Subclassing keeps every `isinstance(client, AsyncOpenAI)` check in either
    framework on its normal path; only `chat.completions.create` is replaced, so no
    request is ever built or sent.
    """

    def __init__(self, model: ScriptedModel) -> None:
        super().__init__(api_key="scripted", base_url="http://scripted.invalid/v1", max_retries=0)
        self.scripted = model
        self._scripted_chat = SimpleNamespace(completions=SimpleNamespace(create=model.create))

    @property
    def chat(self) -> Any:  # type: ignore[override]
        return self._scripted_chat


def http_policy(messages: list[dict[str, Any]], request: dict[str, Any]) -> Any:
    """The same decision rule as a `vfgym.inference.server.ModelServer` policy."""
    if wants_tool_call(messages, request.get("tools")):
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"function": {"name": TOOL_NAME, "arguments": TOOL_ARGUMENTS}}],
        }
    return REPLY_TEXT
