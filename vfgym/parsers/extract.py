"""Answer extractors for common dataset conventions, usable as a parser's `extract_fn`.

Both return the text unchanged when the convention is absent, so a parser
built on them degrades to comparing the raw text instead of failing.
"""

from __future__ import annotations

import re

# `\fbox` is the older spelling MATH-style solutions still use for the final box.
# LaTeX skips spaces after a control word, so `\boxed {5}` is still the braced form;
# `\boxed 5` (spaces, then no brace) is the brace-less form models also write.
_BOX_OPENING = re.compile(r"\\(?:boxed|fbox)(?:(?P<braced>\s*\{)|[ \t]+)")


def _brace_pairs(text: str) -> dict[int, int]:
    """The index of the closing brace of every `{` of `text` that closes, in one pass.

    LaTeX's escaped braces (`\\{`, `\\}`) are literal set braces, not grouping, so a
    box such as `\\boxed{\\left\\{ x \\right.}` still closes where TeX closes it.
    One pass for the whole text: a model stuck repeating an unclosed `\\boxed{` would
    otherwise cost a scan to the end of the text per box.
    """
    pairs: dict[int, int] = {}
    opened: list[int] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == "\\":
            i += 2  # an escaped character never opens or closes a group
            continue
        if char == "{":
            opened.append(i)
        elif char == "}" and opened:
            pairs[opened.pop()] = i
        i += 1
    return pairs


def _bare_argument_end(text: str, start: int, pairs: dict[int, int]) -> int:
    """End of a brace-less box argument such as `\\boxed 5` starting at `start`, or -1.

    The argument is the one token up to whitespace, `$` or the end, the way math
    graders read `\\boxed 5`: `$\\boxed 5$` answers "5", not "5$". Braces inside
    the token are kept whole (`pairs`: see `_brace_pairs`), so `\\boxed \\frac{1}{2}`
    is not cut at `{1`; an unmatched `}` belongs to an enclosing group and ends it. A
    token whose group never closes, or no token at all (`\\boxed` at the end), is -1:
    not a complete box.
    """
    i, n = start, len(text)
    while i < n:
        char = text[i]
        if char == "\\":
            i += 2  # an escaped character (`\\$`, `\\{`) is part of the token
            continue
        if char == "{":
            close = pairs.get(i)
            if close is None:
                return -1
            i = close + 1
            continue
        if char == "}" or char.isspace() or char == "$":
            break
        i += 1
    end = min(i, n)
    return -1 if end == start else end


def extract_boxed_answer(text: str) -> str:
    """The content of the last complete LaTeX `\\boxed{...}` (or `\\fbox{...}`), nested
    braces included, or the token of a brace-less `\\boxed 5`.

    `"so \\boxed{\\frac{1}{2}}"` gives `"\\frac{1}{2}"` and `"is \\boxed 5"` gives
    `"5"`: LaTeX accepts both and models write both. A final box whose braces
    never close (or a `\\boxed` with nothing after it) is skipped in favour of an
    earlier complete one; with no complete box the text is returned as is.
    """
    openings = list(_BOX_OPENING.finditer(text))
    if not openings:
        return text
    pairs = _brace_pairs(text)
    for match in reversed(openings):
        if match.group("braced"):
            end = pairs.get(match.end() - 1, -1)
        else:
            end = _bare_argument_end(text, match.end(), pairs)
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
