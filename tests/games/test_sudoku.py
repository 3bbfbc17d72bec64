"""Sudoku: rules on a hand-written grid, uniqueness of generated puzzles, policies."""

from __future__ import annotations

import itertools
import random
from functools import cache
from typing import Any

import pytest
from game_play import evaluate_over_http, play, slips_then, won
from vfgym.games import sudoku
from vfgym.games import sudoku as sd
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


def rubric_scores(env: Any, state: dict[str, Any]) -> dict[str, float]:
    """Each rubric function's value on a finished `state`, by name."""
    return {f.__name__: f(state) for f in env.rubric.get_reward_funcs()}


@cache
def all_4x4_grids() -> tuple[tuple[int, ...], ...]:
    """Every valid full 4x4 grid, by brute force over rows of permutations (288 of them)."""
    perms = list(itertools.permutations(range(1, 5)))
    grids = []
    for rows in itertools.product(perms, repeat=4):
        cols_ok = all(len({r[c] for r in rows}) == 4 for c in range(4))
        boxes_ok = all(
            len({rows[r][c] for r in (br, br + 1) for c in (bc, bc + 1)}) == 4
            for br in (0, 2)
            for bc in (0, 2)
        )
        if cols_ok and boxes_ok:
            grids.append(tuple(d for r in rows for d in r))
    return tuple(grids)


def brute_conflict(grid: list[int], n: int, cell: int, digit: int) -> bool:
    """True when `digit` at `cell` repeats a digit of another cell in its row, column or box."""
    b = 2 if n == 4 else 3
    r, c = divmod(cell, n)
    for other in range(n * n):
        if other == cell or grid[other] != digit:
            continue
        orow, ocol = divmod(other, n)
        if orow == r or ocol == c or (orow // b, ocol // b) == (r // b, c // b):
            return True
    return False


def count_completions(puzzle: list[int], limit: int) -> int:
    """How many ways (up to `limit`) a 9x9 grid completes: plain backtracking on sets,
    always at the empty cell with the fewest digits left."""
    grid = list(puzzle)

    def allowed(cell: int) -> set[int]:
        r, c = divmod(cell, 9)
        seen = {grid[r * 9 + k] for k in range(9)} | {grid[k * 9 + c] for k in range(9)}
        br, bc = r // 3 * 3, c // 3 * 3
        seen |= {grid[(br + i) * 9 + bc + j] for i in range(3) for j in range(3)}
        return set(range(1, 10)) - seen

    def count() -> int:
        empty = [i for i in range(81) if not grid[i]]
        if not empty:
            return 1
        cell = min(empty, key=lambda i: len(allowed(i)))
        total = 0
        for digit in allowed(cell):
            grid[cell] = digit
            total += count()
            grid[cell] = 0
            if total >= limit:
                break
        return total

    return count()


def test_sudoku_4x4_puzzles_have_exactly_one_completion() -> None:
    grids = all_4x4_grids()
    assert len(grids) == 288
    for difficulty in ("easy", "medium", "hard"):
        env = sd.load_environment(num_examples=40, size=4, difficulty=difficulty, seed=3)
        for row in env.get_dataset():
            puzzle, solution = row["info"]["puzzle"], row["info"]["solution"]
            fits = [g for g in grids if all(p in (0, d) for p, d in zip(puzzle, g, strict=True))]
            assert fits == [tuple(solution)], puzzle


def test_sudoku_9x9_solutions_are_valid_and_unique() -> None:
    env = sd.load_environment(num_examples=15, size=9, difficulty="hard", seed=4)
    for row in env.get_dataset():
        puzzle, solution = row["info"]["puzzle"], row["info"]["solution"]
        for unit in range(9):
            assert sorted(solution[unit * 9 : unit * 9 + 9]) == list(range(1, 10))
            assert sorted(solution[unit::9]) == list(range(1, 10))
            br, bc = divmod(unit, 3)
            box = [solution[(br * 3 + r) * 9 + bc * 3 + c] for r in range(3) for c in range(3)]
            assert sorted(box) == list(range(1, 10))
        assert all(p in (0, s) for p, s in zip(puzzle, solution, strict=True))
        assert count_completions(puzzle, 2) == 1


def test_sudoku_placements_follow_the_brute_force_rule() -> None:
    """Random placements, each refused exactly when the plain check finds a repeat or it
    touches a given; the grid always stays free of repeats."""
    env = sd.load_environment(num_examples=3, size=4, seed=6)
    rng = random.Random(7)
    for row in env.get_dataset():
        game = env.new_game(row["info"])
        for _ in range(300):
            cell, digit = rng.randrange(16), rng.randint(0, 4)
            before = list(game["grid"])
            refused = bool(game["givens"][cell]) or (
                digit > 0 and brute_conflict(before, 4, cell, digit)
            )
            move = f"r{cell // 4 + 1}c{cell % 4 + 1}={digit}"
            try:
                text = env.apply_move(game, move)
            except InvalidMove:
                assert refused, move
                assert game["grid"] == before
                continue
            assert not refused, move
            assert game["grid"][cell] == digit
            left = game["grid"].count(0)
            cells = "cell" if left == 1 else "cells"
            assert f"{left} empty {cells} left." in text or env.is_over(game)
            assert not any(
                d and brute_conflict(game["grid"], 4, i, d) for i, d in enumerate(game["grid"])
            )
            if env.is_over(game):
                assert game["grid"] == row["info"]["solution"] and env.score(game) == 1.0
                break


def test_a_sudoku_move_is_judged_by_the_grid_it_leaves_whatever_its_order() -> None:
    """The placements of one move are checked together: listing a clear after the
    placement it makes room for is the same move as listing it before; multi-cell moves
    made of random placements are refused exactly when the grid they would leave breaks
    a rule, and then change nothing."""
    env = sd.load_environment(num_examples=2, size=4, seed=6)
    row = env.get_dataset()[0]
    solution, givens = row["info"]["solution"], row["info"]["puzzle"]
    empty = [i for i, d in enumerate(givens) if not d]
    name = lambda cell: f"r{cell // 4 + 1}c{cell % 4 + 1}"  # noqa: E731
    # Two empty cells of one row: put the digit of `there` at `here` first, then move it.
    here, there = next(
        (a, b)
        for a in empty
        for b in empty
        if a != b and a // 4 == b // 4 and not brute_conflict(givens, 4, a, solution[b])
    )
    for order in (
        (f"{name(there)}={solution[there]}", f"{name(here)}=0"),
        (f"{name(here)}=0", f"{name(there)}={solution[there]}"),
    ):
        game = env.new_game(row["info"])
        env.apply_move(game, f"{name(here)}={solution[there]}")
        env.apply_move(game, " ".join(order))
        assert (game["grid"][here], game["grid"][there]) == (0, solution[there]), order
    game = env.new_game(row["info"])
    with pytest.raises(InvalidMove, match="twice"):
        env.apply_move(game, f"{name(here)}=1 {name(here)}=2")
    rng = random.Random(9)
    for _ in range(400):
        game = env.new_game(row["info"])
        env.apply_move(game, f"{name(here)}={solution[here]}")
        before = list(game["grid"])
        cells = rng.sample(empty, 2)
        digits = [rng.randint(0, 4) for _ in cells]
        after = list(before)
        for cell, digit in zip(cells, digits, strict=True):
            after[cell] = digit
        broken = any(
            d and brute_conflict(after, 4, c, d) for c, d in zip(cells, digits, strict=True)
        )
        move = " ".join(f"{name(c)}={d}" for c, d in zip(cells, digits, strict=True))
        try:
            env.apply_move(game, move)
        except InvalidMove:
            assert broken, move
            assert game["grid"] == before
            continue
        assert not broken, move
        assert game["grid"] == after


def test_sudoku_efficiency_is_empty_cells_over_placements() -> None:
    env = sd.load_environment(num_examples=1, size=4, seed=8)
    row = env.get_dataset()[0]
    state = play(env, row, env.reference_policy)
    assert state["reward"] == 1.0 and rubric_scores(env, state)["efficiency"] == 1.0
    game = env.new_game(row["info"])
    empty = [i for i, d in enumerate(game["givens"]) if not d]
    first = empty[0]
    env.apply_move(game, f"r{first // 4 + 1}c{first % 4 + 1}=0")
    for i in empty:
        env.apply_move(game, f"r{i // 4 + 1}c{i % 4 + 1}={row['info']['solution'][i]}")
    assert env.efficiency(game, {}) == pytest.approx(len(empty) / (len(empty) + 1))


def test_sudoku_a_clear_written_with_a_dot_still_clears() -> None:
    """`r1c1=.` clears a cell: the dot there is the digit, not a full stop."""
    env = sd.load_environment(num_examples=1, size=4)
    info = env.dataset[0]["info"]
    game = env.new_game(info)
    cell = info["puzzle"].index(0)
    name = f"r{cell // 4 + 1}c{cell % 4 + 1}"
    env.apply_move(game, f"{name}={info['solution'][cell]}")
    assert game["grid"][cell] == info["solution"][cell]
    env.apply_move(game, f"{name}=.")
    assert game["grid"][cell] == 0
    env.apply_move(game, f"{name}={info['solution'][cell]}.")
    assert game["grid"][cell] == info["solution"][cell]


def test_sudoku_one_empty_cell_is_singular() -> None:
    solution = [1, 2, 3, 4, 3, 4, 1, 2, 2, 1, 4, 3, 4, 3, 2, 1]
    env = sd.load_environment(num_examples=1, size=4)
    game = env.new_game({"n": 4, "puzzle": [0, 0, *solution[2:]], "solution": solution})
    assert env.apply_move(game, "r1c1=1").startswith("Placed r1c1=1. 1 empty cell left.\n")


def one_placement(env: Any) -> Any:
    """The reference's first placement only: one digit a turn, the slowest sound play."""

    def place_one(messages: list[dict[str, Any]]) -> dict[str, str]:
        move = env.reference_policy(messages)["content"]
        first = move.removeprefix("<move>").removesuffix("</move>").split()[0]
        return {"role": "assistant", "content": f"<move>{first}</move>"}

    return place_one


def test_sudoku_turn_limit_leaves_room_for_the_invalid_moves_allowed() -> None:
    """The limit was size² turns: a 4x4 puzzle with 11 empty cells, filled one a turn after
    9 of the 10 invalid moves allowed, needs 20 turns and was cut off at 16."""
    env = sudoku.load_environment(
        num_examples=6, seed=3, size=4, difficulty="hard", max_invalid_moves=10
    )
    for row in env.get_dataset():
        state = play(env, row, slips_then(one_placement(env), 9))
        assert state["invalid_moves"] == 9 and won(env, state), row["info"]


@pytest.mark.parametrize("size", [4, 9])
def test_sudoku_refuses_givens_that_leave_no_cell_to_fill(size: int) -> None:
    """`givens=size*size` made every item a full grid: a game over before its first move,
    scored as a win whatever the model said."""
    with pytest.raises(ValueError, match="givens"):
        sudoku.load_environment(num_examples=1, size=size, givens=size * size)
    env = sudoku.load_environment(num_examples=1, size=4, givens=15)
    game = env.new_game(env.dataset[0]["info"])
    assert not env.is_over(game) and game["grid"].count(0) == 1
