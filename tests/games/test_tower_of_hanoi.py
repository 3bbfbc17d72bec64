"""Tower of Hanoi: rules on hand-worked positions, determinism, policies, invalid moves."""

from __future__ import annotations

import copy
from collections import deque
from typing import Any

import pytest
from game_play import evaluate_over_http, play, slips_then, won
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


@pytest.mark.parametrize("move", ["A to C", "a to c", "A TO C", "A To C", "a tO c"])
def test_hanoi_reads_the_word_to_in_any_case(move: str) -> None:
    """Peg letters are read in either case; the word between them must be too."""
    env = hanoi.load_environment(num_examples=1)
    game = env.new_game({"pegs": [[2, 1], [], []], "disks": 2, "target": 2, "optimal": 3})
    assert env.apply_move(game, move).startswith("Moved disk 1 from A to C.")
    assert game["pegs"] == [[2], [], [1]]


def test_hanoi_one_disk_and_one_move_are_singular() -> None:
    env = hanoi.load_environment(num_examples=1, disks=1)
    row = env.dataset[0]
    assert row["prompt"][-1]["content"].startswith("There is 1 disk. Move it onto peg ")
    assert env.reference_policy(list(row["prompt"]))["content"]  # the target is still read
    game = env.new_game({"pegs": [[1], [], []], "disks": 1, "target": 2, "optimal": 1})
    assert env.apply_move(game, "A C").endswith("Solved in 1 move (optimal: 1).")


def classic_game(disks: int = 3) -> tuple[Any, dict[str, Any], int, int]:
    """A classic start (every disk on one peg), its home peg and its target peg."""
    env = hanoi.load_environment(num_examples=1, disks=disks, start="classic")
    info = env.dataset[0]["info"]
    home = next(i for i, stack in enumerate(info["pegs"]) if stack)
    return env, env.new_game(info), home, info["target"]


@pytest.mark.parametrize("spelling", ["{a}{b}", "{A}{B}", "{n}{m}", "{A}{B}."])
def test_hanoi_reads_two_pegs_written_together(spelling: str) -> None:
    """ "AC" and "13" were refused as "not a move": with one character a peg, two pegs
    side by side can only mean from-peg then to-peg, as "A C" does."""
    env, game, home, target = classic_game()
    names = {"A": "ABC"[home], "B": "ABC"[target]}
    move = spelling.format(
        a=names["A"].lower(), b=names["B"].lower(), n=home + 1, m=target + 1, **names
    )
    text = env.apply_move(game, move)
    assert text.startswith(f"Moved disk 1 from {names['A']} to {names['B']}."), text
    assert game["pegs"][target] == [1] and game["moves"] == 1


@pytest.mark.parametrize("move", ["AA", "11", "AD", "14", "ACB", "A C B", "A1"])
def test_hanoi_pegs_written_together_still_refuse_what_is_no_move(move: str) -> None:
    env, game, _, _ = classic_game()
    before = [list(stack) for stack in game["pegs"]]
    with pytest.raises(InvalidMove):
        env.apply_move(game, move)
    assert game["pegs"] == before and game["moves"] == 0


def test_hanoi_turn_limit_leaves_room_for_the_invalid_moves_allowed() -> None:
    """Three disks need 7 moves and the limit was 7 + 6: with 10 invalid moves allowed, a
    player who slipped 9 times and then played perfectly was cut off by the turn limit."""
    env = hanoi.load_environment(
        num_examples=6, seed=3, disks=3, start="classic", max_invalid_moves=10
    )
    for row in env.get_dataset():
        state = play(env, row, slips_then(env.reference_policy, 9))
        assert state["invalid_moves"] == 9 and won(env, state), row["info"]


def test_hanoi_reads_peg_numbers_in_any_script() -> None:
    env = hanoi.load_environment(num_examples=1, disks=3, start="classic")
    info = env.dataset[0]["info"]
    src = next(i for i, stack in enumerate(info["pegs"]) if stack)
    dst = (src + 1) % 3
    fullwidth = f"{chr(0xFF11 + src)} {chr(0xFF11 + dst)}"
    plain, wide = env.new_game(info), env.new_game(info)
    assert env.apply_move(wide, fullwidth) == env.apply_move(plain, f"{src + 1} {dst + 1}")
