"""Sokoban: pushes on hand-drawn boards, the solver, generated levels, policies."""

from __future__ import annotations

import copy
import random
from collections import deque
from typing import Any

import pytest
from game_play import evaluate_over_http, play, won
from vfgym.games import sokoban
from vfgym.games import sokoban as sb
from vfgym.games._base import move_message

import vfgym
from vfgym.errors import InvalidMove

CORRIDOR = "#######\n#@ $ .#\n#######"


# Two boxes side by side in a corridor: pushing right would move both.
PAIR = "########\n#@$$  .#\n#.     #\n########"


# A box in a corner that is not a goal can never move again.
STUCK = "#####\n#$ .#\n# @ #\n#####"


TURN = "#######\n#     #\n# $@  #\n#  .  #\n#######"


def new(board: str, par: int = 3) -> tuple[Any, dict[str, Any]]:
    env = sokoban.load_environment(num_examples=1, difficulty="easy")
    return env, env.new_game({"board": board, "par": par})


def test_walking_and_pushing_in_a_corridor() -> None:
    env, game = new(CORRIDOR)
    text = env.apply_move(game, "R")
    assert game["board"] == "#######\n# @$ .#\n#######"
    assert "You moved R (0 pushes). Boxes on goals: 0/1." in text
    env.apply_move(game, "r")
    assert game["board"] == "#######\n#  @$.#\n#######" and game["pushes"] == 1
    text = env.apply_move(game, "RLLL")  # solved after the first step; the rest is ignored
    assert game["board"] == "#######\n#   @*#\n#######"
    assert "Solved in 3 steps (par 3)" in text
    assert env.is_over(game) and env.score(game) == 1.0 and env.efficiency(game, {}) == 1.0


def test_blocked_moves_are_refused_whole() -> None:
    env, game = new(CORRIDOR)
    with pytest.raises(InvalidMove, match=r"step 1 \(U\) walks into a wall"):
        env.apply_move(game, "U")
    assert game["board"] == CORRIDOR and game["steps"] == 0
    env, turn = new(TURN)
    with pytest.raises(InvalidMove, match=r"step 2 \(L\) pushes a box into a wall"):
        env.apply_move(turn, "LL")
    assert turn["board"] == TURN and turn["pushes"] == 0
    env2, pair = new(PAIR)
    with pytest.raises(InvalidMove, match=r"step 1 \(R\) pushes a box into a box"):
        env2.apply_move(pair, "R")
    with pytest.raises(InvalidMove, match="not a move"):
        env2.apply_move(pair, "go right")
    with pytest.raises(InvalidMove, match="not a move"):
        env2.apply_move(pair, "")


def test_restart_puts_the_level_back() -> None:
    env, game = new(CORRIDOR)
    env.apply_move(game, "RR")
    text = env.apply_move(game, "restart")
    assert game["board"] == CORRIDOR and text.endswith(CORRIDOR)
    assert game["steps"] == 2  # steps already taken still count


def test_solver_on_hand_drawn_boards() -> None:
    level, boxes, player = sokoban.read_board(CORRIDOR)
    assert sokoban.solve(level, boxes, player) == "RRR"
    # Worked by hand: the box goes down (player above it: U L, push D), then right
    # (player beside it: L D, push R) -- 6 steps; right-then-down needs 8.
    level, boxes, player = sokoban.read_board(TURN)
    solution = sokoban.solve(level, boxes, player)
    assert solution == "ULDLDR"
    env, game = new(TURN)
    env.apply_move(game, solution)
    assert env.is_over(game) and game["pushes"] == 2
    # Dead squares: a corner off the goals; the solver proves there is no way out.
    level, boxes, player = sokoban.read_board(STUCK)
    assert (1, 1) not in level.live and (1, 3) in level.live
    assert sokoban.solve(level, boxes, player) is None
    # Two boxes stuck against the top wall: neither can ever reach a goal below.
    level, boxes, player = sokoban.read_board(PAIR)
    assert sokoban.solve(level, boxes, player) is None


def test_boards_read_back_and_non_boards_are_ignored() -> None:
    level, boxes, player = sokoban.read_board("Push it.\n" + TURN + "\nGood luck")
    assert sokoban.render_board(level, boxes, player) == TURN
    assert sokoban.read_board("# not a board #") is None
    assert sokoban.read_board("#  @ $ #") is None  # no closing walls above and below


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_generated_levels_are_solvable_and_unsolved(difficulty: str) -> None:
    env = sokoban.load_environment(num_examples=5, difficulty=difficulty, seed=11)
    n_boxes = sokoban.PRESETS[difficulty][2]
    for row in env.dataset:
        board = row["info"]["board"]
        assert board.count("$") + board.count("*") == n_boxes
        assert "$" in board  # never solved at the start
        game = env.new_game(row["info"])
        env.apply_move(game, row["answer"])  # the stored solution wins
        assert env.is_over(game)
        assert len(row["answer"]) == row["info"]["par"]


def test_items_are_deterministic_per_seed() -> None:
    a = sokoban.load_environment(num_examples=4, seed=1, difficulty="easy").dataset
    b = sokoban.load_environment(num_examples=4, seed=1, difficulty="easy").dataset
    c = sokoban.load_environment(num_examples=4, seed=2, difficulty="easy").dataset
    assert [r["info"] for r in a] == [r["info"] for r in b]
    assert [r["info"]["board"] for r in a] != [r["info"]["board"] for r in c]


def test_bad_knobs_are_refused() -> None:
    with pytest.raises(ValueError, match="difficulty"):
        sokoban.load_environment(difficulty="expert")
    with pytest.raises(ValueError, match="width"):
        sokoban.load_environment(width=2)
    with pytest.raises(ValueError, match="boxes"):
        sokoban.load_environment(boxes=9)
    with pytest.raises(ValueError, match="too small"):
        sokoban.load_environment(width=3, height=3, boxes=3)


async def test_reference_and_random_policies_over_http() -> None:
    env = vfgym.load_environment("sokoban", num_examples=3, difficulty="easy", max_turns=10)
    ref, rnd = await evaluate_over_http(env, 3)
    assert ref.reward == [1.0] * 3
    assert ref.metrics["turns"] == [1.0] * 3
    assert ref.metrics["efficiency"] == [1.0] * 3
    assert sum(rnd.reward) < 3


def test_reference_policy_solves_50_seeds() -> None:
    env = sokoban.load_environment(num_examples=50, seed=5)
    for row in env.eval_dataset:
        state = play(env, row, env.reference_policy)
        assert won(env, state) and state["turn"] == 1


def test_random_policy_does_worse() -> None:
    env = sokoban.load_environment(num_examples=20, difficulty="easy")
    policy = env.make_random_policy(4)
    wins = sum(won(env, play(env, row, policy)) for row in env.eval_dataset)
    assert wins < 10


def test_invalid_move_limit_ends_the_game_as_a_loss() -> None:
    env = sokoban.load_environment(num_examples=1, difficulty="easy", max_invalid_moves=2)
    state = play(env, env.dataset[0], lambda m: move_message("jump"))
    messages = state["messages"]
    assert state["invalid_moves"] == 2
    assert "last invalid move" in messages[-1]["content"]
    assert env.is_completed(messages, state) and not won(env, state)


Square = tuple[int, int]


def sokoban_parse(board: str) -> tuple[set[Square], set[Square], set[Square], Square]:
    walls, goals, boxes, player = set(), set(), set(), (0, 0)
    for r, line in enumerate(board.split("\n")):
        for c, ch in enumerate(line):
            if ch == "#":
                walls.add((r, c))
            if ch in ".*+":
                goals.add((r, c))
            if ch in "$*":
                boxes.add((r, c))
            if ch in "@+":
                player = (r, c)
    return walls, goals, boxes, player


def sokoban_step(
    walls: set[Square], boxes: frozenset[Square], player: Square, step: str
) -> tuple[frozenset[Square], Square] | None:
    """One step under the stated rules, or None when it is refused."""
    dr, dc = sokoban.DIRECTIONS[step]
    nxt = (player[0] + dr, player[1] + dc)
    if nxt in walls:
        return None
    if nxt in boxes:
        beyond = (nxt[0] + dr, nxt[1] + dc)
        if beyond in walls or beyond in boxes:
            return None
        boxes = (boxes - {nxt}) | {beyond}
    return boxes, nxt


def sokoban_solvable(board: str, limit: int = 400_000) -> bool | None:
    """Plain breadth-first search over (boxes, player); None when it gives up."""
    walls, goals, boxes, player = sokoban_parse(board)
    start = (frozenset(boxes), player)
    seen = {start}
    queue = deque([start])
    while queue:
        bx, at = queue.popleft()
        if bx <= goals:
            return True
        for step in "UDLR":
            nxt = sokoban_step(walls, bx, at, step)
            if nxt is not None and nxt not in seen:
                if len(seen) > limit:
                    return None
                seen.add(nxt)
                queue.append(nxt)
    return False


def random_room(rng: random.Random, rows: int, cols: int, n_boxes: int) -> str:
    """A small walled room with random inner walls, boxes, goals and player (any may be
    unsolvable)."""
    cells = [(r, c) for r in range(1, rows - 1) for c in range(1, cols - 1)]
    picks = rng.sample(cells, 2 * n_boxes + 1 + rng.randrange(3))
    boxes, goals = set(picks[:n_boxes]), set(picks[n_boxes : 2 * n_boxes])
    player, inner = picks[2 * n_boxes], set(picks[2 * n_boxes + 1 :])
    walls = {(r, c) for r in range(rows) for c in range(cols) if (r, c) not in cells} | inner
    level = sokoban.Level(walls, goals, rows, cols)
    return sokoban.render_board(level, boxes, player)


def test_sokoban_moves_match_a_plain_simulator() -> None:
    env = sokoban.load_environment(num_examples=15, seed=6, difficulty="hard")
    rng = random.Random(2)
    for row in env.dataset:
        game = env.new_game(row["info"])
        for _ in range(40):
            if env.is_over(game):
                break
            move = "".join(rng.choice("UDLR") for _ in range(rng.randrange(1, 4)))
            walls, goals, boxes, player = sokoban_parse(game["board"])
            state: tuple[frozenset[Square], Square] | None = (frozenset(boxes), player)
            taken = ""
            for step in move:
                state = sokoban_step(walls, state[0], state[1], step)
                if state is None:
                    break
                taken += step
                if state[0] <= goals:
                    break
            before = copy.deepcopy(game)
            if state is None:
                with pytest.raises(InvalidMove):
                    env.apply_move(game, move)
                assert game == before
                continue
            text = env.apply_move(game, move)
            lines = game["board"].split("\n")
            level = sokoban.Level(walls, goals, len(lines), len(lines[0]))
            expected = sokoban.render_board(level, state[0], state[1])
            assert game["board"] == expected and game["steps"] == before["steps"] + len(taken)
            on_goal = len(state[0] & goals)
            assert env.is_over(game) == (on_goal == len(goals))
            if env.is_over(game):
                assert "You win!" in text
            else:
                assert (
                    f"You moved {taken} " in text and f"on goals: {on_goal}/{len(goals)}." in text
                )


@pytest.mark.parametrize("difficulty", ["easy", "medium"])
def test_sokoban_levels_are_solvable_by_brute_force_and_the_par_is_a_real_solution(
    difficulty: str,
) -> None:
    env = sokoban.load_environment(num_examples=25, seed=8, difficulty=difficulty)
    for row in env.dataset:
        board, par = row["info"]["board"], row["info"]["par"]
        assert sokoban_solvable(board) is True
        walls, goals, boxes, player = sokoban_parse(board)
        state: tuple[frozenset[Square], Square] | None = (frozenset(boxes), player)
        for step in row["answer"]:
            state = sokoban_step(walls, state[0], state[1], step)
            assert state is not None
        assert state[0] <= goals and len(row["answer"]) == par
        assert not boxes <= goals


def test_sokoban_reference_wins_within_par() -> None:
    env = sokoban.load_environment(num_examples=20, seed=11, difficulty="hard")
    for row in env.dataset:
        state = play(env, row, env.reference_policy)
        assert won(env, state) and state["invalid_moves"] == 0
        assert env.efficiency(state["game_state"], state) == 1.0


def test_sokoban_solver_finds_a_solution_exactly_when_brute_force_does() -> None:
    """The solver prunes dead squares, frozen blocks and walks; none may lose a solution."""
    rng = random.Random(13)
    verdicts = {True: 0, False: 0}
    for k in range(300):
        board = random_room(rng, 5 + k % 2, 6, 1 + k % 3)
        truth = sokoban_solvable(board)
        if truth is None:
            continue
        level, boxes, player = sokoban.read_board(board)
        solution = sokoban.solve(level, boxes, player)
        assert (solution is not None) == truth, board
        verdicts[truth] += 1
        if solution:
            walls, goals, _, _ = sokoban_parse(board)
            state: tuple[frozenset[Square], Square] | None = (boxes, player)
            for step in solution:
                state = sokoban_step(walls, state[0], state[1], step)
                assert state is not None, board
            assert state[0] <= goals
    assert min(verdicts.values()) > 20  # both kinds of room were tried


def test_sokoban_a_one_step_solve_and_a_one_box_level_are_singular() -> None:
    env = sb.load_environment(num_examples=1, difficulty="easy")
    assert env.dataset[0]["prompt"][-1]["content"].startswith("Push the box onto the goal.\n")
    game = env.new_game({"board": "#####\n#@$.#\n#####", "par": 1})
    assert env.apply_move(game, "R").startswith("Solved in 1 step (par 1). You win!")


def test_sokoban_max_turns_none_is_the_default_as_in_every_other_game() -> None:
    """None failed with "'<' not supported between 'NoneType' and 'int'"."""
    assert sokoban.load_environment(num_examples=1, max_turns=None).max_turns == 50
    assert sokoban.load_environment(num_examples=1, max_turns=7).max_turns == 7
