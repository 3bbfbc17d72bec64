"""The three measured workloads, written once against the verifiers 0.1.x API.

`build_env(vf, ...)` takes the framework module (`vfgym` or `verifiers`) and
builds the environment with it, so both sides run literally the same
environment code; that this works at all is itself a check of vfgym's
compatibility promise. Imports only what both venvs have.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from scripted_model import ANSWER, ENV_REPLY

WORKLOADS = ("single", "multi10", "tool")
FLAVOURS = ("sync", "async")
MODEL_CALLS = {"single": 1, "multi10": 10, "tool": 2}
"""Model calls one rollout of each workload makes; every run checks it."""

SYSTEM_PROMPT = "You are a careful assistant. Finish with 'ANSWER: <value>'."


def _last_assistant_text(completion: Any) -> str:
    for message in reversed(completion):
        if message.get("role") == "assistant":
            return message.get("content") or ""
    return ""


def correct_answer(completion: Any, answer: str) -> float:
    """The typical reward function: plain sync Python reading the last answer."""
    return 1.0 if f"ANSWER: {answer}" in _last_assistant_text(completion) else 0.0


async def correct_answer_async(completion: Any, answer: str) -> float:
    """The same reward as an `async def`."""
    return correct_answer(completion, answer)


def lookup(key: str) -> str:
    """Look a value up in the reference table.

    Args:
        key: The name of the value to look up.
    """
    return ANSWER if key == "answer" else "unknown"


async def lookup_async(key: str) -> str:
    """Look a value up in the reference table.

    Args:
        key: The name of the value to look up.
    """
    return lookup(key)


correct_answer_async.__name__ = "correct_answer"
lookup_async.__name__ = "lookup"


def question_rows(n: int) -> list[dict[str, Any]]:
    """Dataset rows: a question and its answer (every answer is the same)."""
    return [{"question": f"What is the value of item {i}?", "answer": ANSWER} for i in range(n)]


def generate_inputs(n: int) -> dict[str, list[Any]]:
    """`generate` inputs as plain columns, built identically for both frameworks."""
    prompts = [
        [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": row["question"]},
        ]
        for row in question_rows(n)
    ]
    return {
        "prompt": prompts,
        "answer": [ANSWER] * n,
        "example_id": list(range(n)),
    }


def build_env(vf: ModuleType, dataset_cls: Any, workload: str, flavour: str = "sync") -> Any:
    """The environment of `workload` built with framework `vf`.

    `flavour` "sync" uses plain functions for the reward and the tool (what
    most users write); "async" uses `async def` versions of the same code.
    """
    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}; choose from {WORKLOADS}")
    if flavour not in FLAVOURS:
        raise ValueError(f"unknown flavour {flavour!r}; choose from {FLAVOURS}")
    reward = correct_answer if flavour == "sync" else correct_answer_async
    tool = lookup if flavour == "sync" else lookup_async
    common: dict[str, Any] = {
        "dataset": dataset_cls.from_list(question_rows(8)),
        "system_prompt": SYSTEM_PROMPT,
        "parser": vf.Parser(),
        "rubric": vf.Rubric(funcs=[reward], weights=[1.0], parser=vf.Parser()),
    }
    if workload == "single":
        return vf.SingleTurnEnv(**common)
    if workload == "tool":
        return vf.ToolEnv(tools=[tool], max_turns=10, **common)

    class NudgeEnv(vf.MultiTurnEnv):
        """Answers every model turn with the same nudge until the turn limit."""

        async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> Any:
            return [{"role": "user", "content": ENV_REPLY}], state

    return NudgeEnv(max_turns=MODEL_CALLS["multi10"], **common)
