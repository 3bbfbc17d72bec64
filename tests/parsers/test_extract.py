"""`extract_boxed_answer` reads the braces in one pass, and answers as the box-by-box
scan it replaced did (kept here as the reference): a model stuck repeating an unclosed
`\\boxed{` made that scan run to the end of the text once per box."""

from __future__ import annotations

import random

import pytest

from vfgym.parsers import extract_boxed_answer
from vfgym.parsers.extract import _BOX_OPENING


def _reference_closing_brace(text: str, start: int) -> int:
    depth, i = 1, start
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _reference_bare_end(text: str, start: int) -> int:
    depth, i = 0, start
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and (char.isspace() or char == "$"):
            break
        i += 1
    end = min(i, len(text))
    return -1 if depth or end == start else end


def reference(text: str) -> str:
    for match in reversed(list(_BOX_OPENING.finditer(text))):
        if match.group("braced"):
            end = _reference_closing_brace(text, match.end())
        else:
            end = _reference_bare_end(text, match.end())
        if end != -1:
            return text[match.end() : end]
    return text


PIECES = ["\\boxed{", "\\boxed ", "\\fbox{", "{", "}", "\\{", "\\}", "\\\\", " ", "$", "a", "12"]


def test_answers_as_the_box_by_box_scan_on_random_texts() -> None:
    rng = random.Random(7)
    for _ in range(20_000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 14)))
        assert extract_boxed_answer(text) == reference(text), text


def test_a_complete_box_before_a_run_of_unclosed_ones_is_found() -> None:
    text = "so \\boxed{\\frac{1}{2}} and then" + " \\boxed{x" * 5000
    assert extract_boxed_answer(text) == "\\frac{1}{2}"
    bare = "it is \\boxed 7 then" + " \\boxed{" * 5000
    assert extract_boxed_answer(bare) == "7"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is \\boxed 5", "5"),
        ("The answer is \\boxed 5 and that is final.", "5"),
        ("so \\fbox 7", "7"),
        ("\\boxed  -12", "-12"),  # the spaces LaTeX skips after a control word
        ("$\\boxed 5$", "5"),  # the closing `$` ends math mode, not part of the answer
        ("\\boxed \\frac{1}{2} is it", "\\frac{1}{2}"),  # braces inside the token kept whole
        ("\\boxed \\text{a b}", "\\text{a b}"),  # a space inside a group does not end it
        ("\\boxed{1} then \\boxed 2", "2"),  # the last box wins, whichever its form
        ("\\boxed 2 then \\boxed{1}", "1"),
        ("\\boxed {5}", "5"),  # a space before the brace is still the braced form
    ],
)
def test_a_boxed_argument_without_braces_is_the_answer(text: str, expected: str) -> None:
    assert extract_boxed_answer(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "no box here, the answer is 5",
        "",
        "\\boxedx 5",  # another control word, not \boxed
        "it ends with \\boxed",
        "it ends with \\boxed  ",
        "\\boxed \\frac{1",  # a token whose group never closes is no complete box
    ],
)
def test_text_without_a_complete_box_is_returned_as_is(text: str) -> None:
    assert extract_boxed_answer(text) == text


def test_an_empty_box_is_an_empty_answer() -> None:
    assert extract_boxed_answer("so \\boxed{}") == ""
    assert extract_boxed_answer("\\boxed{3} then \\boxed{}") == ""


def test_a_trailing_bare_boxed_falls_back_to_the_last_complete_box() -> None:
    assert extract_boxed_answer("\\boxed{3} and then \\boxed") == "3"
    assert extract_boxed_answer("\\boxed 3 and then \\boxed ") == "3"
