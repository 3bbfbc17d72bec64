"""A real multi-node Ray cluster on this machine, for the whole test session.

A head node and two worker nodes (each with a resource of its own, one CPU and a
small object store), on a free port and in a temp dir of their own, so they never
meet another Ray cluster on the machine. Tests that kill a node add one of their
own first. Without ray the tests skip and say how to install it;
VFGYM_REQUIRE_RAY=1 (as CI sets) makes that a failure.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from ray_nodes import node_args

REQUIRE = os.environ.get("VFGYM_REQUIRE_RAY") == "1"
#: Node death is noticed within about two seconds instead of Ray's default half minute.
FAST_DEATH = {"health_check_period_ms": 500, "health_check_failure_threshold": 4}


#: A machine shared with other test runs may take longer than Ray's 30 s to start a node.
SLOW_START = {"RAY_raylet_start_wait_time_s": "180"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """`ray.cluster_utils.Cluster`: head + two worker nodes, the driver connected."""
    try:
        import ray
        from ray.cluster_utils import Cluster
    except ImportError:
        reason = "ray is not installed; `bash .ci/setup-ray` (or pip install 'vfgym[ray]')"
        if REQUIRE:
            pytest.fail(f"{reason} (VFGYM_REQUIRE_RAY=1 makes this a failure)", pytrace=False)
        pytest.skip(reason)
    temp_dir = tempfile.mkdtemp(prefix="vfgym-ray-")
    # Ray keeps the address of "the current cluster" in its temp dir, which `ray.init()`
    # on this machine reads: ours must not replace another cluster's there.
    saved = {name: os.environ.get(name) for name in (*SLOW_START, "RAY_TMPDIR")}
    os.environ.update(SLOW_START)
    os.environ["RAY_TMPDIR"] = temp_dir
    os.makedirs(os.path.join(temp_dir, "ray"), exist_ok=True)
    head = {
        **node_args("head"),
        "gcs_server_port": _free_port(),
        "temp_dir": temp_dir,
        "_system_config": FAST_DEATH,
    }
    cluster = Cluster(initialize_head=True, head_node_args=head)
    try:
        for name in ("node_a", "node_b"):
            cluster.add_node(**node_args(name))
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(temp_dir, ignore_errors=True)
