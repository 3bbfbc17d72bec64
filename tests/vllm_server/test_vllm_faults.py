"""vLLM killed in the middle of an evaluation: clear errors, results written, no hang.

This test starts a vLLM of its own (the session's server is shared by the other tests)
and kills it, engine processes included, after the first results are in.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI
from vllm_process import VLLMUnavailable, running_vllm, vllm_python

import vfgym as vf


@pytest.fixture
def own_vllm_dir(tmp_path: Path) -> Path:
    """A folder for a vLLM of the test's own; skips (or fails under VFGYM_REQUIRE_VLLM=1)
    without the vLLM venv, as the session's server does."""
    try:
        vllm_python()
    except VLLMUnavailable as exc:
        if os.environ.get("VFGYM_REQUIRE_VLLM") == "1":
            pytest.fail(f"VFGYM_REQUIRE_VLLM=1 but {exc}", pytrace=False)
        pytest.skip(str(exc))
    return tmp_path


async def test_a_server_killed_mid_evaluation_ends_the_run_in_seconds(
    own_vllm_dir: Path,
) -> None:
    env = vf.load_environment("guess-the-number", num_examples=10, seed=2)
    results = own_vllm_dir / "run"
    killed_at: list[float] = []
    with running_vllm(own_vllm_dir) as server:

        async def kill_after_four(record: dict[str, Any]) -> None:
            done = sum(1 for line in (results / "results.jsonl").read_text().splitlines())
            if done >= 4 and not killed_at:
                await asyncio.to_thread(server.stop)  # the API server and its engine
                killed_at.append(time.perf_counter())

        async with AsyncOpenAI(base_url=server.base_url, api_key="EMPTY") as client:
            out = await env.evaluate(
                client,
                server.model,
                sampling_args={"max_tokens": 6},
                num_examples=10,
                rollouts_per_example=4,
                max_concurrent=4,
                results_path=results,
                on_result=kill_after_four,
            )
    assert killed_at, "the server was never killed: fewer than four results came in"
    after_kill = time.perf_counter() - killed_at[0]
    # Without the circuit breaker each of the ~36 rollouts left retried through the whole
    # retry policy (about 30 s each, four at a time); the breaker trips after 8 in a row,
    # and the rollouts still retrying give up with it.
    assert after_kill < 20.0, f"the run took {after_kill:.0f} s to end after the kill"
    errors = [state["error"] for state in out.state if state.get("error")]
    assert len(errors) >= 20
    unreached = [e for e in errors if e["type"] == "ServerUnreachable"]
    assert unreached and "resume the run" in unreached[0]["message"]
    assert all(e["type"] in ("ModelCallError", "ServerUnreachable") for e in errors)
    lines = (results / "results.jsonl").read_text().splitlines()
    assert len(lines) == 40  # every rollout has its line: finished, errored or not started
    metadata = json.loads((results / "metadata.json").read_text())
    assert metadata["status"] == "stopped"
    assert metadata["num_errored"] == len(errors)
