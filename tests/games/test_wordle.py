"""Wordle: feedback with repeated letters, the word list, invalid guesses, the solver."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest
from game_play import evaluate_over_http, play, reference_after_a_slip
from vfgym.games import wordle as wd

import vfgym
from vfgym.engine.state import new_state
from vfgym.errors import InvalidMove


def game(answer: str) -> dict[str, Any]:
    return wd.load_environment(num_examples=1).new_game({"word": answer, "max_guesses": 6})


@pytest.mark.parametrize(
    "guess, answer, marks",
    [
        ("crane", "crane", "GGGGG"),
        ("speed", "abide", "--Y-Y"),  # the second E finds no E left
        ("eerie", "there", "Y-Y-G"),  # the green E counts first, then one yellow E
        ("llama", "hello", "YY---"),  # both Ls of HELLO are matched
        ("hello", "llama", "--YY-"),
        ("sassy", "essay", "YYG-G"),  # green S first, then one yellow S, the third is grey
        ("array", "ready", "YY--G"),  # one R and one A left to match
        ("geese", "these", "--GGG"),  # the greens use up both Es: no yellow for the first
    ],
)
def test_feedback_on_hand_worked_guesses(guess: str, answer: str, marks: str) -> None:
    assert wd.feedback(guess, answer) == marks


def test_fast_feedback_agrees_with_the_rule() -> None:
    bank = wd.word_bank()
    rng = random.Random(5)
    rows = np.array([rng.randrange(len(bank.words)) for _ in range(300)])
    repeated = np.array([i for i, w in enumerate(bank.words) if len(set(w)) < 5][:100])
    cols = np.array([rng.randrange(len(bank.words)) for _ in range(60)])
    for guesses in (rows, repeated):
        codes = wd.pattern_codes(bank, guesses, cols)
        for r, g in enumerate(guesses):
            for c, a in enumerate(cols):
                marks = wd.feedback(bank.words[g], bank.words[a])
                assert codes[r, c] == wd.pattern_code(marks), (bank.words[g], bank.words[a])


def test_word_list_is_clean_and_layered() -> None:
    bank = wd.word_bank()
    assert all(len(w) == 5 and w.isalpha() and w.islower() for w in bank.words)
    assert len(set(bank.words)) == len(bank.words) == 4653
    sizes = [len(bank.solutions(t)) for t in (1, 2, 3)]
    assert sizes == [2113, 2851, 4583]
    easy = {bank.words[i] for i in bank.solutions(1)}
    assert {"crane", "house", "about"} <= easy and "cats" not in bank.index
    medium = {bank.words[i] for i in bank.solutions(2)}
    assert "tares" not in medium and "tares" in bank.index  # plurals only from "hard" on
    assert "mcmxc" not in bank.index  # no Roman numerals


def test_a_hand_played_game() -> None:
    env = wd.load_environment(num_examples=1)
    state = game("there")
    text = env.apply_move(state, "eerie")
    assert text.startswith("EERIE  Y-Y-G. 5 guesses left.")
    assert "1. EERIE  Y-Y-G" in text
    text = env.apply_move(state, " THREE. ")
    assert "2. THREE  GGYYG" in text and not env.is_over(state)
    text = env.apply_move(state, "there")
    assert "solved in 3 guesses" in text and env.is_over(state)
    assert env.score(state) == 1.0 and env.efficiency(state, {}) == pytest.approx(4 / 6)
    assert env.render(state).endswith("3. THERE  GGGGG\n(solved)")


def test_six_misses_lose_and_reveal_the_word() -> None:
    env = wd.load_environment(num_examples=1)
    state = game("crane")
    for word in ("pilot", "humid", "fuzzy", "bumpy", "jolly", "witty"):
        text = env.apply_move(state, word)
    assert env.is_over(state) and env.score(state) == 0.0
    assert "Out of guesses: the word was CRANE." in text


def test_invalid_guesses_leave_the_game_unchanged() -> None:
    env = wd.load_environment(num_examples=1)
    state = game("crane")
    for move, message in (
        ("cran", "not a five-letter word"),
        ("crane!?", "not a five-letter word"),
        ("two words", "not a five-letter word"),
        ("qzxvj", "not in the word list"),
    ):
        with pytest.raises(InvalidMove, match=message):
            env.apply_move(state, move)
    assert state == game("crane")


def test_invalid_moves_count_and_end_the_game() -> None:
    env = wd.load_environment(num_examples=1, max_invalid_moves=2)
    row = env.get_dataset()[0]
    state = play(env, row, lambda messages: {"role": "assistant", "content": "<move>zzzzz</move>"})
    assert state["invalid_moves"] == 2 and state["turn"] == 2 and state["reward"] == 0.0
    assert "not in the word list" in state["messages"][-1]["content"]
    assert "the game is over" in state["messages"][-1]["content"]


def test_step_reward_counts_new_greens_only() -> None:
    env = wd.load_environment(num_examples=1)
    row = env.get_dataset()[0]
    state = new_state(row["prompt"], [], "", "default", {"word": "there", "max_guesses": 6}, 0)
    env.setup_state(state)
    rewards = []
    for move in ("three", "xxxxx", "these", "there"):
        messages = [{"role": "assistant", "content": f"<move>{move}</move>"}]
        env.env_response(messages, state)
        rewards.append(env.step_reward(state))
    assert state["game_state"]["marks"] == ["GGYYG", "GGG-G", "GGGGG"]
    assert rewards == [0.6, 0.0, 0.2, 0.2]  # T, H, E; nothing for the invalid guess; E; R


def test_items_are_pure_functions_of_seed_and_index() -> None:
    a = wd.load_environment(num_examples=30, seed=2).get_dataset()
    b = wd.load_environment(num_examples=10, seed=2).get_dataset()
    c = wd.load_environment(num_examples=30, seed=3).get_dataset()
    assert [r["answer"] for r in a[:10]] == [r["answer"] for r in b]
    assert [r["answer"] for r in a] != [r["answer"] for r in c]
    bank = wd.word_bank()
    easy = wd.load_environment(num_examples=30, difficulty="easy").get_dataset()
    assert all(bank.tiers[bank.index[r["answer"]]] == 1 for r in easy)
    assert "a common English word" in easy[0]["prompt"][-1]["content"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"difficulty": "expert"}, "difficulty must be one of"),
        ({"max_guesses": 0}, "max_guesses must be between 1 and 20"),
        ({"max_turns": 0}, "max_turns must be at least 1"),
        ({"num_examples": 0}, "num_examples must be at least 1"),
    ],
)
def test_bad_knobs_are_refused_clearly(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        wd.load_environment(**kwargs)


async def test_reference_solves_every_seed_over_http() -> None:
    env = vfgym.load_environment("wordle", num_examples=50)
    (out,) = await evaluate_over_http(env, 50, "reference")
    assert out.reward == [1.0] * 50
    assert max(out.metrics["turns"]) <= 6 and out.metrics["invalid_moves"] == [0.0] * 50


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_reference_solves_every_word_of_the_level_within_six(difficulty: str) -> None:
    """The whole decision tree of a level: every hidden word, each path once. The
    docstring promises every level, not only the default one."""
    bank, solver = wd.word_bank(), wd.solver()
    tier = wd.DIFFICULTIES[difficulty]
    depths: list[int] = []

    def walk(cands: np.ndarray, history: list[tuple[str, str]]) -> None:
        guess = solver.next_guess(tier, history, wd.MAX_GUESSES - len(history))
        codes = wd.pattern_codes(bank, np.array([bank.index[guess]]), cands)[0]
        for code in np.unique(codes):
            group = cands[codes == code]
            marks = wd.feedback(guess, bank.words[group[0]])
            if code == wd.SOLVED:
                depths.append(len(history) + 1)
            else:
                walk(group, [*history, (guess, marks)])

    walk(bank.solutions(tier), [])
    assert len(depths) == len(bank.solutions(tier)) and max(depths) <= 6
    if difficulty == "medium":
        assert len(depths) == 2851


@pytest.mark.parametrize("difficulty", ["easy", "hard"])
def test_reference_wins_every_seed_and_random_does_not(difficulty: str) -> None:
    env = wd.load_environment(num_examples=50, difficulty=difficulty, seed=9)
    rows = env.get_dataset()
    states = [play(env, row, env.reference_policy) for row in rows]
    assert [s["reward"] for s in states] == [1.0] * 50
    assert max(len(s["game_state"]["guesses"]) for s in states) <= 6
    rand = [play(env, row, env.make_random_policy(i))["reward"] for i, row in enumerate(rows)]
    assert sum(rand) / 50 < 0.1


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


def test_wordle_reference_reads_the_board_after_an_invalid_move() -> None:
    env = wd.load_environment(num_examples=1, seed=2)
    clean, after_slip = reference_after_a_slip(env, ["crane", "pilot"], "qqqqq")
    assert after_slip == clean


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


def test_wordle_openers_are_the_rules_own_first_choice() -> None:
    bank, solver = wd.word_bank(), wd.solver()
    for tier, opener in wd.OPENERS.items():
        assert bank.words[solver.ranked(bank.solutions(tier))[0]] == opener
