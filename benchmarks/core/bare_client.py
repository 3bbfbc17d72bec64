"""The floor of the HTTP table: the same rollouts made with a bare aiohttp client.

No framework, no validation, no retries: one pooled `aiohttp.ClientSession`, the
request bodies the workloads send (the conversation grows turn by turn as the
environment's does), the answer decoded and its message appended. vfgym's CPU per
model call is judged against this client's, measured in the same run. The codec is
the one vfgym's transport uses (orjson where installed), so the comparison is of
everything else.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
from scripted_model import ENV_REPLY, TOOL_NAME
from workloads import MODEL_CALLS, SYSTEM_PROMPT, lookup, question_rows

try:
    import orjson

    dumps, loads = orjson.dumps, orjson.loads
except ImportError:  # the standard library's codec, as vfgym's transport falls back to
    import json

    def dumps(value: Any) -> bytes:  # type: ignore[misc]
        return json.dumps(value, separators=(",", ":")).encode()

    loads = json.loads

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": "Look a value up in the reference table.",
            "parameters": {
                "type": "object",
                "properties": {"key": {"type": "string", "description": "The name of the value."}},
                "required": ["key"],
            },
        },
    }
]


async def _rollout(session: aiohttp.ClientSession, url: str, workload: str, question: str) -> int:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": question},
    ]
    calls = 0
    for _ in range(MODEL_CALLS[workload]):
        body: dict[str, Any] = {"model": "scripted", "messages": messages}
        if workload == "tool":
            body["tools"] = TOOLS
        async with session.post(
            url, data=dumps(body), headers={"Content-Type": "application/json"}
        ) as response:
            answer = loads(await response.read())
        calls += 1
        message = answer["choices"][0]["message"]
        messages = [*messages, message]
        if message.get("tool_calls"):
            call = message["tool_calls"][0]
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": lookup("answer")}
            )
        elif workload == "multi10":
            messages.append({"role": "user", "content": ENV_REPLY})
    return calls


async def run_bare(base_url: str, workload: str, rollouts: int, concurrency: int) -> dict[str, Any]:
    """`rollouts` bare rollouts of `workload`, at most `concurrency` at once."""
    url = base_url.rstrip("/") + "/chat/completions"
    questions = [row["question"] for row in question_rows(rollouts)]
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=1024)
    async with aiohttp.ClientSession(connector=connector) as session:
        limit = asyncio.Semaphore(concurrency)

        async def one(question: str) -> int:
            async with limit:
                return await _rollout(session, url, workload, question)

        cpu0, t0 = time.process_time(), time.perf_counter()
        calls = sum(await asyncio.gather(*(one(q) for q in questions)))
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {
        "framework": "bare aiohttp",
        "workload": workload,
        "rollouts": rollouts,
        "concurrency": concurrency,
        "wall_s": wall,
        "cpu_s": cpu,
        "rollouts_per_s": rollouts / wall,
        "model_calls": calls,
        "ok": calls == rollouts * MODEL_CALLS[workload],
    }
