"""The rules of Wordle, Mastermind, Hangman, Sudoku, Nim, tic-tac-toe and Guess the Number,
checked against small reference implementations written here, independently of the games.

Each game's docstring and system prompt promise rules; these tests replay many seeded
positions through the game and through a tiny re-implementation (a brute-force scorer, a
plain game-tree search, an enumeration of every grid) and ask that both agree, so a slip
in a game's own shortcut (vectorised scores, nim-sums, memoised minimax) shows up.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections import Counter
from functools import cache
from typing import Any

import numpy as np
import pytest
from game_play import play, slips_then, won
from vfgym.games import guess_the_number as gtn
from vfgym.games import hangman as hm
from vfgym.games import mastermind as mm
from vfgym.games import nim
from vfgym.games import sudoku as sd
from vfgym.games import tictactoe as ttt
from vfgym.games import wordle as wd

from vfgym.engine.state import new_state
from vfgym.errors import InvalidMove


def fresh_state(env: Any, row: dict[str, Any]) -> dict[str, Any]:
    """A State set up for `row`, as the rollout loop makes it."""
    state = new_state(row["prompt"], [], row["answer"], row["task"], row["info"], 0)
    return env.setup_state(state)


def rubric_scores(env: Any, state: dict[str, Any]) -> dict[str, float]:
    """Each rubric function's value on a finished `state`, by name."""
    return {f.__name__: f(state) for f in env.rubric.get_reward_funcs()}


def brute_marks(guess: str, answer: str) -> str:
    """Greens first; then, left to right, a yellow while the answer has an unmatched copy."""
    marks = ["G" if g == a else "" for g, a in zip(guess, answer, strict=True)]
    left = Counter(a for a, m in zip(answer, marks, strict=True) if m != "G")
    for i, g in enumerate(guess):
        if marks[i]:
            continue
        if left[g] > 0:
            marks[i], left[g] = "Y", left[g] - 1
        else:
            marks[i] = "-"
    return "".join(marks)


def word_pairs(rng: random.Random, count: int) -> list[tuple[str, str]]:
    """Random listed pairs, half of them with a repeated letter in the guess or answer."""
    words = wd.word_bank().words
    doubled = [w for w in words if len(set(w)) < 5]
    pairs = []
    for k in range(count):
        guess = rng.choice(doubled if k % 2 else words)
        answer = rng.choice(doubled if k % 3 == 0 else words)
        pairs.append((guess, answer))
    return pairs


def test_wordle_marks_agree_with_a_brute_force_scorer() -> None:
    rng = random.Random(1)
    pairs = word_pairs(rng, 6000)
    bank = wd.word_bank()
    for guess, answer in pairs:
        assert wd.feedback(guess, answer) == brute_marks(guess, answer), (guess, answer)
    guesses = np.array([bank.index[g] for g, _ in pairs[:300]])
    answers = np.array([bank.index[a] for _, a in pairs[:300]])
    codes = wd.pattern_codes(bank, guesses, answers)
    for i, g in enumerate(guesses):
        for j, a in enumerate(answers):
            want = wd.pattern_code(brute_marks(bank.words[g], bank.words[a]))
            assert codes[i, j] == want, (bank.words[g], bank.words[a])


def test_wordle_marks_on_made_up_letter_strings() -> None:
    """The rule itself, on strings of three letters so repeats are everywhere."""
    rng = random.Random(2)
    for _ in range(5000):
        guess = "".join(rng.choice("abc") for _ in range(5))
        answer = "".join(rng.choice("abc") for _ in range(5))
        assert wd.feedback(guess, answer) == brute_marks(guess, answer), (guess, answer)


def test_wordle_feedback_text_tells_the_marks_and_guesses_left() -> None:
    env = wd.load_environment(num_examples=1)
    game = env.new_game({"word": "essay", "max_guesses": 6})
    text = env.apply_move(game, "sassy")
    assert text.startswith(f"SASSY  {brute_marks('sassy', 'essay')}. 5 guesses left.")
    assert "1. SASSY  YYG-G" in text
    for _ in range(4):
        env.apply_move(game, "crane")
    text = env.apply_move(game, "crane")
    assert "Out of guesses: the word was ESSAY." in text and env.is_over(game)
    assert env.score(game) == 0.0


def test_wordle_efficiency_is_as_documented() -> None:
    env = wd.load_environment(num_examples=1)
    game = env.new_game({"word": "crane", "max_guesses": 6})
    env.apply_move(game, "crane")
    assert env.efficiency(game, {}) == 1.0
    game = env.new_game({"word": "crane", "max_guesses": 6})
    for _ in range(5):
        env.apply_move(game, "sassy")
    env.apply_move(game, "crane")
    assert env.efficiency(game, {}) == pytest.approx(1 / 6)


def brute_pegs(guess: str, secret: str) -> tuple[int, int]:
    """Black pegs in place; whites by pairing each remaining guess peg with an unused
    remaining hidden peg of its colour, one at a time."""
    black = [g == s for g, s in zip(guess, secret, strict=True)]
    unused = [s for s, b in zip(secret, black, strict=True) if not b]
    white = 0
    for g, b in zip(guess, black, strict=True):
        if not b and g in unused:
            unused.remove(g)
            white += 1
    return sum(black), white


def test_mastermind_scores_agree_with_a_brute_force_scorer() -> None:
    rng = random.Random(3)
    for pegs, colours in ((2, 2), (3, 3), (4, 6), (5, 3), (6, 4)):
        letters = mm.ALPHABET[:colours]
        for _ in range(800):
            guess = "".join(rng.choice(letters) for _ in range(pegs))
            secret = "".join(rng.choice(letters) for _ in range(pegs))
            assert mm.score_guess(guess, secret) == brute_pegs(guess, secret), (guess, secret)
    space = (4, 6, True)
    codes = mm.code_space(*space)
    picks = np.array(rng.sample(range(len(codes)), 200))
    scores = mm.score_codes(space, picks, picks)
    for i, g in enumerate(picks):
        for j, s in enumerate(picks):
            black, white = brute_pegs(codes[g], codes[s])
            assert scores[i, j] == black * 10 + white


def test_mastermind_feedback_and_board_tell_the_truth() -> None:
    env = mm.load_environment(num_examples=1)
    game = env.new_game(
        {"secret": "AABC", "pegs": 4, "colours": 6, "repeats": True, "max_guesses": 3}
    )
    text = env.apply_move(game, "CAAA")
    assert text.startswith("CAAA: black 1 white 2. 2 guesses left.")
    assert "1. CAAA  black 1 white 2" in text
    env.apply_move(game, "FFFF")
    text = env.apply_move(game, "BBBB")
    assert "Out of guesses: it was AABC." in text and env.is_over(game)
    assert env.score(game) == 0.0


@pytest.mark.parametrize(
    "kwargs", [{"difficulty": "easy"}, {"difficulty": "hard"}, {"repeats": False}]
)
def test_mastermind_reference_cracks_every_seed(kwargs: dict[str, Any]) -> None:
    env = mm.load_environment(num_examples=40, seed=5, **kwargs)
    for row in env.get_dataset():
        state = play(env, row, env.reference_policy)
        assert won(env, state), row["info"]


def reference_after_a_slip(env: Any, moves: list[str], slip: str) -> tuple[str, str]:
    """The reference's next move after `moves`, without and with a refused `slip` after them."""
    row = env.get_dataset()[0]
    state = fresh_state(env, row)
    messages = list(row["prompt"])
    for move in moves:
        messages.append({"role": "assistant", "content": f"<move>{move}</move>"})
        reply, state = env.env_response(messages, state)
        messages.extend(reply)
    clean = env.reference_policy(messages)["content"]
    messages.append({"role": "assistant", "content": f"<move>{slip}</move>"})
    reply, state = env.env_response(messages, state)
    assert reply[0]["content"].startswith("Invalid move:")
    messages.extend(reply)
    return clean, env.reference_policy(messages)["content"]


def test_mastermind_reference_reads_the_board_after_an_invalid_move() -> None:
    """The policy reads the scored guesses from the conversation: a refused move in between
    (a model's slip, then the reference taking over) must not make it forget the board."""
    env = mm.load_environment(num_examples=1, seed=2)
    clean, after_slip = reference_after_a_slip(env, ["AABB", "CCDD"], "not a code")
    assert after_slip == clean


def test_wordle_reference_reads_the_board_after_an_invalid_move() -> None:
    env = wd.load_environment(num_examples=1, seed=2)
    clean, after_slip = reference_after_a_slip(env, ["crane", "pilot"], "qqqqq")
    assert after_slip == clean


def hangman_env(**kwargs: Any) -> hm.HangmanEnv:
    return hm.load_environment(num_examples=1, **kwargs)


def test_hangman_repeated_letters_and_words_are_refused_without_cost() -> None:
    env = hangman_env()
    game = env.new_game({"word": "banana", "max_misses": 6})
    env.apply_move(game, "a")
    env.apply_move(game, "z")
    env.apply_move(game, "bandit")
    before = {k: (list(v) if isinstance(v, list) else v) for k, v in game.items()}
    for move in ("a", "A", "z", "BANDIT"):
        with pytest.raises(InvalidMove):
            env.apply_move(game, move)
    assert game == before and game["misses"] == 2


def test_hangman_whole_word_guesses() -> None:
    env = hangman_env()
    game = env.new_game({"word": "banana", "max_misses": 6})
    text = env.apply_move(game, "a")
    assert text.startswith("A is in the word (3 times).") and "Word: _ A _ A _ A" in text
    text = env.apply_move(game, "cabana")
    assert text.startswith("CABANA is not the word.") and game["misses"] == 1
    assert "Wrong words: CABANA" in text and "Misses: 1 of 6" in text
    text = env.apply_move(game, "Banana")
    assert env.is_over(game) and env.score(game) == 1.0
    assert "You found BANANA with 1 miss." in text and "Word: B A N A N A" in text


def test_hangman_losing_on_misses_reveals_the_word() -> None:
    env = hangman_env()
    game = env.new_game({"word": "banana", "max_misses": 2})
    env.apply_move(game, "q")
    text = env.apply_move(game, "bandit")
    assert "Out of misses: the word was BANANA." in text
    assert env.is_over(game) and env.score(game) == 0.0


def test_hangman_default_turns_let_a_winnable_game_finish() -> None:
    """A game is lost when the misses run out, not by the turn limit: a player who spends
    many misses on whole words and still finds the word in time must be allowed to."""
    env = hangman_env(difficulty="easy", max_misses=20)  # words of up to 12 letters
    word = "abcdefghijkl"  # twelve different letters: twelve hits to reveal it
    game = env.new_game({"word": word, "max_misses": 20})
    pairs = itertools.product("yz", "abcdefghijklmnopqrstuvwxyz")
    wrong = [f"{'z' * 10}{a}{b}" for a, b in itertools.islice(pairs, 19)]
    moves = [*wrong, *word]
    for move in moves:
        env.apply_move(game, move)
    assert env.score(game) == 1.0 and game["misses"] == 19
    assert len(moves) <= env.max_turns - env.max_invalid_moves


def test_hangman_reference_candidates_match_a_plain_filter() -> None:
    rng = random.Random(4)
    pool = hm.words_by_length()[6]
    for _ in range(60):
        word = rng.choice(pool)
        guessed = rng.sample("abcdefghijklmnopqrstuvwxyz", rng.randint(1, 8))
        shown = hm.pattern(word, guessed)
        want = [
            w
            for w in pool
            if all(
                (c in guessed and c == s) or (c not in guessed and s == "_")
                for c, s in zip(w, shown, strict=True)
            )
        ]
        assert hm.candidates(shown, set(guessed), set()) == want


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


def test_sudoku_4x4_puzzles_have_exactly_one_completion() -> None:
    grids = all_4x4_grids()
    assert len(grids) == 288
    for difficulty in ("easy", "medium", "hard"):
        env = sd.load_environment(num_examples=40, size=4, difficulty=difficulty, seed=3)
        for row in env.get_dataset():
            puzzle, solution = row["info"]["puzzle"], row["info"]["solution"]
            fits = [g for g in grids if all(p in (0, d) for p, d in zip(puzzle, g, strict=True))]
            assert fits == [tuple(solution)], puzzle


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


@cache
def nim_wins(heaps: tuple[int, ...], misere: bool) -> bool:
    """Whether the side to move wins, by searching every move (heaps kept sorted)."""
    if not any(heaps):
        return misere  # the previous player took the last object
    for i, h in enumerate(heaps):
        for take in range(1, h + 1):
            after = tuple(sorted((*heaps[:i], h - take, *heaps[i + 1 :])))
            if not nim_wins(after, misere):
                return True
    return False


def small_positions() -> list[list[int]]:
    return [list(p) for k in (1, 2, 3) for p in itertools.product(range(6), repeat=k)] + [
        list(p) for p in itertools.product(range(4), repeat=4)
    ]


@pytest.mark.parametrize("misere", [False, True])
def test_nim_positions_and_winning_moves_agree_with_search(misere: bool) -> None:
    for heaps in small_positions():
        wins = nim_wins(tuple(sorted(heaps)), misere)
        assert nim.is_winning(heaps, misere) == wins, heaps
        move = nim.winning_move(heaps, misere) if any(heaps) else None
        if not wins or not any(heaps):
            assert move is None, heaps
            continue
        i, take = move
        assert 1 <= take <= heaps[i], (heaps, move)
        after = [*heaps[:i], heaps[i] - take, *heaps[i + 1 :]]
        assert not nim_wins(tuple(sorted(after)), misere), (heaps, move)


@pytest.mark.parametrize("misere", [False, True])
def test_nim_optimal_opponent_punishes_every_mistake(misere: bool) -> None:
    """From any position the player's move hands over as a win, the optimal opponent wins."""
    for heaps in small_positions():
        if not any(heaps) or nim_wins(tuple(sorted(heaps)), misere):
            continue
        # A losing position for the opponent to move: it takes one from the largest heap.
        i, take = nim.opponent_move(heaps, "optimal", misere, 0)
        assert (i, take) == (max(range(len(heaps)), key=lambda k: (heaps[k], -k)), 1)
    for heaps in small_positions():
        if any(heaps) and nim_wins(tuple(sorted(heaps)), misere):
            i, take = nim.opponent_move(heaps, "optimal", misere, 0)
            after = [*heaps[:i], heaps[i] - take, *heaps[i + 1 :]]
            assert not nim_wins(tuple(sorted(after)), misere), heaps


@pytest.mark.parametrize("misere", [False, True])
def test_nim_last_object_result_and_feedback(misere: bool) -> None:
    env = nim.load_environment(num_examples=1, misere=misere)
    game = env.new_game(
        {"heaps": [0, 2, 0], "misere": misere, "opponent": "optimal", "opponent_seed": 1}
    )
    text = env.apply_move(game, "2 2")
    assert env.is_over(game)
    assert env.score(game) == (0.0 if misere else 1.0)
    assert ("you lose." if misere else "you win!") in text
    game = env.new_game(
        {"heaps": [0, 2, 0], "misere": misere, "opponent": "optimal", "opponent_seed": 1}
    )
    text = env.apply_move(game, "2 1")  # the opponent must take the last one
    assert text == "You took 1 from heap 2. I took 1 from heap 2. I took the last object: " + (
        "you win!" if misere else "you lose."
    )
    assert env.score(game) == (1.0 if misere else 0.0)


@pytest.mark.parametrize("misere", [False, True])
@pytest.mark.parametrize("opponent", ["optimal", "random"])
def test_nim_reference_wins_every_winning_start_and_the_board_is_true(
    misere: bool, opponent: str
) -> None:
    env = nim.load_environment(
        num_examples=40, seed=11, difficulty="hard", misere=misere, opponent=opponent
    )
    for row in env.get_dataset():
        assert row["info"]["winning"] and nim_wins(tuple(sorted(row["info"]["heaps"])), misere)
        state = play(env, row, env.reference_policy)
        assert won(env, state), row["info"]
        assert rubric_scores(env, state)["efficiency"] == 1.0
        assert not any(state["game_state"]["heaps"])
        last = state["messages"][-1]["content"]
        assert last.endswith("you win!") and not nim._HEAP.search(last)


def test_nim_random_start_says_truthfully_whether_it_is_winning() -> None:
    for misere in (False, True):
        env = nim.load_environment(num_examples=60, seed=12, start="random", misere=misere)
        for row in env.get_dataset():
            info = row["info"]
            assert info["winning"] == nim_wins(tuple(sorted(info["heaps"])), misere)


def brute_lines(board: str) -> set[str]:
    """The marks that fill a row, column or diagonal, found by coordinates."""
    lines = [[(r, c) for c in range(3)] for r in range(3)]
    lines += [[(r, c) for r in range(3)] for c in range(3)]
    lines += [[(k, k) for k in range(3)], [(k, 2 - k) for k in range(3)]]
    found = set()
    for line in lines:
        marks = {board[r * 3 + c] for r, c in line}
        if len(marks) == 1 and "." not in marks:
            found |= marks
    return found


def brute_winner(board: str) -> str | None:
    """The one mark with a line (boards of play never have two)."""
    found = brute_lines(board)
    assert len(found) <= 1, board
    return found.pop() if found else None


def test_tictactoe_winner_agrees_with_brute_force_on_every_board() -> None:
    for cells in itertools.product("XO.", repeat=9):
        board = "".join(cells)
        found = brute_lines(board)
        if len(found) <= 1:
            assert ttt.winner(board) == (found.pop() if found else None), board
        else:
            assert ttt.winner(board) in found, board


def opponent_outcomes(board: str, seed: int, kind: str) -> set[str]:
    """Every result X can reach against the built-in opponent from `board` (X to move),
    trying every X move at every turn."""
    results: set[str] = set()
    for cell in ttt.empty_cells(board):
        after, result, text = ttt.play_move(board, cell, kind, seed)
        assert ttt.render_board(after) in text
        if result is None:
            assert ttt.winner(after) is None and ttt.empty_cells(after)
            results |= opponent_outcomes(after, seed, kind)
        else:
            want = brute_winner(after)
            expected = {"X": "win", "O": "loss", None: "draw"}[want]
            assert result == expected, (after, result)
            if want is None:
                assert "." not in after
            results.add(result)
    return results


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tictactoe_perfect_opponent_never_loses_whatever_x_plays(seed: int) -> None:
    empty = "." * 9
    assert "win" not in opponent_outcomes(empty, seed, "perfect")
    opening = ttt.opponent_move(empty, "perfect", seed)
    assert "win" not in opponent_outcomes(ttt.place(empty, opening, "O"), seed, "perfect")


def reference_outcomes(env: Any, board: str, intro: str) -> set[str]:
    """Every result the reference policy reaches against every O reply (O chosen freely)."""
    messages = [{"role": "user", "content": f"{intro}\n\n{ttt.render_board(board)}"}]
    move = env.reference_policy(messages)["content"]
    cell = ttt.parse_cell(re.search(r"<move>(.*)</move>", move).group(1))
    assert board[cell] == "."
    after = ttt.place(board, cell, "X")
    if ttt.winner(after):
        return {"win"}
    if "." not in after:
        return {"draw"}
    results: set[str] = set()
    for reply in ttt.empty_cells(after):
        then = ttt.place(after, reply, "O")
        if ttt.winner(then):
            results.add("loss")
        elif "." not in then:
            results.add("draw")
        else:
            results |= reference_outcomes(env, then, "Your move.")
    return results


def test_tictactoe_reference_never_loses_against_any_opponent() -> None:
    env = ttt.load_environment(num_examples=1)
    assert "loss" not in reference_outcomes(env, "." * 9, "New game.")
    for opening in range(9):
        board = ttt.place("." * 9, opening, "O")
        assert "loss" not in reference_outcomes(env, board, "New game.")


def test_tictactoe_score_and_efficiency() -> None:
    env = ttt.load_environment(num_examples=1)
    game = env.new_game({"board": "OO.XX....", "opponent": "random", "opponent_seed": 0})
    text = env.apply_move(game, "C2")
    assert "Three in a row: you win!" in text and env.score(game) == 1.0
    assert env.efficiency(game, {}) == 1.0
    game = env.new_game({"board": "XOXXOOO.X", "opponent": "random", "opponent_seed": 0})
    text = env.apply_move(game, "B3")
    assert "it is a draw" in text and env.score(game) == 0.5


def test_guess_the_number_hints_are_true_and_binary_search_always_wins() -> None:
    for low, high in ((1, 20), (1, 100), (-7, 9), (1, 1000)):
        env = gtn.load_environment(num_examples=1, low=low, high=high)
        for target in range(low, high + 1, max(1, (high - low) // 97)):
            row = {**env.get_dataset()[0]}
            row["info"] = {**row["info"], "target": target, "low": low, "high": high}
            row["prompt"] = [
                row["prompt"][0],
                {
                    "role": "user",
                    "content": f"I am thinking of a number between {low} and {high}. What is it?",
                },
            ]
            state = play(env, row, env.reference_policy)
            assert won(env, state), (low, high, target)
            optimal = math.ceil(math.log2(high - low + 2))
            assert len(state["game_state"]["guesses"]) <= optimal
            for guess, reply in zip(
                state["game_state"]["guesses"],
                [m["content"] for m in state["messages"] if m["role"] == "user"][1:],
                strict=True,
            ):
                if guess < target:
                    assert reply == f"{guess} is too low. Guess again."
                elif guess > target:
                    assert reply == f"{guess} is too high. Guess again."
                else:
                    assert reply.startswith(f"{guess} is correct!")
            assert rubric_scores(env, state)["efficiency"] == 1.0


def test_guess_the_number_refuses_guesses_outside_the_range() -> None:
    env = gtn.load_environment(num_examples=1, low=1, high=20)
    game = env.new_game({"low": 1, "high": 20, "target": 7})
    for move in ("0", "21", "-3", "7.5", "seven"):
        with pytest.raises(InvalidMove):
            env.apply_move(game, move)
    assert game["guesses"] == [] and not env.is_over(game)


def test_wordle_board_rows_are_the_brute_force_marks() -> None:
    env = wd.load_environment(num_examples=30, seed=13, difficulty="hard")
    rng = random.Random(13)
    for row in env.get_dataset():
        game = env.new_game(row["info"])
        guesses = [rng.choice(wd.word_bank().words) for _ in range(6)]
        for n, guess in enumerate(guesses, 1):
            text = env.apply_move(game, guess)
            want = [
                f"{k}. {g.upper()}  {brute_marks(g, row['answer'])}"
                for k, g in enumerate(guesses[:n], 1)
            ]
            assert text.split("\n\n", 1)[1] == "\n".join(want)
            if env.is_over(game):
                assert (guess == row["answer"]) == (env.score(game) == 1.0)
                break


def test_mastermind_board_rows_are_the_brute_force_scores() -> None:
    env = mm.load_environment(num_examples=30, seed=14, difficulty="hard")
    rng = random.Random(14)
    for row in env.get_dataset():
        game = env.new_game(row["info"])
        secret = row["info"]["secret"]
        played: list[str] = []
        while not env.is_over(game):
            guess = "".join(rng.choice("ABCDEFGH") for _ in range(5))
            played.append(guess)
            text = env.apply_move(game, guess.lower())
            want = []
            for k, g in enumerate(played, 1):
                black, white = brute_pegs(g, secret)
                want.append(f"{k}. {g}  black {black} white {white}")
            assert text.split("\n\n", 1)[1] == "\n".join(want)
        assert len(played) == 10 or played[-1] == secret


def test_hangman_board_is_the_independent_bookkeeping() -> None:
    env = hangman_env(difficulty="easy")
    rng = random.Random(15)
    for row in hm.load_environment(num_examples=30, seed=15).get_dataset():
        word = row["answer"]
        game = env.new_game(row["info"])
        guessed: list[str] = []
        misses = 0
        while not env.is_over(game):
            letter = rng.choice([c for c in "abcdefghijklmnopqrstuvwxyz" if c not in guessed])
            guessed.append(letter)
            misses += letter not in word
            text = env.apply_move(game, letter)
            shown = " ".join(c.upper() if c in guessed else "_" for c in word)
            assert f"Word: {shown}  ({len(word)} letters)" in text
            assert f"Misses: {misses} of 6" in text
        assert env.score(game) == float(all(c in guessed for c in word))
        assert (misses >= 6) != (env.score(game) == 1.0)


def test_nim_feedback_reports_the_moves_and_heaps_truthfully() -> None:
    rng = random.Random(16)
    for misere in (False, True):
        env = nim.load_environment(num_examples=20, seed=16, misere=misere, start="random")
        for row in env.get_dataset():
            game = env.new_game(row["info"])
            heaps = list(row["info"]["heaps"])
            while not env.is_over(game):
                i = rng.choice([k for k, h in enumerate(heaps) if h])
                take = rng.randint(1, heaps[i])
                text = env.apply_move(game, f"{i + 1} {take}")
                heaps[i] -= take
                said = re.search(r"I took (\d+) from heap (\d+)\.", text)
                if said:
                    heaps[int(said.group(2)) - 1] -= int(said.group(1))
                assert min(heaps) >= 0 and game["heaps"] == heaps
                if env.is_over(game):
                    last_by_player = said is None
                    player_won = last_by_player != misere
                    assert env.score(game) == float(player_won)
                else:
                    assert nim.render_heaps(heaps) in text


def test_tictactoe_feedback_names_the_cell_the_opponent_took() -> None:
    env = ttt.load_environment(num_examples=30, seed=17, opponent="random")
    rng = random.Random(17)
    for row in env.get_dataset():
        game = env.new_game(row["info"])
        while not env.is_over(game):
            before = game["board"]
            cell = rng.choice(ttt.empty_cells(before))
            text = env.apply_move(game, ttt.cell_name(cell))
            after = game["board"]
            changed = [i for i in range(9) if before[i] != after[i]]
            replies = [i for i in changed if i != cell]
            assert after[cell] == "X" and all(after[i] == "O" for i in replies)
            said = re.findall(r"O played ([A-C][1-3])\.", text)
            assert said == [ttt.cell_name(i) for i in replies]
            assert ttt.render_board(after) in text


def test_guess_the_number_reference_ignores_hints_quoted_from_a_refused_move() -> None:
    """An invalid move's feedback quotes the move; a move that reads like a hint ("50 is too
    high") must not count as one, or the reference searches the wrong half afterwards."""
    env = gtn.load_environment(num_examples=1, low=1, high=100)
    row = env.get_dataset()[0]
    row["info"] = {**row["info"], "target": 80}
    state = fresh_state(env, row)
    messages = list(row["prompt"])
    messages.append({"role": "assistant", "content": "<move>50 is too high</move>"})
    reply, state = env.env_response(messages, state)
    assert reply[0]["content"].startswith("Invalid move:")
    messages.extend(reply)
    assert env.reference_policy(messages)["content"] == "<move>50</move>"


def test_wordle_openers_are_the_rules_own_first_choice() -> None:
    bank, solver = wd.word_bank(), wd.solver()
    for tier, opener in wd.OPENERS.items():
        assert bank.words[solver.ranked(bank.solutions(tier))[0]] == opener


def test_guess_the_number_turn_limit_leaves_room_for_the_invalid_moves_allowed() -> None:
    """Invalid moves end a game only once `max_invalid_moves` is reached; the default turn
    limit must not end it sooner for a player who then searches optimally."""
    env = gtn.load_environment(num_examples=20, seed=3, max_invalid_moves=8)
    for row in env.get_dataset():
        state = play(env, row, slips_then(env.reference_policy, 7))
        assert state["invalid_moves"] == 7 and won(env, state), row["info"]


def test_tictactoe_turn_limit_leaves_room_for_the_invalid_moves_allowed() -> None:
    env = ttt.load_environment(num_examples=8, seed=3, opponent="random", max_invalid_moves=8)
    for row in env.get_dataset():
        state = play(env, row, slips_then(env.reference_policy, 7))
        assert state["invalid_moves"] == 7 and env.is_over(state["game_state"]), row["info"]
