"""Answer extractors for common dataset conventions, usable as a parser's `extract_fn`.

Both return the text unchanged when the convention is absent, so a parser
built on them degrades to comparing the raw text instead of failing.
"""

from __future__ import annotations

BOXED = "\\boxed{"


def _closing_brace(text: str, start: int) -> int:
    """Index of the brace closing the group that opens just before `start`, or -1."""
    depth = 1
    for i in range(start, len(text)):
        char = text[i]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return i
    return -1


def extract_boxed_answer(text: str) -> str:
    """The content of the last complete LaTeX `\\boxed{...}`, nested braces included.

    `"so \\boxed{\\frac{1}{2}}"` gives `"\\frac{1}{2}"`. A final box whose braces
    never close is skipped in favour of an earlier complete one; with no
    complete box the text is returned as is.
    """
    search_end = len(text)
    while True:
        start = text.rfind(BOXED, 0, search_end)
        if start == -1:
            return text
        content_start = start + len(BOXED)
        end = _closing_brace(text, content_start)
        if end != -1:
            return text[content_start:end]
        search_end = start


def extract_hash_answer(text: str) -> str:
    """The final answer of a GSM8K solution, written after `####`.

    `"... so 40 + 2 = 42.\\n#### 42"` gives `"42"`; text without `####` is
    returned as is.
    """
    if "####" not in text:
        return text
    return text.rsplit("####", 1)[1].strip()
