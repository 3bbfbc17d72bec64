"""Edge cases of the answer extractors: LaTeX box spellings and braces, GSM8K tails."""

from __future__ import annotations

import pytest

from vfgym.parsers import Parser, extract_boxed_answer, extract_hash_answer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("the answer is \\fbox{7}", "7"),
        ("\\boxed{1} but finally \\fbox{\\frac{2}{3}}", "\\frac{2}{3}"),
        ("\\fbox{8} and at last \\boxed{9}", "9"),
    ],
)
def test_fbox_is_read_like_boxed(text: str, expected: str) -> None:
    assert extract_boxed_answer(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a piecewise answer: the escaped \{ opens no group, so the box closes at the last }
        ("so f = \\boxed{\\left\\{ x \\right.} done", "\\left\\{ x \\right."),
        ("\\boxed{\\}} rest", "\\}"),
        ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),
    ],
)
def test_escaped_braces_do_not_count_as_grouping(text: str, expected: str) -> None:
    assert extract_boxed_answer(text) == expected


def test_hash_answer_is_the_line_after_the_marker() -> None:
    assert extract_hash_answer("40 + 2 = 42\n#### 42\nSo the answer is 42.") == "42"
    assert extract_hash_answer("####\n  17  \nthat's it") == "17"


def test_parser_with_boxed_extract_reads_the_last_assistant_fbox() -> None:
    parser = Parser(extract_fn=extract_boxed_answer)
    completion = [
        {"role": "assistant", "content": [{"type": "text", "text": "I get \\fbox{12}"}]},
        {"role": "user", "content": "\\boxed{0}"},
    ]
    assert parser.parse_answer(completion) == "12"
