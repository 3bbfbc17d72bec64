"""Answer extractors for common dataset conventions, usable as a parser's `extract_fn`.

Both return the text unchanged when the convention is absent, so a parser
built on them degrades to comparing the raw text instead of failing.
"""

from __future__ import annotations

import re

# `\fbox` is the older spelling MATH-style solutions still use for the final box.
_BOX_OPENING = re.compile(r"\\(?:boxed|fbox)\{")


def _closing_brace(text: str, start: int) -> int:
    """Index of the brace closing the group that opens just before `start`, or -1.

    LaTeX's escaped braces (`\\{`, `\\}`) are literal set braces, not grouping,
    so a box such as `\\boxed{\\left\\{ x \\right.}` still closes where TeX closes it.
    """
    depth = 1
    i = start
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2  # an escaped character never opens or closes a group
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def extract_boxed_answer(text: str) -> str:
    """The content of the last complete LaTeX `\\boxed{...}` (or `\\fbox{...}`), nested
    braces included.

    `"so \\boxed{\\frac{1}{2}}"` gives `"\\frac{1}{2}"`. A final box whose braces
    never close is skipped in favour of an earlier complete one; with no
    complete box the text is returned as is.
    """
    for match in reversed(list(_BOX_OPENING.finditer(text))):
        end = _closing_brace(text, match.end())
        if end != -1:
            return text[match.end() : end]
    return text


def extract_hash_answer(text: str) -> str:
    """The final answer of a GSM8K solution, written after `####`.

    `"... so 40 + 2 = 42.\\n#### 42"` gives `"42"`; text without `####` is
    returned as is. Only the first line after the marker is the answer: a
    model that goes on explaining after `#### 42` still answers "42".
    """
    if "####" not in text:
        return text
    rest = text.rsplit("####", 1)[1].strip()
    return rest.split("\n", 1)[0].strip()
