"""Maze: moves on a hand-drawn maze, generation, views, policies, invalid moves."""

from __future__ import annotations

import copy
import random
from collections import deque

import pytest
from game_play import evaluate_over_http, play, won
from vfgym.games import maze
from vfgym.games._base import move_message

import vfgym
from vfgym.errors import InvalidMove

# A hand-drawn 3x2-cell maze (7 columns, 5 rows); start top-left, exit bottom-right.
HAND = ["#######", "#.....#", "#####.#", "#.....#", "#######"]


HAND_INFO = {"grid": HAND, "start": [1, 1], "exit": [3, 1], "shortest": 10}


def test_steps_walls_and_the_exit_on_a_hand_drawn_maze() -> None:
    env = maze.load_environment(num_examples=1, view="partial", radius=1)
    game = env.new_game(HAND_INFO)
    text = env.apply_move(game, "EE")
    assert game["player"] == [1, 3]
    assert text == (
        "You moved EE.\nYou are at row 1, column 3.\nView of rows 0-2, columns 2-4:\n###\n.P.\n###"
    )
    with pytest.raises(InvalidMove, match=r"step 1 \(S\) from row 1, column 3 runs into a wall"):
        env.apply_move(game, "S")
    env.apply_move(game, "E E S S")  # spaces between steps are fine
    assert game["player"] == [3, 5] and game["steps"] == 6


def test_a_step_into_a_wall_rejects_the_whole_move() -> None:
    env = maze.load_environment(num_examples=1)
    game = env.new_game(HAND_INFO)
    with pytest.raises(InvalidMove, match=r"step 3 \(N\) from row 1, column 3 runs into a wall"):
        env.apply_move(game, "EEN")
    assert game["player"] == [1, 1] and game["steps"] == 0
    with pytest.raises(InvalidMove, match="not a step"):
        env.apply_move(game, "EX")
    with pytest.raises(InvalidMove, match="no steps"):
        env.apply_move(game, " , ")


def test_aliases_and_reaching_the_exit_mid_move() -> None:
    env = maze.load_environment(num_examples=1)
    game = env.new_game(HAND_INFO)
    env.apply_move(game, "right right R, r")  # words and U/R/D/L letters
    assert game["player"] == [1, 5]
    text = env.apply_move(game, "SSWWWWNN")  # the exit is reached after SSWWWW
    assert game["player"] == [3, 1] and game["steps"] == 10
    assert "reached the exit in 10 steps" in text
    assert env.is_over(game) and env.score(game) == 1.0
    assert env.efficiency(game, {}) == 1.0


def test_full_view_shows_the_whole_maze() -> None:
    game = {**HAND_INFO, "player": [1, 1]}
    text = maze.view_text(game, "full", 2)
    assert text.endswith("#######\n#P....#\n#####.#\n#E....#\n#######")
    assert "View of rows 0-4, columns 0-6:" in text


def test_carved_mazes_are_perfect() -> None:
    rng = random.Random(5)
    for width, height in [(2, 2), (4, 7), (10, 10)]:
        grid = maze.carve_maze(rng, width, height)
        floor = {(r, c) for r, row in enumerate(grid) for c, ch in enumerate(row) if ch == "."}
        # A spanning tree of w*h cells has w*h - 1 passages: 2wh - 1 floor squares.
        assert len(floor) == 2 * width * height - 1
        start = min(floor)
        seen, todo = {start}, [start]
        while todo:
            r, c = todo.pop()
            for dr, dc in maze.STEPS.values():
                if (r + dr, c + dc) in floor and (r + dr, c + dc) not in seen:
                    seen.add((r + dr, c + dc))
                    todo.append((r + dr, c + dc))
        assert seen == floor


def test_items_are_deterministic_per_seed() -> None:
    a = maze.load_environment(num_examples=5, seed=1).dataset
    b = maze.load_environment(num_examples=5, seed=1).dataset
    c = maze.load_environment(num_examples=5, seed=2).dataset
    assert [r["info"] for r in a] == [r["info"] for r in b]
    assert [r["info"]["grid"] for r in a] != [r["info"]["grid"] for r in c]


def test_bad_knobs_are_refused() -> None:
    with pytest.raises(ValueError, match="difficulty"):
        maze.load_environment(difficulty="nightmare")
    with pytest.raises(ValueError, match="width"):
        maze.load_environment(width=1)
    with pytest.raises(ValueError, match="view"):
        maze.load_environment(view="foggy")
    with pytest.raises(ValueError, match="radius"):
        maze.load_environment(view="partial", radius=0)


async def test_reference_and_random_policies_over_http() -> None:
    env = vfgym.load_environment(
        "maze", num_examples=4, difficulty="easy", view="partial", max_turns=12
    )
    ref, rnd = await evaluate_over_http(env, 4)
    assert ref.reward == [1.0] * 4
    assert ref.metrics["invalid_moves"] == [0.0] * 4
    assert sum(rnd.reward) < sum(ref.reward)


def test_reference_policy_takes_the_shortest_path_on_the_full_view() -> None:
    env = maze.load_environment(num_examples=50, seed=7)
    for row in env.eval_dataset:
        state = play(env, row, env.reference_policy)
        assert won(env, state) and state["turn"] == 1
        assert env.efficiency(state["game_state"], state) == 1.0


def test_reference_policy_explores_the_partial_view_to_the_exit() -> None:
    env = maze.load_environment(num_examples=50, seed=7, view="partial", radius=2)
    for row in env.eval_dataset:
        state = play(env, row, env.reference_policy)
        assert won(env, state) and state["invalid_moves"] == 0


def test_random_policy_does_worse() -> None:
    env = maze.load_environment(num_examples=20, difficulty="easy")
    policy = env.make_random_policy(3)
    wins = sum(won(env, play(env, row, policy)) for row in env.eval_dataset)
    assert wins < 15


def test_invalid_move_limit_ends_the_game_as_a_loss() -> None:
    env = maze.load_environment(num_examples=1, max_invalid_moves=2)
    state = play(env, env.dataset[0], lambda m: move_message("fly"))
    messages = state["messages"]
    assert state["invalid_moves"] == 2 and state["turn"] == 2
    assert "not a step" in messages[-1]["content"]
    assert env.is_completed(messages, state) and not won(env, state)


Square = tuple[int, int]


def maze_distances(grid: list[str], start: Square) -> dict[Square, int]:
    dist = {start: 0}
    queue = deque([start])
    while queue:
        r, c = queue.popleft()
        for nr, nc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if grid[nr][nc] != "#" and (nr, nc) not in dist:
                dist[(nr, nc)] = dist[(r, c)] + 1
                queue.append((nr, nc))
    return dist


@pytest.mark.parametrize("size", [(2, 2), (4, 7), (10, 10)])
def test_maze_items_are_perfect_and_the_exit_is_the_farthest_cell(size: tuple[int, int]) -> None:
    w, h = size
    env = maze.load_environment(num_examples=40, seed=5, width=w, height=h)
    for row in env.dataset:
        info = row["info"]
        grid = info["grid"]
        assert len(grid) == 2 * h + 1 and {len(line) for line in grid} == {2 * w + 1}
        assert set(grid[0] + grid[-1] + "".join(line[0] + line[-1] for line in grid)) == {"#"}
        floor = {(r, c) for r, line in enumerate(grid) for c, ch in enumerate(line) if ch == "."}
        edges = sum((r + 1, c) in floor for r, c in floor) + sum(
            (r, c + 1) in floor for r, c in floor
        )
        assert len(floor) == 2 * w * h - 1 and edges == len(floor) - 1  # a tree
        dist = maze_distances(grid, tuple(info["start"]))
        assert set(dist) == floor
        assert dist[tuple(info["exit"])] == max(dist.values()) == info["shortest"]
        assert info["start"] != info["exit"]


def test_maze_feedback_tells_the_true_position_and_window() -> None:
    env = maze.load_environment(num_examples=10, seed=1, view="partial", radius=2)
    rng = random.Random(0)
    for row in env.dataset:
        game = env.new_game(row["info"])
        for _ in range(30):
            step = rng.choice("NESW")
            before = copy.deepcopy(game)
            r, c = game["player"]
            dr, dc = maze.STEPS[step]
            if game["grid"][r + dr][c + dc] == "#":
                with pytest.raises(InvalidMove, match=f"from row {r}, column {c} runs into a wall"):
                    env.apply_move(game, step)
                assert game == before
                continue
            text = env.apply_move(game, step)
            assert game["player"] == [r + dr, c + dc] and game["steps"] == before["steps"] + 1
            if game["won"]:
                assert game["player"] == game["exit"]
                break
            pr, pc = game["player"]
            assert f"You are at row {pr}, column {pc}." in text
            r0, r1, c0, c1 = max(0, pr - 2), min(len(game["grid"]) - 1, pr + 2), max(0, pc - 2), 0
            c1 = min(len(game["grid"][0]) - 1, pc + 2)
            assert f"View of rows {r0}-{r1}, columns {c0}-{c1}:" in text
            window = text.split(":\n", 1)[1].split("\n")
            for dr_, line in enumerate(window):
                for dc_, ch in enumerate(line):
                    sq = (r0 + dr_, c0 + dc_)
                    truth = game["grid"][sq[0]][sq[1]]
                    if list(sq) == game["player"]:
                        assert ch == "P"
                    elif list(sq) == game["exit"]:
                        assert ch == "E"
                    else:
                        assert ch == truth


@pytest.mark.parametrize("radius", [1, 3])
def test_maze_reference_explores_any_radius_within_the_turn_budget(radius: int) -> None:
    env = maze.load_environment(
        num_examples=20, seed=3, width=9, height=6, view="partial", radius=radius
    )
    for row in env.dataset:
        state = play(env, row, env.reference_policy)
        assert won(env, state) and state["invalid_moves"] == 0
        assert state["game_state"]["steps"] >= row["info"]["shortest"]
