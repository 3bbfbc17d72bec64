"""Edge cases of the catalogue found by reading the rules against the real games:
inputs that hang a tool or a rubric, knobs whose combinations never occur, limits
that a setting slips past."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from vfgym.games import calculator, guess_the_number, mastermind, python_math, tictactoe


def _finishes_quickly(code: str, seconds: float = 10.0) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter, failing the test if it does not end in time
    (a hang in-process would stall the whole test run)."""
    try:
        return subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=seconds,
            check=True,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {seconds} s: {code.strip()}")


HUGE_LITERALS = ["1e100000000", "1e-100000000", "2.5E99999999"]


def test_calculator_refuses_a_huge_exponent_literal_at_once() -> None:
    """A model's `1e100000000` must be refused like any other too-large value, not make
    the tool compute ten to the hundred millionth."""
    done = _finishes_quickly(
        f"""
        from vfgym.games.calculator import calculator
        for literal in {HUGE_LITERALS!r}:
            try:
                calculator(literal)
            except ValueError as exc:
                print(exc)
            else:
                raise SystemExit(f"{{literal}} accepted")
        """
    )
    assert done.stdout.count("too large") == len(HUGE_LITERALS)


def test_calculator_too_large_literal_says_so_in_its_own_words() -> None:
    """`1e5000` is over the size limit: the message is the tool's, not Python's
    int-to-string limit (which tells the model to call sys.set_int_max_str_digits)."""
    with pytest.raises(ValueError, match="too large") as caught:
        calculator.calculator("1e5000")
    assert "set_int_max_str_digits" not in str(caught.value)
    assert calculator.calculator("1e3") == "1000"
    assert calculator.calculator("2.5e-1 * 4") == "1"


def test_python_math_scoring_an_answer_with_a_huge_exponent_ends_at_once() -> None:
    """The rubric reads the model's answer with `Fraction`; an exponent in the hundreds of
    millions must read as no answer, not stall scoring."""
    answers = ["1e100000000", "(1, 1e-999999999)", "x = 3E99999999"]
    done = _finishes_quickly(
        f"""
        from vfgym.games.python_math import answers_match
        print([answers_match(answer, "3") for answer in {answers!r}])
        """
    )
    assert done.stdout.strip() == "[False, False, False]"


def test_python_math_still_reads_small_exponents() -> None:
    assert python_math.answers_match("1e3", "1000")
    assert python_math.answers_match("(2.5e-1, 3)", "(1/4, 3)")


def test_tictactoe_medium_meets_every_opponent_on_both_sides() -> None:
    """Difficulty "medium" (a mixed opponent) with `first="alternate"` must pair each kind
    of opponent with each side to move first, not tie the perfect opponent to its own opening."""
    env = tictactoe.load_environment(num_examples=8, difficulty="medium", first="alternate")
    pairs = {
        (row["info"]["opponent"], row["info"]["board"] != tictactoe.EMPTY * 9)
        for row in env.dataset
    }
    assert pairs == {(kind, starts) for kind in ("random", "perfect") for starts in (False, True)}


def test_mastermind_refuses_a_code_space_past_the_limit_without_repeats() -> None:
    """Without repeats 6 pegs of 10 colours make 151,200 codes, past the 100,000 the game
    supports, and must be refused as 5 pegs of 10 colours with repeats are."""
    with pytest.raises(ValueError, match="151,200 codes"):
        mastermind.load_environment(num_examples=1, pegs=6, colours=10, repeats=False)
    env = mastermind.load_environment(num_examples=1, pegs=6, colours=9, repeats=False)
    assert env.dataset[0]["info"]["pegs"] == 6


@pytest.mark.parametrize("max_turns", [0, -1])
def test_guess_the_number_refuses_max_turns_below_one(max_turns: int) -> None:
    """As every other game does: 0 must not quietly become the default, nor -1 lift the
    limit."""
    with pytest.raises(ValueError, match="max_turns must be at least 1"):
        guess_the_number.load_environment(num_examples=1, max_turns=max_turns)
    assert guess_the_number.load_environment(num_examples=1, max_turns=3).max_turns == 3


def test_a_first_guess_win_is_counted_in_the_singular() -> None:
    from vfgym.games import guess_the_number, mastermind

    env = guess_the_number.load_environment(num_examples=1)
    game = env.new_game({"low": 1, "high": 100, "target": 5})
    assert env.apply_move(game, "5").endswith("You found the number in 1 guess.")
    env = mastermind.load_environment(num_examples=1)
    game = env.new_game(dict(env.get_eval_dataset()[0]["info"]))
    assert "Cracked in 1 guess!" in env.apply_move(game, game["secret"])
