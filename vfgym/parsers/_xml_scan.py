"""A forgiving scanner for the XML-like tags models write around their answers.

Model output is not XML: a tag is often left open (a stop sequence cut the
closing tag), content holds stray angle brackets (`a < b`, `vector<int>`), and
one field can mention another's tag. The scanner only looks at the tags it was
told about and matches each opening tag with the first closing tag of the same
name after it. A tag is unclosed when no such closing tag comes before the next
opening tag of the same name (a model that opened the field again); an unclosed
tag runs to the next known tag, opening or closing, or to the end of the text,
so its content never holds a known tag.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Element:
    """One tagged span of the text."""

    tag: str
    start: int
    content_start: int
    content_end: int
    end: int
    closed: bool


@dataclass(frozen=True, slots=True)
class Scan:
    """Every known element of a text, in order, and how many closing tags had no opening."""

    elements: tuple[Element, ...]
    stray_closings: int


class TagScanner:
    """Finds the elements of a fixed set of tag names in model text."""

    def __init__(self, tags: Iterable[str]) -> None:
        names = sorted(set(tags), key=len, reverse=True)
        if not names:
            raise ValueError("TagScanner needs at least one tag name")
        alternation = "|".join(re.escape(name) for name in names)
        # XML allows whitespace before a tag's `>` (`<answer >`, `</answer\n>`).
        self._pattern = re.compile(rf"<(/?)({alternation})\s*>")

    def scan(self, text: str) -> Scan:
        """Split `text` into elements; see the module docstring for the rules."""
        matches = list(self._pattern.finditer(text))
        openings: dict[str, list[int]] = {}
        closings: dict[str, list[int]] = {}
        for index, match in enumerate(matches):
            side = closings if match.group(1) else openings
            side.setdefault(match.group(2), []).append(index)

        elements: list[Element] = []
        stray = 0
        i = 0
        while i < len(matches):
            match = matches[i]
            if match.group(1):
                stray += 1
                i += 1
                continue
            tag = match.group(2)
            closing = _next_after(closings.get(tag, ()), i)
            reopening = _next_after(openings[tag], i)
            if closing is not None and (reopening is None or closing < reopening):
                end = matches[closing]
                elements.append(
                    Element(tag, match.start(), match.end(), end.start(), end.end(), True)
                )
                i = closing + 1
                continue
            stop = matches[i + 1].start() if i + 1 < len(matches) else len(text)
            elements.append(Element(tag, match.start(), match.end(), stop, stop, False))
            i += 1
        return Scan(tuple(elements), stray)


def _next_after(indices: list[int] | tuple[()], i: int) -> int | None:
    """The first of the sorted `indices` greater than `i`, or None."""
    k = bisect_right(indices, i)
    return indices[k] if k < len(indices) else None
