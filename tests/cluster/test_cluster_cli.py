"""`vfgym eval --ray`: a run on the cluster, SIGTERM to the driver mid-run (workers
stopped, a resumable directory left), and the hint when ray is missing."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from vfgym.envs.registry import load_environment
from vfgym.inference.server import ModelServer


def _vfgym(*argv: str, **options: Any) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return subprocess.Popen(
        [sys.executable, "-m", "vfgym", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **options,
    )


def _alive_workers() -> int:
    from ray._private import state

    return sum(
        1
        for actor in state.actors().values()
        if actor["State"] == "ALIVE" and actor["ActorClassName"].endswith("RolloutWorker")
    )


def _indices(directory: Path) -> list[int]:
    text = (
        (directory / "results.jsonl").read_text() if (directory / "results.jsonl").exists() else ""
    )
    return [json.loads(line)["index"] for line in text.splitlines() if line.strip()]


def test_eval_on_the_cluster_records_the_nodes(ray_cluster: Any, tmp_path: Path) -> None:
    out = tmp_path / "run"
    run = _vfgym(
        "eval", "guess-the-number", "-n", "3", "-r", "2", "--ray", ray_cluster.address,
        "-o", str(out),
    )  # fmt: skip
    _, stderr = run.communicate(timeout=300)
    assert run.returncode == 0, stderr
    assert sorted(_indices(out)) == list(range(6))
    cluster = json.loads((out / "metadata.json").read_text())["cluster"]
    assert sum(cluster["rollouts_by_node"].values()) == 6
    assert _alive_workers() == 0


async def test_sigterm_stops_the_workers_and_leaves_a_resumable_run(
    ray_cluster: Any, tmp_path: Path
) -> None:
    env = load_environment("guess-the-number")

    async def slow(messages: Any) -> Any:  # each turn waits, so SIGTERM finds work in flight
        await asyncio.sleep(0.3)
        return env.reference_policy(messages)

    out = tmp_path / "run"
    async with ModelServer(slow) as server:
        argv = ["eval", "guess-the-number", "-n", "16", "-r", "2", "-b", server.base_url,
                "-m", "m", "--ray", ray_cluster.address, "-c", "2", "-o", str(out)]  # fmt: skip
        run = _vfgym(*argv)
        deadline = time.monotonic() + 240
        while len(_indices(out)) < 4:
            assert run.poll() is None, run.communicate()[1]
            assert time.monotonic() < deadline, "no group was written"
            await asyncio.sleep(0.2)
        run.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.to_thread(run.communicate, timeout=120)
        assert run.returncode == 128 + signal.SIGTERM, stderr
        assert _alive_workers() == 0
        written = _indices(out)
        assert len(written) < 32
        again = _vfgym(*argv[:-2], "--resume", str(out))
        _, stderr = await asyncio.to_thread(again.communicate, timeout=300)
        assert again.returncode == 0, stderr
    indices = _indices(out)
    assert sorted(set(indices)) == list(range(32))
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["resumed_rollouts"] >= len(written) - 1  # a torn last group is replayed


def test_without_ray_the_option_says_how_to_install_it(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['ray'] = None\n"  # what `import ray` meets without it
        "from vfgym.cli.main import main\n"
        "sys.exit(main(['eval', 'guess-the-number', '--ray', 'auto', '-o', sys.argv[1]]))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    assert "pip install 'vfgym[ray]'" in run.stderr
    assert not (tmp_path / "run" / "results.jsonl").exists()
