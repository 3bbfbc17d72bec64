"""Per-rollout seeds: the copies of an example sample differently, a rerun repeats."""

from __future__ import annotations

from scripted_models import say_ok

import vfgym as vf
from vfgym.engine.seeds import rollout_seed, seeded_sampling_args
from vfgym.inference.server import ModelServer


def test_each_rollout_gets_its_own_seed_and_a_rerun_the_same() -> None:
    rows = [{"question": "q", "answer": "ok"}, {"question": "r", "answer": "ok"}]
    env = vf.SingleTurnEnv(dataset=rows)
    with ModelServer(say_ok).running() as server:
        for _ in range(2):
            env.evaluate_sync(
                server.sync_client(), "m", sampling_args={"seed": 5}, rollouts_per_example=3
            )
        seeds = [request["seed"] for request in server.requests]
    first, second = sorted(seeds[:6]), sorted(seeds[6:])  # (rollouts run concurrently)
    assert len(set(first)) == 6  # the three copies of each example differ
    assert first == second  # the same run again samples the same
    assert first == sorted(rollout_seed(5, i) for i in range(6))


def test_without_a_seed_the_sampling_args_are_left_alone() -> None:
    given = {"temperature": 0.5}
    assert seeded_sampling_args(given, given, 3) is given
    assert seeded_sampling_args(None, {"seed": 9}, 3) == {"seed": rollout_seed(9, 3)}
    assert seeded_sampling_args(None, {"seed": True}, 3) is None  # a bool is no seed
    assert rollout_seed(9, 3) != rollout_seed(9, 4) != rollout_seed(10, 3)
