"""The nodes of the cluster tests' local Ray cluster (tests/cluster)."""

from __future__ import annotations

from typing import Any

OBJECT_STORE = 80 * 1024**2  # bytes per node: results are small, the machine is shared


def node_args(name: str) -> dict[str, Any]:
    """A node with one CPU, a small object store, and a resource named after it."""
    return {
        "num_cpus": 1,
        "resources": {name: 1},
        "object_store_memory": OBJECT_STORE,
        "include_dashboard": False,
    }
