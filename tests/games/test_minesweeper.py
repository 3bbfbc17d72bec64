"""Minesweeper: flood fill and flags on a hand-worked board, deduction, policies."""

from __future__ import annotations

import copy
import random
import re
from collections import deque
from typing import Any

import pytest
from game_play import evaluate_over_http, play, won
from vfgym.games import minesweeper as ms
from vfgym.games._base import move_message

import vfgym
from vfgym.errors import InvalidMove

# A 4x4 board with mines at D1 and A4, worked by hand:
#     A B C D
#   1 . . 1 *
#   2 . . 1 1
#   3 1 1 . .
#   4 * 1 . .
HAND_INFO = {"width": 4, "height": 4, "mines": 2, "mine_seed": 0}


HAND_MINES = [[0, 3], [3, 0]]


def hand_game() -> tuple[Any, dict[str, Any]]:
    env = ms.load_environment(num_examples=1)
    game = env.new_game(HAND_INFO)
    game["mine_cells"] = [list(m) for m in HAND_MINES]  # as if placed by the first reveal
    return env, game


def test_a_zero_floods_open_and_clearing_every_safe_cell_wins() -> None:
    env, game = hand_game()
    text = env.apply_move(game, "reveal A1")
    assert "Revealed A1 (+13 more)." in text and "You win!" in text
    assert env.render(game) == ("    A B C D\n  1 . . 1 #\n  2 . . 1 1\n  3 1 1 . .\n  4 # 1 . .")
    assert env.is_over(game) and env.score(game) == 1.0
    assert env.step_reward({"game_state": game}) == 1.0


def test_flags_and_a_mine_that_loses() -> None:
    env, game = hand_game()
    text = env.apply_move(game, "C1")  # a bare cell reveals
    assert "Revealed C1." in text and "  1 # # 1 #" in text
    env.apply_move(game, "flag D1, f b2")
    assert game["flags"] == [[0, 3], [1, 1]]
    with pytest.raises(InvalidMove, match="already flagged"):
        env.apply_move(game, "flag D1")
    with pytest.raises(InvalidMove, match="D1 is flagged; unflag it first"):
        env.apply_move(game, "reveal D1")
    with pytest.raises(InvalidMove, match="C1 is already revealed"):
        env.apply_move(game, "reveal A1, reveal C1")
    assert game["revealed"] == [[0, 2]]  # the valid reveal of A1 did not happen either
    with pytest.raises(InvalidMove, match="C1 is revealed; only hidden cells"):
        env.apply_move(game, "flag C1")
    with pytest.raises(InvalidMove, match="no flag to remove"):
        env.apply_move(game, "unflag A3")
    with pytest.raises(InvalidMove, match="off the board; cells go from A1 to D4"):
        env.apply_move(game, "reveal E2")
    with pytest.raises(InvalidMove, match="could not read"):
        env.apply_move(game, "dig at B2")
    text = env.apply_move(game, "unflag D1, reveal D1")
    assert "D1 was a mine. You lose." in text
    assert "  1 # # 1 X\n  2 # F # #" in text and "  4 * # # #" in text
    assert env.is_over(game) and env.score(game) == 0.0


def test_the_first_reveal_is_safe_and_opens_an_area() -> None:
    for seed in range(30):
        info = {"width": 8, "height": 8, "mines": 10, "mine_seed": seed}
        first = (seed % 8, (seed * 3) % 8)
        mines = ms.place_mines(seed, 8, 8, 10, first)
        assert len(mines) == 10
        assert first not in mines
        assert not mines & set(ms.neighbours(*first, 8, 8))
        # The same seed and first cell always give the same mines.
        assert ms.place_mines(seed, 8, 8, 10, first) == mines
        env = ms.load_environment(num_examples=1)
        game = env.new_game(info)
        env.apply_move(game, f"reveal {ms.cell_name(*first)}")
        assert game["blast"] is None and len(game["revealed"]) > 1


def test_deduction_single_cell_and_subset_rules() -> None:
    # The 0 at B3 clears C2; with 1 mine next to B2, C1 must then be the mine.
    board = [[".", "1", "#"], [".", "1", "#"], [".", ".", "."]]
    safe, _ = ms.deduce(board, mines=1)
    assert safe == {(1, 2)}
    # Subset rule: B1 sees {C1, C2} with 1 mine, B2 sees {C1, C2, C3} with 1 mine,
    # so C3 is safe; B3 likewise makes C1 safe.
    board = [[".", "1", "#"], [".", "1", "#"], [".", "1", "#"]]
    safe, _ = ms.deduce(board, mines=1)
    assert safe == {(0, 2), (2, 2)}
    # The mine count: 2 mines and 2 hidden cells left means no safe cell; 0 left means all.
    board = [["1", "#"], ["1", "#"]]
    assert ms.deduce(board, mines=0)[0] == {(0, 1), (1, 1)}
    # First move: the middle.
    assert ms.deduce([["#"] * 5 for _ in range(5)], mines=3) == (set(), (2, 2))


def test_guesses_pick_the_lowest_risk() -> None:
    # A1 = 1 touches B1, A2, B2 (1 in 3); the other 6 hidden cells share 1 mine (1 in 6)
    # once the count of 2 is split -- the guess must avoid A1's neighbours.
    board = [["1", "#", "#"], ["#", "#", "#"], ["#", "#", "#"]]
    safe, guess = ms.deduce(board, mines=2)
    assert not safe
    assert guess not in {(0, 1), (1, 0), (1, 1)}


def test_step_reward_is_the_share_of_safe_cells_a_move_opened() -> None:
    env = ms.load_environment(num_examples=1)
    state = env.setup_state({"info": HAND_INFO, "turn": 0})
    state["game_state"]["mine_cells"] = [list(m) for m in HAND_MINES]
    env.env_response([move_message("reveal C1")], state)
    assert env.step_reward(state) == pytest.approx(1 / 14)
    env.env_response([move_message("reveal C1")], state)  # refused: already revealed
    assert state["invalid_moves"] == 1 and env.step_reward(state) == 0.0
    env.env_response([move_message("reveal A1")], state)
    assert env.step_reward(state) == pytest.approx(13 / 14)


def test_items_are_deterministic_per_seed() -> None:
    a = ms.load_environment(num_examples=5, seed=1).dataset
    b = ms.load_environment(num_examples=5, seed=1).dataset
    c = ms.load_environment(num_examples=5, seed=2).dataset
    assert [r["info"] for r in a] == [r["info"] for r in b]
    assert [r["info"]["mine_seed"] for r in a] != [r["info"]["mine_seed"] for r in c]


def test_bad_knobs_are_refused() -> None:
    with pytest.raises(ValueError, match="difficulty"):
        ms.load_environment(difficulty="expert")
    with pytest.raises(ValueError, match="width"):
        ms.load_environment(width=30)
    with pytest.raises(ValueError, match="mines"):
        ms.load_environment(width=4, height=4, mines=10)


async def test_reference_and_random_policies_over_http() -> None:
    env = vfgym.load_environment("minesweeper", num_examples=3, difficulty="easy")
    ref, rnd = await evaluate_over_http(env, 3)
    assert ref.reward == [1.0] * 3
    assert ref.metrics["invalid_moves"] == [0.0] * 3
    assert sum(rnd.reward) < 3


def test_reference_policy_beats_random_by_a_clear_margin_over_50_seeds() -> None:
    env = ms.load_environment(num_examples=50, seed=3)
    ref = sum(won(env, play(env, row, env.reference_policy)) for row in env.eval_dataset)
    rnd_policy = env.make_random_policy(1)
    rnd = sum(won(env, play(env, row, rnd_policy)) for row in env.eval_dataset)
    assert ref >= 35  # about 80% on 8x8 with 10 mines; some boards need a guess
    assert rnd <= 5
    easy = ms.load_environment(num_examples=50, seed=3, difficulty="easy")
    assert sum(won(easy, play(easy, r, easy.reference_policy)) for r in easy.eval_dataset) >= 45


def test_invalid_move_limit_ends_the_game_as_a_loss() -> None:
    env = ms.load_environment(num_examples=1, max_invalid_moves=2)
    state = play(env, env.dataset[0], lambda m: move_message("reveal Z9"))
    messages = state["messages"]
    assert state["invalid_moves"] == 2
    assert "last invalid move" in messages[-1]["content"]
    assert env.is_completed(messages, state) and not won(env, state)


Square = tuple[int, int]


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


def open_5x5() -> tuple[Any, dict[str, Any]]:
    """A 5x5 board, mines at E1 and E5 and C5: revealing A1 opens the left part only."""
    env = ms.load_environment(num_examples=1)
    game = env.new_game({"width": 5, "height": 5, "mines": 3, "mine_seed": 0})
    game["mine_cells"] = [[0, 4], [4, 2], [4, 4]]
    return env, game


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


def test_ms_a_move_that_wins_plays_no_action_after_the_win() -> None:
    """A game ends when its last safe cell opens; the rest of that move must not reopen
    it (a reveal of a mine after the win turned it into a loss)."""
    env, game = hand_game()
    text = env.apply_move(game, "reveal A1, reveal D1")
    assert "You win!" in text and "You lose" not in text
    assert game["blast"] is None
    assert env.is_over(game) and env.score(game) == 1.0
    env, game = hand_game()
    env.apply_move(game, "reveal A1, flag D1")
    assert game["flags"] == [] and env.score(game) == 1.0


def test_ms_actions_before_the_winning_reveal_still_count() -> None:
    env, game = hand_game()
    text = env.apply_move(game, "flag D1, reveal A1")
    assert game["flags"] == [[0, 3]] and "Flagged D1." in text
    assert env.score(game) == 1.0


def test_minesweeper_one_mine_is_singular_and_still_read() -> None:
    env = ms.load_environment(num_examples=1, mines=1)
    prompt = list(env.dataset[0]["prompt"])
    assert "There is 1 mine. Reveal a first cell." in prompt[-1]["content"]
    assert env.read_board(prompt)[1] == 1
    assert env.read_board([{"role": "user", "content": "There are 1 mines.\n  1 #"}])[1] == 1


def test_ms_more_flags_than_mines_never_shows_a_negative_count() -> None:
    """With more flags than mines, at least the surplus is on safe cells: say so rather
    than show a negative number of mines left unflagged."""
    env, game = hand_game()  # 2 mines
    text = env.apply_move(game, "flag B1, flag C1")
    assert "Mines: 2 (unflagged: 0)." in text
    text = env.apply_move(game, "flag D1, flag B2")
    assert "unflagged: -" not in text
    assert "Mines: 2 (unflagged: 0; 4 flags, so at least 2 are on safe cells)." in text
    text = env.apply_move(game, "unflag B2")
    assert "Mines: 2 (unflagged: 0; 3 flags, so at least 1 is on a safe cell)." in text


def test_minesweeper_one_mine_given_as_a_number_still_plays() -> None:
    env = ms.load_environment(num_examples=1, mines=1)
    game = env.new_game(env.dataset[0]["info"])
    assert "Mines: 1 (unflagged: 0)." in env.apply_move(game, "flag A1")
