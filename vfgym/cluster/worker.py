"""The worker actor: one per node, with its own event loop, model client, environment
and (for sandboxed environments) sandbox pool, playing whole groups for the driver."""

from __future__ import annotations

import socket
from typing import Any

from openai import AsyncOpenAI

from vfgym.engine.runner import run_batch
from vfgym.envs.registry import load_environment
from vfgym.types import SamplingArgs


class RolloutWorker:
    """Plays and scores the groups the driver sends, and returns their records.

    Ray runs it as an async actor: its methods run on the actor's own event loop,
    many groups at once. It never writes results itself; the driver does, so a
    worker that dies loses nothing that was written.
    """

    def __init__(
        self,
        env_id: str,
        env_args: dict[str, Any],
        base_url: str,
        api_key: str,
        model: str,
        sampling_args: SamplingArgs | None,
        score_rollouts: bool,
        state_columns: list[str] | None,
    ) -> None:
        self.env = load_environment(env_id, **env_args)
        self.base_url, self.api_key = base_url, api_key
        self.client: AsyncOpenAI | None = None  # made on the actor's loop, on first use
        self.model = model
        self.sampling_args = sampling_args
        self.score_rollouts = score_rollouts
        self.state_columns = state_columns

    async def where(self) -> dict[str, str]:
        """The node this worker runs on (also a ready check: it answers once built)."""
        import ray

        return {"node_id": ray.get_runtime_context().get_node_id(), "host": socket.gethostname()}

    async def run_group(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Play and score one group (all copies of one example); its records in row order."""
        if self.client is None:
            self.client = AsyncOpenAI(base_url=self.base_url, api_key=self.api_key)
        records: list[dict[str, Any]] = []
        await run_batch(
            self.env,
            rows,
            client=self.client,
            model=self.model,
            sampling_args=self.sampling_args,
            rollouts_per_example=len(rows),
            score_rollouts=self.score_rollouts,
            state_columns=self.state_columns,
            on_result=records.append,
            gc_freeze=False,
        )
        return sorted(records, key=lambda record: record["index"])
