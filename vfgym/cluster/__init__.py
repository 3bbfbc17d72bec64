"""Running a batch on a Ray cluster: `await vfgym.cluster.evaluate(env, client, model,
ray="auto")` plays whole groups on worker actors (one per node by default) and
writes the same results a local run does. Needs the `ray` extra
(`pip install 'vfgym[ray]'`); importing this package does not import ray.
"""

from __future__ import annotations

from vfgym.cluster.batch import evaluate, generate
from vfgym.cluster.dispatch import ClusterGroups, ClusterSettings

__all__ = ["ClusterGroups", "ClusterSettings", "evaluate", "generate"]
