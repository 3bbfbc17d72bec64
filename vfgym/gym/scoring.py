"""Scoring a finished `GymEnv` episode with the environment's rubric.

Shared by the sync path (which scores in the caller's thread when the rubric's
reward functions allow) and the async path; a failure of the rubric itself is
recorded in the State and raised, never turned into a made-up reward.
"""

from __future__ import annotations

from vfgym.errors import SyncScoringUnavailable, error_record
from vfgym.rubrics.rubric import Rubric, rollout_args
from vfgym.types import State


def score_sync(rubric: Rubric, state: State) -> tuple[float, dict[str, float]] | None:
    """The finished episode's reward and metrics computed in this thread, or None when
    the rubric needs an event loop (async reward functions, or scoring of its own)."""
    try:
        if type(rubric).score_rollout_sync is Rubric.score_rollout_sync:
            return rubric.score_state_sync(state)
        verdict = rubric.score_rollout_sync(*rollout_args(state))
    except SyncScoringUnavailable:
        return None
    return verdict.reward, dict(verdict.metrics)


def scoring_failed(state: State, exc: Exception) -> None:
    """The rubric itself raised (a misconfigured rubric, a `score_rollout` of its own):
    the State records it as `generate` does, and the exception goes to the caller,
    since a made-up reward would mislead training."""
    state["error"] = error_record(exc)
