"""The rules of Sokoban, Minesweeper, Connect Four, Tower of Hanoi and Maze, checked
against small reference implementations written here, independently of the games.

Each game's docstring and system prompt promise rules; these tests replay many
seeded positions through the game and through a tiny re-implementation (a brute
force search, a plain simulator) and ask that both agree, so a slip in a game's
own shortcut (bitboards, pruning, flood fills, closed-form move counts) shows up.
"""

from __future__ import annotations

import copy
import random
import re
from collections import deque
from typing import Any

import pytest
from game_play import play, won
from vfgym.games import connect_four as c4
from vfgym.games import maze, sokoban
from vfgym.games import minesweeper as ms
from vfgym.games import tower_of_hanoi as hanoi

from vfgym.errors import InvalidMove

Square = tuple[int, int]

# ------------------------------------------------------------------ Connect Four

DIRECTIONS_C4 = ((0, 1), (1, 0), (1, 1), (1, -1))


def brute_winner(board: str) -> str | None:
    """Scan every cell and direction for four equal marks (X checked first, as the game does)."""
    found = set()
    for r in range(c4.ROWS):
        for c in range(c4.COLS):
            mark = board[r * c4.COLS + c]
            if mark == c4.EMPTY:
                continue
            for dr, dc in DIRECTIONS_C4:
                cells = [(r + k * dr, c + k * dc) for k in range(4)]
                if all(0 <= rr < c4.ROWS and 0 <= cc < c4.COLS for rr, cc in cells) and all(
                    board[rr * c4.COLS + cc] == mark for rr, cc in cells
                ):
                    found.add(mark)
    return "X" if "X" in found else ("O" if "O" in found else None)


def random_gravity_board(rng: random.Random, plies: int) -> str:
    """A board reached by `plies` alternating drops in random columns (no win check)."""
    board = c4.EMPTY * (c4.ROWS * c4.COLS)
    for ply in range(plies):
        cols = c4.legal_columns(board)
        if not cols:
            break
        board = c4.place(board, rng.choice(cols), "XO"[ply % 2])
    return board


def test_c4_winner_agrees_with_a_brute_force_scan_on_random_boards() -> None:
    rng = random.Random(1)
    for _ in range(3000):
        density = rng.random()
        board = "".join(
            rng.choice("XO") if rng.random() < density else c4.EMPTY
            for _ in range(c4.ROWS * c4.COLS)
        )
        assert c4.winner(board) == brute_winner(board), board


def test_c4_every_line_of_four_wins_alone_at_every_edge() -> None:
    """Each of the 69 lines, alone on an empty board, is a win for its mark."""
    count = 0
    for r in range(c4.ROWS):
        for c in range(c4.COLS):
            for dr, dc in DIRECTIONS_C4:
                cells = [(r + k * dr, c + k * dc) for k in range(4)]
                if not all(0 <= rr < c4.ROWS and 0 <= cc < c4.COLS for rr, cc in cells):
                    continue
                count += 1
                for mark in "XO":
                    board = list(c4.EMPTY * (c4.ROWS * c4.COLS))
                    for rr, cc in cells:
                        board[rr * c4.COLS + cc] = mark
                    assert c4.winner("".join(board)) == mark, cells
                    board[cells[3][0] * c4.COLS + cells[3][1]] = c4.EMPTY  # three only
                    assert c4.winner("".join(board)) is None, cells
    assert count == len(c4.windows()) == 69


def test_c4_filling_the_last_cell_without_a_line_is_a_draw() -> None:
    rows = ["XXOOXXO", "OOXXOOX"] * 3
    full = "".join(rows)
    assert brute_winner(full) is None
    board = "." + full[1:]  # the top-left cell (an X) still open
    env = c4.load_environment(num_examples=1)
    game = env.new_game({"board": board, "depth": 1, "opponent_seed": 0})
    text = env.apply_move(game, "1")
    assert game["result"] == "draw" and env.score(game) == 0.5
    assert "it is a draw" in text and game["board"] == full


def plain_negamax(me: int, them: int, depth: int) -> int:
    """The same search as the opponent's, without pruning or a table."""
    both = me | them
    if both & c4.FULL == c4.FULL:
        return 0
    if depth == 0:
        return c4.evaluate(me, them)
    best = -(c4.WIN * 4)
    for col in range(c4.COLS):
        if both & c4.TOP[col]:
            continue
        moved = me | c4.drop(both, col)
        value = c4.WIN + depth if c4.has_four(moved) else -plain_negamax(them, moved, depth - 1)
        best = max(best, value)
    return best


def plain_best(me: int, them: int, depth: int) -> set[int]:
    both = me | them
    values = {}
    for col in range(c4.COLS):
        if both & c4.TOP[col]:
            continue
        moved = me | c4.drop(both, col)
        if c4.has_four(moved):
            values[col] = c4.WIN + depth
        else:
            values[col] = -plain_negamax(them, moved, depth - 1)
    best = max(values.values())
    return {col for col, value in values.items() if value == best}


def test_c4_pruned_search_picks_the_same_best_columns_as_plain_minimax() -> None:
    rng = random.Random(5)
    checked = 0
    while checked < 40:
        board = random_gravity_board(rng, rng.randrange(4, 30))
        if c4.winner(board) or not c4.legal_columns(board):
            continue
        x, o = c4.to_bits(board)
        depth = 1 + checked % 3
        assert set(c4.best_columns(o, x, depth)) == plain_best(o, x, depth), (board, depth)
        checked += 1


def check_c4_turn(before: str, after: str, text: str) -> None:
    """One X then (unless the game ended) one O, each at the lowest free cell of the column
    the feedback names."""
    played = re.search(r"You played column (\d)\.", text)
    assert played, text
    board = c4.place(before, int(played.group(1)) - 1, "X")
    replied = re.search(r"O played column (\d)\.", text)
    if replied:
        col = int(replied.group(1)) - 1
        assert board[col] == c4.EMPTY, "the opponent played a full column"
        board = c4.place(board, col, "O")
    assert after == board
    assert c4.render_board(after) in text


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_c4_every_turn_is_legal_and_the_result_matches_the_board(depth: int) -> None:
    env = c4.load_environment(num_examples=12, seed=3, depth=depth)
    policy = env.make_random_policy(1)
    for row in env.dataset:
        game = env.new_game(row["info"])
        messages = list(row["prompt"])
        while not env.is_over(game):
            move = policy(messages)
            before = game["board"]
            text = env.apply_move(game, move["content"][6:-7])
            check_c4_turn(before, game["board"], text)
            messages += [move, {"role": "user", "content": text}]
        expected = {"X": "win", "O": "loss", None: "draw"}[brute_winner(game["board"])]
        assert game["result"] == expected
        if expected == "draw":
            assert c4.EMPTY not in game["board"]


def test_c4_a_full_column_is_refused_and_nothing_changes() -> None:
    board = ("X" + "." * 6) + ("O" + "." * 6) + ("X" + "." * 6) * 2 + ("O" + "." * 6) * 2
    env = c4.load_environment(num_examples=1)
    game = env.new_game({"board": board, "depth": 1, "opponent_seed": 0})
    kept = copy.deepcopy(game)
    with pytest.raises(InvalidMove, match="column 1 is full; choose one of 2, 3, 4, 5, 6, 7"):
        env.apply_move(game, "1")
    for bad in ("0", "8", "x", "4.5"):
        with pytest.raises(InvalidMove):
            env.apply_move(game, bad)
    assert game == kept


# --------------------------------------------------------------- Minesweeper


def mine_count(mines: set[Square], r: int, c: int, h: int, w: int) -> int:
    return sum(
        (r + dr, c + dc) in mines
        for dr in (-1, 0, 1)
        for dc in (-1, 0, 1)
        if (dr or dc) and 0 <= r + dr < h and 0 <= c + dc < w
    )


def reference_flood(start: Square, mines: set[Square], h: int, w: int) -> set[Square]:
    """Open `start`; a cell with no mine around opens its eight neighbours."""
    opened, queue = {start}, deque([start])
    while queue:
        r, c = queue.popleft()
        if mine_count(mines, r, c, h, w):
            continue
        for dr in (-1, 0, 1):
            for dc in (-1, 0, 1):
                n = (r + dr, c + dc)
                if 0 <= n[0] < h and 0 <= n[1] < w and n not in opened:
                    opened.add(n)
                    queue.append(n)
    return opened


def drawn_rows(text: str) -> list[list[str]]:
    return [line[4:].split(" ") for line in text.split("\n") if re.match(r"^\s*\d+ ", line)]


def check_drawn_board(text: str, game: dict[str, Any]) -> None:
    """Every cell of the shown board tells the truth about the hidden mines."""
    h, w = game["height"], game["width"]
    mines = {tuple(m) for m in game["mine_cells"]}
    revealed = {tuple(x) for x in game["revealed"]}
    flags = {tuple(x) for x in game["flags"]}
    rows = drawn_rows(text)
    assert len(rows) == h
    for r in range(h):
        for c in range(w):
            shown = rows[r][c]
            if (r, c) in revealed:
                count = mine_count(mines, r, c, h, w)
                assert shown == (str(count) if count else "."), (r, c)
            elif game["blast"] is None:
                assert shown == ("F" if (r, c) in flags else "#"), (r, c)
    assert not revealed & mines
    assert not revealed & flags, "a cell is both revealed and flagged"


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_ms_first_reveal_is_safe_clear_around_and_floods_like_the_reference(
    difficulty: str,
) -> None:
    env = ms.load_environment(num_examples=40, seed=2, difficulty=difficulty)
    rng = random.Random(difficulty)
    for row in env.dataset:
        game = env.new_game(row["info"])
        h, w = game["height"], game["width"]
        first = (rng.randrange(h), rng.randrange(w))
        text = env.apply_move(game, f"reveal {ms.cell_name(*first)}")
        mines = {tuple(m) for m in game["mine_cells"]}
        assert len(mines) == game["mines"]
        assert mine_count(mines, *first, h, w) == 0 and first not in mines
        opened = reference_flood(first, mines, h, w)
        assert {tuple(x) for x in game["revealed"]} == opened
        assert f"(+{len(opened) - 1} more)" in text or len(opened) == 1
        safe = h * w - game["mines"]
        assert env.step_reward({"game_state": game}) == len(opened) / safe
        assert f"Mines: {game['mines']} (unflagged: {game['mines']})." in text or env.is_over(game)
        check_drawn_board(text, game)


def test_ms_deduced_cells_are_never_mines_and_every_board_shown_is_true() -> None:
    """The reference reveals only what `deduce` proves safe, unless it must guess: a
    'proven' cell that holds a mine is an unsound deduction."""
    env = ms.load_environment(num_examples=60, seed=4, difficulty="hard")
    wins = 0
    for row in env.dataset:
        game = env.new_game(row["info"])
        messages = list(row["prompt"])
        while not env.is_over(game):
            board, mines = env.read_board(messages)
            safe, _ = ms.deduce(board, mines)
            if game["mine_cells"] is not None:
                truth = {tuple(m) for m in game["mine_cells"]}
                assert not safe & truth, "deduce called a mine safe"
            move = env.reference_policy(messages)
            text = env.apply_move(game, move["content"][6:-7])
            check_drawn_board(text, game)
            messages += [move, {"role": "user", "content": text}]
        wins += env.score(game) == 1.0
    assert wins >= 30


def open_5x5() -> tuple[Any, dict[str, Any]]:
    """A 5x5 board, mines at E1 and E5 and C5: revealing A1 opens the left part only."""
    env = ms.load_environment(num_examples=1)
    game = env.new_game({"width": 5, "height": 5, "mines": 3, "mine_seed": 0})
    game["mine_cells"] = [[0, 4], [4, 2], [4, 4]]
    return env, game


def test_ms_flagging_a_cell_an_earlier_reveal_of_the_move_opened_is_not_kept() -> None:
    env, game = open_5x5()
    text = env.apply_move(game, "reveal A1, flag B2")
    assert (1, 1) in {tuple(x) for x in game["revealed"]}
    assert [1, 1] not in game["flags"]
    assert "Flagged B2" not in text
    assert "Mines: 3 (unflagged: 3)." in text
    check_drawn_board(text, game)


def test_ms_refused_moves_leave_the_game_unchanged() -> None:
    env, game = open_5x5()
    env.apply_move(game, "reveal A1, flag E1")
    kept = copy.deepcopy(game)
    for bad in ("reveal A1", "reveal E1", "flag A1", "flag E1", "unflag D1", "F9", "reveal Z1"):
        with pytest.raises(InvalidMove):
            env.apply_move(game, f"flag D5, {bad}")
    assert game == kept


# ---------------------------------------------------------------- Tower of Hanoi


def hanoi_distances(disks: int, target: int) -> dict[tuple[int, ...], int]:
    """Breadth-first search back from the solved position: every position's distance.
    A position is the peg of each disk, smallest disk first."""
    solved = (target,) * disks
    dist = {solved: 0}
    queue = deque([solved])
    while queue:
        pos = queue.popleft()
        for nxt in hanoi_neighbours(pos):
            if nxt not in dist:
                dist[nxt] = dist[pos] + 1
                queue.append(nxt)
    return dist


def hanoi_neighbours(pos: tuple[int, ...]) -> list[tuple[int, ...]]:
    tops = {}
    for disk in range(len(pos) - 1, -1, -1):  # the smallest disk on a peg is its top
        tops[pos[disk]] = disk
    found = []
    for src, disk in tops.items():
        for dst in range(3):
            if dst != src and (dst not in tops or tops[dst] > disk):
                found.append((*pos[:disk], dst, *pos[disk + 1 :]))
    return found


@pytest.mark.parametrize("disks", [1, 2, 3, 4, 5])
def test_hanoi_optimal_count_and_first_move_match_breadth_first_search(disks: int) -> None:
    for target in range(3):
        dist = hanoi_distances(disks, target)
        assert len(dist) == 3**disks  # every placement is a legal, connected position
        for pos, d in dist.items():
            positions = [0, *pos]
            assert hanoi.optimal_moves(positions, target) == d, (pos, target)
            if d:
                src, dst = hanoi.first_optimal_move(positions, target)
                top = min(k for k in range(disks) if pos[k] == src)
                after = (*pos[:top], dst, *pos[top + 1 :])
                assert after in hanoi_neighbours(pos) and dist[after] == d - 1


def test_hanoi_larger_on_smaller_is_refused_with_the_disks_named() -> None:
    env = hanoi.load_environment(num_examples=1)
    game = env.new_game({"pegs": [[3, 1], [2], []], "disks": 3, "target": 2, "optimal": 5})
    kept = copy.deepcopy(game)
    with pytest.raises(InvalidMove, match="disk 2 cannot go on the smaller disk 1 on peg A"):
        env.apply_move(game, "B A")
    with pytest.raises(InvalidMove, match="peg C is empty"):
        env.apply_move(game, "C->A")
    with pytest.raises(InvalidMove, match="to itself"):
        env.apply_move(game, "2 2")
    assert game == kept
    text = env.apply_move(game, "1 to 2")
    assert game["pegs"] == [[3], [2, 1], []] and "Moved disk 1 from A to B." in text


@pytest.mark.parametrize("start", ["classic", "random"])
def test_hanoi_items_state_the_true_optimum_and_the_reference_meets_it(start: str) -> None:
    env = hanoi.load_environment(num_examples=30, seed=9, disks=5, start=start)
    dist = {t: hanoi_distances(5, t) for t in range(3)}
    for row in env.dataset:
        info = row["info"]
        pos = tuple(hanoi.positions_of(info["pegs"], 5)[1:])
        assert info["optimal"] == dist[info["target"]][pos] > 0
        assert env.max_turns >= info["optimal"]
        state = play(env, row, env.reference_policy)
        assert won(env, state) and state["turn"] == info["optimal"]
        assert env.efficiency(state["game_state"], state) == 1.0


# ----------------------------------------------------------------------- Maze


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


# -------------------------------------------------------------------- Sokoban


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


def brute_threats(mask: int, both: int) -> int:
    """Empty cells that would give `mask` four in a row, by trying each one."""
    found = 0
    for r in range(c4.ROWS):
        for c in range(c4.COLS):
            bit = 1 << (c * (c4.ROWS + 1) + r)
            if not bit & both and c4.has_four(mask | bit):
                found |= bit
    return found


def test_c4_threats_are_exactly_the_cells_that_complete_four() -> None:
    rng = random.Random(21)
    for _ in range(400):
        board = random_gravity_board(rng, rng.randrange(0, 42))
        x, o = c4.to_bits(board)
        if c4.has_four(x) or c4.has_four(o):
            continue
        for me in (x, o):
            assert c4.threats(me, x | o) == brute_threats(me, x | o), board


@pytest.mark.parametrize("first", ["player", "opponent"])
def test_c4_items_start_from_the_position_the_intro_describes(first: str) -> None:
    env = c4.load_environment(num_examples=20, seed=4, first=first, opening_plies=4)
    for row in env.dataset:
        board, question = row["info"]["board"], row["prompt"][-1]["content"]
        assert brute_winner(board) is None and c4.render_board(board) in question
        xs, os_ = board.count("X"), board.count("O")
        if first == "opponent":
            assert os_ == xs + 1 == 3
            assert re.search(r"O moves first and played column \d\.", question)
        else:
            assert xs == os_ == 2 and "You move first." in question
        for i, cell in enumerate(board):  # pieces rest on the floor or on another piece
            below = i + c4.COLS
            assert cell == c4.EMPTY or below >= len(board) or board[below] != c4.EMPTY


def test_ms_reference_plays_a_legal_move_on_a_board_with_a_wrong_flag() -> None:
    """The reference reads only the conversation; a flag the player put on a safe cell
    must not make it send a reveal the game refuses."""
    env, game = open_5x5()
    prompt = {"role": "user", "content": "There are 3 mines. Reveal a first cell."}
    messages: list[dict[str, Any]] = [prompt]
    for move in ("reveal A1", "flag D5"):  # D5 is safe: the 1 on E4 already has E5
        text = env.apply_move(game, move)
        messages += [{"role": "assistant", "content": f"<move>{move}</move>"}]
        messages += [{"role": "user", "content": text}]
    reply = env.reference_policy(messages)["content"][6:-7]
    text = env.apply_move(game, reply)
    assert "You win!" in text and env.score(game) == 1.0


@pytest.mark.parametrize("radius", [1, 3])
def test_maze_reference_explores_any_radius_within_the_turn_budget(radius: int) -> None:
    env = maze.load_environment(
        num_examples=20, seed=3, width=9, height=6, view="partial", radius=radius
    )
    for row in env.dataset:
        state = play(env, row, env.reference_policy)
        assert won(env, state) and state["invalid_moves"] == 0
        assert state["game_state"]["steps"] >= row["info"]["shortest"]
