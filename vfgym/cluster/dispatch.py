"""The driver's side of a cluster run: start the workers, hand them whole groups,
and give a dead worker's groups to the others.

A group goes to a worker with a free slot; its records come back to the batch
(`vfgym.engine.runner.run_batch`), which writes them. A worker that dies (its
process, or its whole node) takes nothing written with it: the groups it held are
sent again, and since only a returned group is written, none is written twice.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from dataclasses import dataclass, field
from typing import Any

from vfgym.cluster.connect import connect, require_ray
from vfgym.cluster.worker import RolloutWorker
from vfgym.errors import ClusterError

logger = logging.getLogger(__name__)

#: Groups each worker plays at once, unless told otherwise.
DEFAULT_GROUPS_PER_WORKER = 16
#: Seconds a worker may take to start (import vfgym, load the environment).
START_TIMEOUT_S = 300.0


@dataclass(eq=False)
class _Worker:
    handle: Any
    node_id: str
    host: str
    alive: bool = True


@dataclass
class ClusterSettings:
    """How a batch runs on a cluster: where, with how many workers, how busy each is.

    `workers=None` starts one worker per alive node; a number starts that many,
    spread over the nodes in turn. `groups_per_worker` is how many groups each
    plays at once (its rollouts wait on the model, so more keep it busier).
    """

    address: str = "auto"
    workers: int | None = None
    groups_per_worker: int = DEFAULT_GROUPS_PER_WORKER
    worker_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("workers", "groups_per_worker"):
            value = getattr(self, name)
            if value is None and name == "workers":
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")


class ClusterGroups:
    """`RemoteGroups` on a Ray cluster: `async with ClusterGroups(...)` starts the
    workers and stops them again (on success, error, Ctrl-C or SIGTERM alike)."""

    def __init__(self, settings: ClusterSettings, worker_args: dict[str, Any]) -> None:
        self.settings = settings
        self.worker_args = worker_args
        self._ray = require_ray()
        self._started_ray = False
        self._workers: list[_Worker] = []
        self._free: asyncio.Queue[_Worker] = asyncio.Queue()
        self._by_host: collections.Counter[str] = collections.Counter()
        self._lost = 0
        self._resent = 0

    async def __aenter__(self) -> ClusterGroups:
        self._started_ray = await asyncio.to_thread(connect, self.settings.address)
        try:
            await self._start_workers()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _start_workers(self) -> None:
        ray = self._ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = [node["NodeID"] for node in ray.nodes() if node.get("Alive")]
        if not nodes:
            raise ClusterError("the Ray cluster has no alive node to start workers on")
        count = self.settings.workers or len(nodes)
        actor_class = ray.remote(RolloutWorker)
        handles = []
        for n in range(count):
            strategy = NodeAffinitySchedulingStrategy(node_id=nodes[n % len(nodes)], soft=False)
            options = {
                "num_cpus": 0,  # waiting on a model, not computing: never queue behind CPUs
                "max_concurrency": max(1000, self.settings.groups_per_worker * 4),
                "scheduling_strategy": strategy,
                **self.settings.worker_options,
            }
            handles.append(actor_class.options(**options).remote(**self.worker_args))
        places = await asyncio.wait_for(
            asyncio.gather(*(handle.where.remote() for handle in handles)), START_TIMEOUT_S
        )
        for handle, place in zip(handles, places, strict=True):
            worker = _Worker(handle, place["node_id"], place["host"])
            self._workers.append(worker)
            for _ in range(self.settings.groups_per_worker):
                self._free.put_nowait(worker)
        nodes_used = {place["node_id"] for place in places}
        logger.info("started %d workers on %d nodes", len(handles), len(nodes_used))

    async def run_group(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Play one group on a free worker; if that worker dies, on another."""
        died = self._died_errors()
        while True:
            worker = await self._take()
            try:
                records: list[dict[str, Any]] = await worker.handle.run_group.remote(rows)
            except died as exc:
                self._lose(worker, exc)
                self._resent += 1
                continue
            except BaseException:
                self._free.put_nowait(worker)
                raise
            self._free.put_nowait(worker)
            self._by_host[f"{worker.host} ({worker.node_id[:12]})"] += len(records)
            return records

    async def _take(self) -> _Worker:
        while True:
            if not any(worker.alive for worker in self._workers):
                raise ClusterError(
                    f"every worker of the cluster run died ({self._lost} lost); the groups "
                    "already written are kept: fix the cluster and run again with resume"
                )
            worker = await self._free.get()
            if worker.alive:
                return worker

    def _lose(self, worker: _Worker, exc: BaseException) -> None:
        if worker.alive:
            worker.alive = False
            self._lost += 1
            logger.warning(
                "worker on %s died (%s); its groups go to the other workers",
                worker.host,
                type(exc).__name__,
            )
        if not any(w.alive for w in self._workers):
            # Wake every group waiting for a slot: none will come back.
            for _ in range(len(self._workers) * self.settings.groups_per_worker):
                self._free.put_nowait(worker)

    def _died_errors(self) -> tuple[type[BaseException], ...]:
        exceptions = self._ray.exceptions
        return (
            exceptions.RayActorError,
            exceptions.ActorUnavailableError,
            exceptions.NodeDiedError,
        )

    def describe(self) -> dict[str, Any]:
        """The cluster and how many rollouts each node ran (for metadata.json)."""
        return {
            "cluster": {
                "address": self.settings.address,
                "workers": len(self._workers),
                "nodes": len({worker.node_id for worker in self._workers}),
                "workers_lost": self._lost,
                "groups_sent_again": self._resent,
                "rollouts_by_node": dict(sorted(self._by_host.items())),
            }
        }

    async def close(self) -> None:
        """Stop every worker; shut Ray down if this run started it."""
        for worker in self._workers:
            try:
                self._ray.kill(worker.handle, no_restart=True)
            except Exception as exc:  # already gone with its node
                logger.debug("could not kill a worker: %s", exc)
        if self._started_ray:
            await asyncio.to_thread(self._ray.shutdown)
            self._started_ray = False
