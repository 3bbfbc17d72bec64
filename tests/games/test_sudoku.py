"""Sudoku: rules on a hand-written grid, uniqueness of generated puzzles, policies."""

from __future__ import annotations

from typing import Any

import pytest
from game_play import evaluate_over_http, play, won
from vfgym.games import sudoku
from vfgym.games._base import move_message

import vfgym
from vfgym.errors import InvalidMove

# A hand-solved 4x4 puzzle:   solution   1 2 | 3 4
#   1 . | . .                            3 4 | 1 2
#   . 4 | 1 .                            2 1 | 4 3
#   2 1 | . 3                            4 3 | 2 1
#   . . | . 1
PUZZLE = [1, 0, 0, 0, 0, 4, 1, 0, 2, 1, 0, 3, 0, 0, 0, 1]
SOLUTION = [1, 2, 3, 4, 3, 4, 1, 2, 2, 1, 4, 3, 4, 3, 2, 1]


def hand_game() -> tuple[Any, dict[str, Any]]:
    env = sudoku.load_environment(num_examples=1, size=4)
    return env, env.new_game({"n": 4, "puzzle": PUZZLE, "solution": SOLUTION})


def test_the_solver_finds_the_hand_solution_and_only_it() -> None:
    assert sudoku.solve(PUZZLE, 4, limit=5) == [SOLUTION]
    # Without the 4 at r2c2 the puzzle has several solutions.
    loose = list(PUZZLE)
    loose[5] = 0
    assert len(sudoku.solve(loose, 4, limit=5)) > 1
    # A grid with a repeated digit has none.
    assert sudoku.solve([1, 1] + [0] * 14, 4) == []


def test_rule_breaking_placements_are_refused_whole() -> None:
    env, game = hand_game()
    with pytest.raises(InvalidMove, match=r"r1c2=1 repeats the 1 at r1c1 in the same row"):
        env.apply_move(game, "r1c2=1")
    with pytest.raises(InvalidMove, match=r"repeats the 1 at r3c2 in the same column"):
        env.apply_move(game, "r1c3=3 r4c2=1")
    assert game["grid"] == PUZZLE  # the valid first placement was not made either
    with pytest.raises(InvalidMove, match=r"r4c3=3 repeats the 3 at r3c4 in the same box"):
        env.apply_move(game, "r4c3=3")
    with pytest.raises(InvalidMove, match="is a given"):
        env.apply_move(game, "r1c1=2")
    with pytest.raises(InvalidMove, match="off the grid"):
        env.apply_move(game, "r5c1=2")
    with pytest.raises(InvalidMove, match="not a digit"):
        env.apply_move(game, "r1c2=7")
    with pytest.raises(InvalidMove, match="could not read"):
        env.apply_move(game, "r1c2=2 and r1c3=3")
    with pytest.raises(InvalidMove, match="could not read"):
        env.apply_move(game, "two in the corner")


def test_wrong_but_legal_placements_are_accepted_and_can_be_undone() -> None:
    env, game = hand_game()
    text = env.apply_move(game, "r1c2=3")  # legal now, but the solution has 2 there
    assert "Placed r1c2=3. 8 empty cells left." in text
    assert "r1 | 1 3 | . . |" in text
    env.apply_move(game, "r1c2=0")
    assert game["grid"] == PUZZLE and not env.is_over(game)
    moves = " ".join(f"r{i // 4 + 1}c{i % 4 + 1}={SOLUTION[i]}" for i in range(16) if not PUZZLE[i])
    text = env.apply_move(game, moves)
    assert "Solved" in text and env.is_over(game) and env.score(game) == 1.0
    assert game["placements"] == 11
    assert env.efficiency(game, {}) == pytest.approx(9 / 11)


def test_rendered_grids_read_back() -> None:
    for n in (4, 9):
        env = sudoku.load_environment(num_examples=2, size=n, difficulty="hard")
        for row in env.dataset:
            text = row["prompt"][-1]["content"]
            assert sudoku.read_grid(text) == row["info"]["puzzle"]


@pytest.mark.parametrize("size,difficulty", [(4, "hard"), (9, "easy"), (9, "hard")])
def test_generated_puzzles_have_exactly_one_solution(size: int, difficulty: str) -> None:
    env = sudoku.load_environment(num_examples=8, size=size, difficulty=difficulty, seed=4)
    target = sudoku.GIVENS[size][difficulty]
    for row in env.dataset:
        puzzle, solution = row["info"]["puzzle"], row["info"]["solution"]
        assert sudoku.solve(puzzle, size, limit=2) == [solution]
        assert sum(1 for d in puzzle if d) >= target
        assert all(d in (0, s) for d, s in zip(puzzle, solution, strict=True))


def test_difficulty_sets_the_number_of_givens() -> None:
    counts = {}
    for level in ("easy", "medium", "hard"):
        env = sudoku.load_environment(num_examples=4, difficulty=level)
        counts[level] = sum(sum(1 for d in r["info"]["puzzle"] if d) for r in env.dataset) / 4
    assert counts["easy"] > counts["medium"] > counts["hard"]


def test_items_are_deterministic_per_seed() -> None:
    a = sudoku.load_environment(num_examples=4, seed=1).dataset
    b = sudoku.load_environment(num_examples=4, seed=1).dataset
    c = sudoku.load_environment(num_examples=4, seed=2).dataset
    assert [r["info"] for r in a] == [r["info"] for r in b]
    assert [r["info"]["puzzle"] for r in a] != [r["info"]["puzzle"] for r in c]


def test_bad_knobs_are_refused() -> None:
    with pytest.raises(ValueError, match="size"):
        sudoku.load_environment(size=6)
    with pytest.raises(ValueError, match="difficulty"):
        sudoku.load_environment(difficulty="fiendish")
    with pytest.raises(ValueError, match="givens"):
        sudoku.load_environment(size=9, givens=10)


async def test_reference_and_random_policies_over_http() -> None:
    env = vfgym.load_environment("sudoku", num_examples=3, size=9, max_turns=6)
    ref, rnd = await evaluate_over_http(env, 3)
    assert ref.reward == [1.0] * 3
    assert ref.metrics["turns"] == [1.0] * 3
    assert ref.metrics["efficiency"] == [1.0] * 3
    assert rnd.reward == [0.0] * 3


@pytest.mark.parametrize("size", [4, 9])
def test_reference_policy_solves_50_seeds(size: int) -> None:
    env = sudoku.load_environment(num_examples=50, size=size, seed=9)
    for row in env.eval_dataset:
        state = play(env, row, env.reference_policy)
        assert won(env, state) and state["turn"] == 1
        assert state["game_state"]["grid"] == row["info"]["solution"]


def test_random_policy_does_worse() -> None:
    env = sudoku.load_environment(num_examples=20, size=4, difficulty="easy")
    policy = env.make_random_policy(2)
    wins = sum(won(env, play(env, row, policy)) for row in env.eval_dataset)
    assert wins < 15


def test_invalid_move_limit_ends_the_game_as_a_loss() -> None:
    env = sudoku.load_environment(num_examples=1, size=4, max_invalid_moves=2)
    state = play(env, env.dataset[0], lambda m: move_message("r1c1=9"))
    messages = state["messages"]
    assert state["invalid_moves"] == 2
    assert "last invalid move" in messages[-1]["content"]
    assert env.is_completed(messages, state) and not won(env, state)
