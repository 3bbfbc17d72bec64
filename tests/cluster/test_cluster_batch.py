"""Batches on a real local Ray cluster: the same results as a local run, per-node
counts, resume, a node killed mid-run, and a sandboxed tool task."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from ray_nodes import node_args

import vfgym.cluster
from vfgym.envs.registry import load_environment
from vfgym.inference.server import ModelServer

#: What differs between two runs of the same rollouts (timings), or is the driver's.
UNSTABLE = {"timing", "duration_s", "started_at", "ended_at"}


def _lines(directory: Path) -> list[dict[str, Any]]:
    text = (directory / "results.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _stable(record: Any) -> Any:
    if isinstance(record, dict):
        return {k: _stable(v) for k, v in record.items() if k not in UNSTABLE}
    if isinstance(record, list):
        return [_stable(item) for item in record]
    return record


def _by_index(directory: Path) -> dict[int, Any]:
    lines = _lines(directory)
    indices = [line["index"] for line in lines]
    assert len(indices) == len(set(indices)), "a rollout was written twice"
    return {line["index"]: _stable(line) for line in lines}


async def _served(env: Any, delay: float = 0.0) -> ModelServer:
    """The loopback server playing the environment's own scripted policy."""

    async def policy(messages: Any) -> Any:
        if delay:
            await asyncio.sleep(delay)
        return env.reference_policy(messages)

    server = ModelServer(policy)
    await server.start_async()
    return server


async def test_a_cluster_run_writes_what_a_local_run_writes(
    ray_cluster: Any, tmp_path: Path
) -> None:
    env = load_environment("guess-the-number")
    server = await _served(env)
    try:
        client = server.client()
        local = await env.evaluate(
            client, "m", num_examples=6, rollouts_per_example=2, results_path=tmp_path / "local"
        )
        remote = await vfgym.cluster.evaluate(
            env,
            client,
            "m",
            ray=ray_cluster.address,
            num_examples=6,
            rollouts_per_example=2,
            results_path=tmp_path / "cluster",
            groups_per_worker=2,
        )
    finally:
        await server.stop_async()
    assert remote.reward == local.reward
    assert remote.completion == local.completion
    assert _by_index(tmp_path / "cluster") == _by_index(tmp_path / "local")
    lines = _lines(tmp_path / "cluster")
    for start in range(0, 12, 2):  # each group's lines are written together
        position = [line["index"] for line in lines].index(start)
        assert lines[position + 1]["index"] == start + 1
    cluster = json.loads((tmp_path / "cluster" / "metadata.json").read_text())["cluster"]
    assert cluster["workers"] == cluster["nodes"] == 3
    assert sum(cluster["rollouts_by_node"].values()) == 12
    assert cluster["workers_lost"] == 0


async def test_a_cluster_run_resumes_the_groups_it_lost(ray_cluster: Any, tmp_path: Path) -> None:
    env = load_environment("guess-the-number")
    server = await _served(env)
    directory = tmp_path / "run"
    options = {"num_examples": 4, "rollouts_per_example": 2, "results_path": directory}
    try:
        client = server.client()
        await vfgym.cluster.evaluate(env, client, "m", ray=ray_cluster.address, **options)
        whole = _by_index(directory)
        kept = _lines(directory)[:5]  # the last group and a half are lost, as by a kill
        (directory / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
        await vfgym.cluster.evaluate(
            env, client, "m", ray=ray_cluster.address, resume=True, **options
        )
    finally:
        await server.stop_async()
    assert _by_index(directory) == whole
    metadata = json.loads((directory / "metadata.json").read_text())
    assert metadata["resumed_rollouts"] == 4  # the half group is played again whole
    assert sum(metadata["cluster"]["rollouts_by_node"].values()) == 4


async def test_a_node_killed_mid_run_loses_no_group_and_writes_none_twice(
    ray_cluster: Any, tmp_path: Path
) -> None:
    doomed = ray_cluster.add_node(**node_args("node_doomed"))
    ray_cluster.wait_for_nodes()
    env = load_environment("guess-the-number")
    server = await _served(env, delay=0.05)  # long enough for groups to be in flight
    seen = 0
    killed = threading.Event()

    def kill_after_some(record: dict[str, Any]) -> None:
        nonlocal seen
        seen += 1
        if seen == 6 and not killed.is_set():
            killed.set()
            threading.Thread(
                target=ray_cluster.remove_node, args=(doomed,), kwargs={"allow_graceful": False}
            ).start()

    try:
        outputs = await vfgym.cluster.evaluate(
            env,
            server.client(),
            "m",
            ray=ray_cluster.address,
            num_examples=24,
            rollouts_per_example=2,
            results_path=tmp_path / "run",
            groups_per_worker=2,
            on_result=kill_after_some,
        )
    finally:
        await server.stop_async()
    assert killed.is_set()
    assert sorted(_by_index(tmp_path / "run")) == list(range(48))
    assert not any(state.get("error") for state in outputs.state)
    cluster = json.loads((tmp_path / "run" / "metadata.json").read_text())["cluster"]
    assert cluster["workers"] == 4
    assert cluster["workers_lost"] == 1
    assert sum(cluster["rollouts_by_node"].values()) == 48


def test_without_ray_a_cluster_run_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    from vfgym.cluster.connect import require_ray
    from vfgym.errors import RayUnavailableError

    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` meets without it
    with pytest.raises(RayUnavailableError, match=r"pip install 'vfgym\[ray\]'"):
        require_ray()


async def test_a_sandboxed_tool_task_runs_on_the_cluster(ray_cluster: Any, tmp_path: Path) -> None:
    """Each worker runs the model's code in its own sandbox pool, on its node's Docker."""
    from vfgym.errors import SandboxError
    from vfgym.sandbox.docker_client import make_client
    from vfgym.sandbox.image import default_image, image_exists

    try:
        docker = make_client(None)
    except SandboxError as exc:
        if os.environ.get("VFGYM_REQUIRE_DOCKER") == "1":
            raise
        pytest.skip(f"no Docker Engine: {exc}; `sudo bash sandboxes/setup-docker.sh`")
    try:
        if not image_exists(docker, default_image()):
            pytest.skip("the sandbox image is not built: `python -m vfgym.sandbox build`")
    finally:
        docker.close()
    env = load_environment("python-math", num_examples=4, pool_size=1)
    server = await _served(env)
    try:
        client = server.client()
        local = await env.evaluate(client, "m", num_examples=4, rollouts_per_example=2)
        remote = await vfgym.cluster.evaluate(
            env,
            client,
            "m",
            ray=ray_cluster.address,
            num_examples=4,
            rollouts_per_example=2,
            results_path=tmp_path / "run",
            workers=2,
            groups_per_worker=1,
        )
    finally:
        await server.stop_async()
    assert not any(state.get("error") for state in remote.state)
    assert remote.reward == local.reward
    assert remote.completion == local.completion
    cluster = json.loads((tmp_path / "run" / "metadata.json").read_text())["cluster"]
    assert cluster["workers"] == 2
