"""Tower of Hanoi: rules on hand-worked positions, determinism, policies, invalid moves."""

from __future__ import annotations

from typing import Any

import pytest
from game_play import evaluate_over_http, play, won
from vfgym.games import tower_of_hanoi as hanoi
from vfgym.games._base import move_message

import vfgym
from vfgym.errors import InvalidMove


def game_from(pegs: list[list[int]], target: int) -> dict[str, Any]:
    env = hanoi.load_environment(num_examples=1)
    n = sum(map(len, pegs))
    where = hanoi.positions_of(pegs, n)
    info = {
        "pegs": pegs,
        "disks": n,
        "target": target,
        "optimal": hanoi.optimal_moves(where, target),
    }
    return env.new_game(info)


def test_optimal_counts_on_hand_worked_positions() -> None:
    # Classic start: 2^n - 1.
    assert hanoi.optimal_moves([0, 0, 0, 0], target=2) == 7
    # Disks 3 and 2 already on C, disk 1 on A: one move.
    assert hanoi.optimal_moves([0, 0, 2, 2], target=2) == 1
    # Disk 3 on A (must move), disks 1-2 on B: 2 is on the spare peg already,
    # 1 must go to B too (0 moves: it is there), then 3 A->C, then 2-tower B->C (3 moves).
    assert hanoi.optimal_moves([0, 1, 1, 0], target=2) == 4
    assert hanoi.first_optimal_move([0, 1, 1, 0], target=2) == (0, 2)
    # Classic 3-disk start to C: the smallest disk goes straight to C first.
    assert hanoi.first_optimal_move([0, 0, 0, 0], target=2) == (0, 2)
    # Classic 2-disk start to C: the smallest disk goes to B first.
    assert hanoi.first_optimal_move([0, 0, 0], target=2) == (0, 1)
    with pytest.raises(ValueError, match="already"):
        hanoi.first_optimal_move([0, 2, 2], target=2)


def test_moves_follow_the_rules() -> None:
    env = hanoi.load_environment(num_examples=1)
    game = game_from([[3, 2, 1], [], []], target=2)
    feedback = env.apply_move(game, "A C")
    assert "Moved disk 1 from A to C" in feedback
    assert game["pegs"] == [[3, 2], [], [1]]
    with pytest.raises(InvalidMove, match="smaller disk 1"):
        env.apply_move(game, "A->C")
    assert game["pegs"] == [[3, 2], [], [1]]  # unchanged after an illegal move
    with pytest.raises(InvalidMove, match="empty"):
        env.apply_move(game, "B C")
    with pytest.raises(InvalidMove, match="another peg"):
        env.apply_move(game, "a a")
    with pytest.raises(InvalidMove, match="not a move"):
        env.apply_move(game, "move the big one")
    env.apply_move(game, "1 2")  # numeric pegs: A -> B
    assert game["pegs"] == [[3], [2], [1]]
    assert game["moves"] == 2


def test_solving_ends_the_game_with_full_efficiency() -> None:
    env = hanoi.load_environment(num_examples=1)
    game = game_from([[2], [], [1]], target=2)
    env.apply_move(game, "C B")
    env.apply_move(game, "A C")
    text = env.apply_move(game, "B C")
    assert env.is_over(game) and env.score(game) == 1.0
    assert "Solved in 3 moves (optimal: 3)" in text
    assert env.efficiency(game, {}) == 1.0


def test_items_are_deterministic_per_seed() -> None:
    a = hanoi.load_environment(num_examples=10, seed=1).dataset
    b = hanoi.load_environment(num_examples=10, seed=1).dataset
    c = hanoi.load_environment(num_examples=10, seed=2).dataset
    assert [r["info"] for r in a] == [r["info"] for r in b]
    assert [r["info"]["pegs"] for r in a] != [r["info"]["pegs"] for r in c]
    env = hanoi.load_environment(num_examples=5)
    train = {str(r["info"]["index"]) for r in env.dataset}
    assert train.isdisjoint(str(r["info"]["index"]) for r in env.eval_dataset)


def test_classic_start_puts_every_disk_on_one_peg() -> None:
    env = hanoi.load_environment(num_examples=5, start="classic", disks=5)
    for row in env.dataset:
        assert sorted(len(p) for p in row["info"]["pegs"]) == [0, 0, 5]
        assert row["info"]["optimal"] == 31


def test_bad_knobs_are_refused() -> None:
    with pytest.raises(ValueError, match="difficulty"):
        hanoi.load_environment(difficulty="extreme")
    with pytest.raises(ValueError, match="disks"):
        hanoi.load_environment(disks=0)
    with pytest.raises(ValueError, match="start"):
        hanoi.load_environment(start="sideways")


async def test_reference_and_random_policies_over_http() -> None:
    env = vfgym.load_environment("tower-of-hanoi", num_examples=5, difficulty="easy")
    ref, rnd = await evaluate_over_http(env, 5)
    assert ref.reward == [1.0] * 5
    assert ref.metrics["efficiency"] == [1.0] * 5
    assert ref.metrics["invalid_moves"] == [0.0] * 5
    assert sum(rnd.reward) < sum(ref.reward)


def test_reference_policy_solves_50_seeds_optimally_from_any_position() -> None:
    env = hanoi.load_environment(num_examples=50, disks=6, seed=3)
    for row in env.eval_dataset:
        state = play(env, row, env.reference_policy)
        assert won(env, state)
        assert state["game_state"]["moves"] == row["info"]["optimal"]


def test_random_policy_does_much_worse() -> None:
    env = hanoi.load_environment(num_examples=50, difficulty="medium")
    policy = env.make_random_policy(1)
    wins = sum(won(env, play(env, row, policy)) for row in env.eval_dataset)
    assert wins < 10


def test_invalid_move_limit_ends_the_game_as_a_loss() -> None:
    env = hanoi.load_environment(num_examples=1, max_invalid_moves=2)
    row = env.dataset[0]
    state = play(env, row, lambda m: move_message("Z Q"))
    messages = state["messages"]
    assert state["invalid_moves"] == 2
    assert "not a move" in messages[-1]["content"]
    assert "last invalid move" in messages[-1]["content"]
    assert env.is_completed(messages, state) and not won(env, state)


def test_render_state_shows_the_pegs() -> None:
    env = hanoi.load_environment(num_examples=1)
    state = env.setup_state({"info": env.dataset[0]["info"], "turn": 0})
    text = env.render_state(state)
    assert text.count("Peg ") == 3 and "goal" in text
