"""Nim: nim-sum and misère positions by hand, the opponent, invalid moves, the reference."""

from __future__ import annotations

import itertools
import random
import re
from functools import cache
from typing import Any

import pytest
from game_play import evaluate_over_http, play, won
from vfgym.games import nim

import vfgym
from vfgym.errors import InvalidMove


def game(heaps: list[int], misere: bool = False, opponent: str = "optimal") -> dict[str, Any]:
    info = {"heaps": heaps, "misere": misere, "opponent": opponent, "opponent_seed": 7}
    return nim.load_environment(num_examples=1).new_game(info)


def test_normal_play_positions() -> None:
    assert nim.nim_sum([3, 4, 5]) == 2 and nim.nim_sum([1, 2, 3]) == 0
    assert nim.is_winning([3, 4, 5], misere=False)
    assert not nim.is_winning([1, 2, 3], misere=False)
    # 3 ^ 2 = 1: take two from the first heap, leaving 1 ^ 4 ^ 5 = 0.
    assert nim.winning_move([3, 4, 5], misere=False) == (0, 2)
    assert nim.winning_move([1, 2, 3], misere=False) is None
    assert nim.winning_move([0, 0, 7], misere=False) == (2, 7)  # take the lot


def test_misere_endgame_positions() -> None:
    assert nim.is_winning([1, 1], misere=True)  # take one, the opponent must take the last
    assert not nim.is_winning([1, 1, 1], misere=True)
    assert nim.winning_move([1, 1], misere=True) == (0, 1)
    # One big heap: shrink it so an odd number of single objects is left.
    assert nim.winning_move([1, 1, 4], misere=True) == (2, 3)  # leaves 1 1 1
    assert nim.winning_move([1, 4], misere=True) == (1, 4)  # leaves 1
    assert nim.winning_move([0, 5], misere=True) == (1, 4)  # leaves 1
    # Two big heaps: play as in normal Nim.
    assert nim.winning_move([2, 2], misere=True) is None
    assert nim.winning_move([2, 3], misere=True) == (1, 1)
    assert nim.is_winning([0, 0], misere=True) and not nim.is_winning([0, 0], misere=False)


def test_optimal_opponent_from_a_losing_position_takes_one_from_the_largest() -> None:
    assert nim.opponent_move([1, 2, 3], "optimal", misere=False, seed=1) == (2, 1)
    assert nim.opponent_move([3, 4, 5], "optimal", misere=False, seed=1) == (0, 2)


def test_a_hand_played_game() -> None:
    env = nim.load_environment(num_examples=1)
    state = game([3, 4, 5])
    text = env.apply_move(state, "1 2")  # to 1 4 5; the opponent has no good move
    assert text.startswith("You took 2 from heap 1. I took 1 from heap 3.")
    assert "heap 1: o (1)\nheap 2: o o o o (4)\nheap 3: o o o o (4)" in text
    assert nim.read_heaps([{"role": "user", "content": text}]) == ([1, 4, 4], False)
    env.apply_move(state, "heap 1, take 1")
    assert state["heaps"][0] == 0 and state["kept"] == 2 and state["chances"] == 2


def test_taking_the_last_object_wins_or_loses() -> None:
    env = nim.load_environment(num_examples=1)
    state = game([0, 2, 0])
    assert "you win!" in env.apply_move(state, "2 2") and env.score(state) == 1.0
    state = game([0, 2, 0], misere=True)
    assert "you lose." in env.apply_move(state, "2 2") and env.score(state) == 0.0
    state = game([1, 1, 0], misere=True)  # the opponent is left the last object
    assert "you win!" in env.apply_move(state, "1 1") and env.score(state) == 1.0
    assert env.efficiency(state, {}) == 1.0


def test_invalid_moves_leave_the_game_unchanged() -> None:
    env = nim.load_environment(num_examples=1)
    state = game([3, 0, 5])
    for move, message in (
        ("three", "is not a move"),
        ("4 1", "there is no heap 4"),
        ("2 1", "heap 2 is empty"),
        ("1 0", "take between 1 and 3"),
        ("3 9", "take between 1 and 5"),
    ):
        with pytest.raises(InvalidMove, match=message):
            env.apply_move(state, move)
    assert state == game([3, 0, 5])


def test_invalid_moves_end_the_game() -> None:
    env = nim.load_environment(num_examples=1, max_invalid_moves=2)
    state = play(env, env.get_dataset()[0], lambda m: {"role": "assistant", "content": "9 9"})
    assert state["invalid_moves"] == 2 and state["reward"] == 0.0
    assert "the game is over" in state["messages"][-1]["content"]


def test_items_are_pure_and_start_from_winning_positions() -> None:
    a = nim.load_environment(num_examples=40, seed=5, misere=True).get_dataset()
    b = nim.load_environment(num_examples=10, seed=5, misere=True).get_dataset()
    c = nim.load_environment(num_examples=40, seed=6, misere=True).get_dataset()
    assert [r["info"] for r in a[:10]] == [r["info"] for r in b]
    assert [r["info"]["heaps"] for r in a] != [r["info"]["heaps"] for r in c]
    assert all(r["info"]["winning"] and nim.is_winning(r["info"]["heaps"], True) for r in a)
    assert "Misère rules" in a[0]["prompt"][-1]["content"]
    mixed = nim.load_environment(num_examples=60, start="random").get_dataset()
    assert {r["info"]["winning"] for r in mixed} == {True, False}


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"difficulty": "x"}, "difficulty must be one of"),
        ({"heaps": 0}, "heaps must be between 1 and 9"),
        ({"max_heap": 31}, "max_heap must be between 1 and 30"),
        ({"opponent": "clever"}, "opponent must be one of"),
        ({"start": "losing"}, "start must be one of"),
        ({"heaps": 2, "max_heap": 1}, "always lost by the first player"),
    ],
)
def test_bad_knobs_are_refused_clearly(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        nim.load_environment(**kwargs)


async def test_reference_wins_every_winning_start_over_http() -> None:
    env = vfgym.load_environment("nim", num_examples=50, difficulty="easy")
    (out,) = await evaluate_over_http(env, 50, "reference")
    assert out.reward == [1.0] * 50
    assert out.metrics["efficiency"] == [1.0] * 50  # every move kept the win
    rows = env.get_eval_dataset(n=50)
    rand = [play(env, row, env.make_random_policy(i))["reward"] for i, row in enumerate(rows)]
    assert sum(rand) / 50 < 0.75


@pytest.mark.parametrize("misere", [False, True])
@pytest.mark.parametrize("difficulty", ["medium", "hard"])
def test_reference_wins_every_seed_and_random_does_not(difficulty: str, misere: bool) -> None:
    env = nim.load_environment(num_examples=50, seed=2, difficulty=difficulty, misere=misere)
    rows = env.get_dataset()
    assert [play(env, row, env.reference_policy)["reward"] for row in rows] == [1.0] * 50
    rand = [play(env, row, env.make_random_policy(i))["reward"] for i, row in enumerate(rows)]
    assert sum(rand) / 50 < 0.1


@pytest.mark.parametrize("move", ["3 2", "heap 3 take 2", "3,2", "take 2 from heap 3", "2 FROM 3"])
def test_a_move_is_read_as_heap_then_count_unless_it_says_from(move: str) -> None:
    env = nim.load_environment(num_examples=1)
    state = game([1, 1, 5], opponent="random")
    feedback = env.apply_move(state, move)
    assert feedback.startswith("You took 2 from heap 3"), feedback


def rubric_scores(env: Any, state: dict[str, Any]) -> dict[str, float]:
    """Each rubric function's value on a finished `state`, by name."""
    return {f.__name__: f(state) for f in env.rubric.get_reward_funcs()}


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


def nim_game(heaps: list[int]) -> tuple[Any, dict[str, Any]]:
    env = nim.load_environment(num_examples=1)
    info = {"heaps": heaps, "misere": False, "opponent": "optimal", "opponent_seed": 0}
    return env, env.new_game(info)


def test_nim_a_heap_of_one_and_a_game_of_one_heap_are_singular() -> None:
    env, game = nim_game([3, 1, 2])
    with pytest.raises(InvalidMove, match=r"^heap 2 has 1 object: take 1\.$"):
        env.apply_move(game, "2 2")
    env = nim.load_environment(num_examples=1, heaps=1)
    assert env.dataset[0]["prompt"][-1]["content"].startswith("New game of Nim with 1 heap. ")


@pytest.mark.parametrize("move", ["1 -2", "-1 2", "1, -2", "take -2 from heap 1", "1 \u22122"])
def test_nim_refuses_a_negative_number_and_leaves_the_game_unchanged(move: str) -> None:
    """`1 -2` was read as taking 2 from heap 1: a minus sign is not a separator."""
    env, game = nim_game([3, 4, 5])
    before = {k: (list(v) if isinstance(v, list) else v) for k, v in game.items()}
    with pytest.raises(InvalidMove, match=r"whole numbers.*<move>1 2</move>"):
        env.apply_move(game, move)
    assert game == before


@pytest.mark.parametrize("move", ["1-2", "1 - 2", "heap 1 - 2"])
def test_nim_a_dash_between_the_numbers_still_separates_them(move: str) -> None:
    env, game = nim_game([3, 4, 5])
    assert env.apply_move(game, move).startswith("You took 2 from heap 1.")


def random_nim_game(heaps: list[int]) -> tuple[Any, dict[str, Any]]:
    env = nim.load_environment(num_examples=1, opponent="random")
    info = {**env.dataset[0]["info"], "heaps": heaps}
    return env, env.new_game(info)


@pytest.mark.parametrize(
    "move",
    [
        "take 2 objects out of heap 3",
        "take 2 of heap 3",
        "2 objects, heap 3",
        "remove 2 from pile 3",
        # the spellings read right before stay right
        "3 2",
        "heap 3, take 2",
        "take 2 from heap 3",
        "from heap 3 take 2",
    ],
)
def test_nim_the_number_after_the_word_heap_is_the_heap(move: str) -> None:
    """ "take 2 objects out of heap 3" took 3 objects from heap 2: only "from" marked the
    heap, so a move that names its heap with the word "heap" was read backwards."""
    env, game = random_nim_game([5, 5, 5, 5])
    text = env.apply_move(game, move)
    assert text.startswith("You took 2 from heap 3."), text
