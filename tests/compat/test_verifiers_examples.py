"""Environments written the verifiers 0.1.x way (`import verifiers as vf`,
`from verifiers.X import ...`, `load_environment()` in an installed package) run
unmodified on vfgym, through the Python API and through `vfgym eval`, against the
loopback model server, with the rewards verifiers 0.1.7.post0 gives them.

The expected rewards are those of verifiers 0.1.7.post0 on the same scripted model
(benchmarks/verifiers_parity.py prints both side by side).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI
from verifiers_site import REGISTERED, SOURCES, site_on_path

import vfgym as vf
from vfgym.compat import real_verifiers_available, verifiers_alias_active
from vfgym.inference.server import ModelServer

sys.path.insert(0, str(SOURCES))  # the scripted model beside the environments
from policy import respond

sys.path.remove(str(SOURCES))

pytestmark = pytest.mark.skipif(
    real_verifiers_available(), reason="a real verifiers is installed; the alias stands aside"
)

#: Rewards (one rollout per example, all examples) as verifiers 0.1.7.post0 gives them.
EXPECTED_REWARDS: dict[str, list[float]] = {
    "boxed-sums": [1.0, 0.0, 1.0, 1.0, 0.0, 1.0],
    # reached zero 1.0; last message from the model 0.5 (only when stopped at
    # max_turns, before env_response); XML format 0.2 x 0.1.7's score
    "xml-countdown": [1.2, 0.5 + 0.2 * (2.2 / 3), 1.2, 0.5 + 0.2 * (2.6 / 3)],
    "tool-lookup": [1.0, 1.0, 1.0, 1.0],
    "judged-group": [1.0, 0.0, 1.0, 0.0, 1.0],
    "math-boxed": [1.0, 1.0, 0.0],
    "vf-continuation": [1.0, 0.0, 1.0],
    # share of answers right + 0.5 when the judge accepts the last one
    "quiz-session": [1.0 + 0.5, 2 / 3 + 0.5, 1.0 + 0.5],
}
EXPECTED_METRICS: dict[str, dict[str, list[float]]] = {
    "xml-countdown": {
        "reached_zero": [1.0, 0.0, 1.0, 0.0],
        "last_message_is_assistant": [0.0, 1.0, 0.0, 1.0],
        "format_reward_func": [1.0, 2.2 / 3, 1.0, 2.6 / 3],
    },
    "tool-lookup": {"total_tool_calls": [1.0, 1.0, 1.0, 0.0], "correct_city": [1.0] * 4},
    "math-boxed": {"correct_answer_reward_func": [1.0, 1.0, 0.0]},
    "quiz-session": {"questions_asked": [1.0, 2.0, 0.0], "judged_last_answer": [0.5] * 3},
}


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Path]:
    with site_on_path(tmp_path / "site") as directory:
        yield directory


def _env_args(name: str, base_url: str) -> dict[str, Any]:
    return {"judge_base_url": base_url} if name in ("judged-group", "quiz-session") else {}


@pytest.mark.parametrize("name", sorted(EXPECTED_REWARDS))
async def test_python_api_runs_them_with_0_1_7_rewards(site: Path, name: str) -> None:
    async with ModelServer(respond) as server:
        env = vf.load_environment(name, **_env_args(name, server.base_url))
        assert verifiers_alias_active()
        client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        results = await env.evaluate(client, "scripted", num_examples=-1, rollouts_per_example=1)
    assert results.reward == pytest.approx(EXPECTED_REWARDS[name])
    for metric, values in EXPECTED_METRICS.get(name, {}).items():
        assert results.metrics[metric] == pytest.approx(values), metric


def test_the_loaded_modules_import_verifiers_and_get_vfgym(site: Path) -> None:
    env = vf.load_environment("xml-countdown")
    module = sys.modules["vf_xml_countdown"]
    assert module.vf.__name__ == "verifiers"
    assert isinstance(env, vf.MultiTurnEnv) and isinstance(env.parser, vf.XMLParser)
    listed = {info.name: info for info in vf.list_environments()}
    assert set(REGISTERED) <= set(listed)
    assert listed["tool-lookup"].distribution == "vf-compat-examples"


@pytest.mark.parametrize(
    "name", ["xml-countdown", "judged-group", "vf-continuation", "quiz-session"]
)
def test_vfgym_eval_runs_them_unmodified(site: Path, tmp_path: Path, name: str) -> None:
    output = tmp_path / "out"
    with ModelServer(respond).running() as server:
        environment = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
            "OPENAI_API_KEY": "x",
        }
        command = [
            sys.executable,
            "-m",
            "vfgym",
            "eval",
            name,
            "--base-url",
            server.base_url,
            "--model",
            "scripted",
            "-n",
            "-1",
            "-r",
            "1",
            "-o",
            str(output),
            "--env-args",
            json.dumps(_env_args(name, server.base_url)),
        ]
        done = subprocess.run(
            command, env=environment, capture_output=True, text=True, timeout=240, check=False
        )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (output / "results.jsonl").read_text().splitlines()]
    rows.sort(key=lambda row: row["example_id"])
    assert [row["reward"] for row in rows] == pytest.approx(EXPECTED_REWARDS[name])
