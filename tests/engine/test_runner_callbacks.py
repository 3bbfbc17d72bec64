"""`on_result` callbacks that raise: the batch still finishes, and nothing is lost.

A broken callback (a logging hook, a queue to a trainer) is the caller's bug, not
the rollouts': every rollout still runs, is recorded and is returned, and then
the batch raises `ResultCallbackError`, which carries the outputs and each
callback error. The runner plays against the project's server on loopback.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest

from vfgym.envs import SingleTurnEnv
from vfgym.errors import ResultCallbackError, VFGymError
from vfgym.inference.server import ModelServer
from vfgym.rubrics import Rubric
from vfgym.types import GenerateOutputs, Messages

QUESTIONS = ["alpha", "beta", "gamma", "delta"]


def matches(completion: Messages, answer: str) -> float:
    return 1.0 if completion[-1]["content"] == answer else 0.0


def make_env() -> SingleTurnEnv:
    rows = [{"question": q, "answer": q.upper()} for q in QUESTIONS]
    return SingleTurnEnv(dataset=rows, rubric=Rubric(funcs=[matches]))


async def alpha_first(messages: Messages) -> str:
    """Alpha answers at once; the others are still in flight when its callback runs."""
    text = messages[-1]["content"]
    if text != "alpha":
        await asyncio.sleep(0.2)
    return text.upper()


def fail_on(answers: set[str], seen: list[str]):
    def on_result(record: dict[str, Any]) -> None:
        seen.append(record["answer"])
        if record["answer"] in answers:
            raise ValueError(f"cannot log {record['answer']}")

    return on_result


def check_complete(outputs: GenerateOutputs) -> None:
    assert [c[-1]["content"] for c in outputs.completion] == [q.upper() for q in QUESTIONS]
    assert outputs.reward == [1.0] * len(QUESTIONS)
    assert outputs.metadata["status"] == "complete"
    assert outputs.metadata["num_errored"] == 0


async def test_the_other_rollouts_finish_are_written_and_returned(
    model_server, tmp_path: Path
) -> None:
    server = await model_server(alpha_first)
    seen: list[str] = []
    with pytest.raises(ResultCallbackError) as caught:
        await make_env().generate(
            {"question": QUESTIONS, "answer": [q.upper() for q in QUESTIONS]},
            server.client(),
            "m",
            results_path=tmp_path,
            on_result=fail_on({"ALPHA"}, seen),
        )
    error = caught.value
    assert isinstance(error, VFGymError)
    assert sorted(seen) == sorted(q.upper() for q in QUESTIONS)  # called for every result
    check_complete(error.outputs)
    assert list(error.errors) == [0]
    assert isinstance(error.__cause__, ValueError)
    assert error.__cause__ is error.errors[0]
    assert "on_result raised for 1 of 4 results" in str(error)
    assert "cannot log ALPHA" in str(error)
    assert str(tmp_path) in str(error)

    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["answer"] for line in lines) == sorted(
        q.upper() for q in QUESTIONS
    )
    metadata = json.loads((tmp_path / "metadata.json").read_text())
    assert metadata["status"] == "complete"
    assert metadata["num_rollouts"] == 4


async def test_a_callback_that_always_fails_is_counted_on_every_result(
    model_server, caplog: pytest.LogCaptureFixture
) -> None:
    """Every failure is counted; the log says so once, at the first, not once per result."""
    server = await model_server(alpha_first)
    seen: list[str] = []
    with pytest.raises(ResultCallbackError, match="on_result raised for 4 of 4 results") as caught:
        await make_env().evaluate(
            server.client(), "m", on_result=fail_on({q.upper() for q in QUESTIONS}, seen)
        )
    assert len(seen) == 4
    assert sorted(caught.value.errors) == [0, 1, 2, 3]
    check_complete(caught.value.outputs)
    assert not any(math.isnan(r) for r in caught.value.outputs.reward)
    warnings = [r.getMessage() for r in caplog.records if "on_result raised" in r.getMessage()]
    assert warnings == [
        "on_result raised on rollout 0 (ValueError: cannot log ALPHA); the batch goes on "
        "and raises ResultCallbackError once every rollout is done"
    ]


def test_generate_sync_raises_the_same_error_after_the_batch() -> None:
    seen: list[str] = []
    with ModelServer(alpha_first).running() as server:
        with pytest.raises(ResultCallbackError, match="1 of 4") as caught:
            make_env().evaluate_sync(server.sync_client(), "m", on_result=fail_on({"GAMMA"}, seen))
    assert list(caught.value.errors) == [2]
    check_complete(caught.value.outputs)


async def test_a_callback_that_works_changes_nothing(model_server) -> None:
    server = await model_server(alpha_first)
    seen: list[str] = []
    outputs = await make_env().evaluate(server.client(), "m", on_result=fail_on(set(), seen))
    check_complete(outputs)
    assert seen[0] == "ALPHA" and len(seen) == 4


async def test_an_async_on_result_is_awaited_and_its_error_kept(model_server) -> None:
    """A coroutine function as `on_result` runs for every result (it was called and
    its coroutine dropped, unrun), and what it raises is kept like a sync one's."""
    server = await model_server(alpha_first)
    seen: list[str] = []

    async def on_result(record: dict[str, Any]) -> None:
        await asyncio.sleep(0)
        seen.append(record["answer"])
        if record["answer"] == "BETA":
            raise ValueError("cannot log BETA")

    with pytest.raises(ResultCallbackError) as caught:
        await make_env().generate(
            {"question": QUESTIONS, "answer": [q.upper() for q in QUESTIONS]},
            server.client(),
            "m",
            on_result=on_result,
        )
    assert sorted(seen) == sorted(q.upper() for q in QUESTIONS)
    assert list(caught.value.errors) == [1]
    check_complete(caught.value.outputs)
