"""Per-rollout sampling seeds derived from the run's seed.

A `seed` in the sampling arguments given to every rollout unchanged makes the
copies of an example (`rollouts_per_example`) sample the same replies: a GRPO
group with no variance. Each rollout instead gets a seed derived from the given
one and its index in the batch, so the copies differ and a rerun (or a resume,
which keeps the indices) repeats them exactly.
"""

from __future__ import annotations

import hashlib
from typing import Any

#: vLLM (and OpenAI) take a seed in the signed 64-bit range; 31 bits fit every server.
_SEED_BITS = 31


def rollout_seed(seed: int, index: int) -> int:
    """The seed of rollout `index` of a run seeded with `seed` (same inputs, same seed)."""
    digest = hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & ((1 << _SEED_BITS) - 1)


def seeded_sampling_args(
    given: dict[str, Any] | None, merged: dict[str, Any], index: int
) -> dict[str, Any] | None:
    """`given` (the batch's sampling arguments) with rollout `index`'s own seed, when
    the arguments in force (`merged`, the environment's defaults under `given`) carry
    a seed; `given` unchanged otherwise."""
    seed = merged.get("seed")
    if seed is None or isinstance(seed, bool) or not isinstance(seed, int):
        return given
    return {**(given or {}), "seed": rollout_seed(seed, index)}


__all__ = ["rollout_seed", "seeded_sampling_args"]
