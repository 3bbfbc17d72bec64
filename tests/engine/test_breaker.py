"""The run's circuit breaker: a model server that is gone ends the run in seconds, with
a clear error on every rollout left and a results directory a resume finishes."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from openai import AsyncOpenAI
from scripted_models import say_ok

import vfgym as vf
from vfgym.engine.breaker import CircuitBreaker, connection_failure
from vfgym.inference.client import RetryPolicy
from vfgym.inference.server import ModelServer

ROWS = [{"question": f"q{i}", "answer": "ok"} for i in range(40)]
#: Retries as a real run has them, only shorter: each rollout still tries 4 times.
RETRY = RetryPolicy(max_retries=3, initial_delay=0.2, max_delay=1.0, jitter=0.0)


def env() -> vf.SingleTurnEnv:
    rubric = vf.Rubric(funcs=[lambda completion: 1.0])
    return vf.SingleTurnEnv(dataset=ROWS, rubric=rubric, retry=RETRY)


async def test_a_dead_server_stops_the_run_and_a_resume_finishes_it(tmp_path: Path) -> None:
    server = ModelServer(say_ok)
    await server.start_async()
    port = server.port
    await server.stop_async()  # the port now refuses every connection
    results = tmp_path / "run"
    started = time.perf_counter()
    async with AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k") as gone:
        out = await env().evaluate(
            gone, "m", max_concurrent=4, results_path=results, num_examples=40
        )
    elapsed = time.perf_counter() - started
    # Forty rollouts that each retry through the policy (1.4 s) took 40 * 1.4 s / 4 = 14 s;
    # the breaker gives up after 8 in a row and the rest end at once, without a request.
    assert elapsed < 8.0
    errors = [state["error"] for state in out.state]
    assert all(errors)
    unreached = [e for e in errors if e["type"] == "ServerUnreachable"]
    assert len(unreached) >= 40 - 8 - 4
    assert "resume the run" in unreached[0]["message"]
    assert f"127.0.0.1:{port}" in unreached[0]["message"]
    assert all(math.isnan(r) for r in out.reward)
    metadata = json.loads((results / "metadata.json").read_text())
    assert metadata["status"] == "stopped"
    assert metadata["num_errored"] == 40

    revived = ModelServer(say_ok, port=port)
    await revived.start_async()
    try:
        again = await env().evaluate(
            revived.client(), "m", max_concurrent=4, results_path=results, resume=True
        )
    finally:
        await revived.stop_async()
    assert all(state.get("error") is None for state in again.state)
    assert again.reward == [1.0] * 40
    assert json.loads((results / "metadata.json").read_text())["status"] == "complete"


def test_a_rollout_the_server_answered_resets_the_count() -> None:
    breaker = CircuitBreaker(3)
    refused = {"error": {"type": "ModelCallError", "cause": {"type": "APIConnectionError"}}}
    rejected = {"error": {"type": "ModelCallError", "cause": {"type": "BadRequestError"}}}
    assert connection_failure(refused) and not connection_failure(rejected)
    for state in (refused, refused, {"stop_reason": "completed"}, refused, rejected, refused):
        breaker.record(state)
    assert not breaker.tripped and breaker.failures == 2  # a 400 is an answer, not a reset
    breaker.record(refused)
    assert breaker.tripped


def test_a_threshold_below_one_is_refused() -> None:
    try:
        CircuitBreaker(0)
    except ValueError as exc:
        assert "whole number >= 1" in str(exc)
    else:
        raise AssertionError("CircuitBreaker(0) was accepted")
