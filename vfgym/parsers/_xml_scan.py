"""A forgiving scanner for the XML-like tags models write around their answers.

Model output is not XML: a tag is often left open (a stop sequence cut the
closing tag), content holds stray angle brackets (`a < b`, `vector<int>`), and
one field can mention another's tag. The scanner only looks at the tags it was
told about, matches each opening tag with the first closing tag of the same
name after it, and lets an unclosed tag run to the next known opening tag or
to the end of the text.
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
        self._pattern = re.compile(rf"<(/?)({alternation})>")

    def scan(self, text: str) -> Scan:
        """Split `text` into elements; see the module docstring for the rules."""
        matches = list(self._pattern.finditer(text))
        openings: list[int] = []
        closings: dict[str, list[int]] = {}
        for index, match in enumerate(matches):
            if match.group(1):
                closings.setdefault(match.group(2), []).append(index)
            else:
                openings.append(index)

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
            same_closings = closings.get(tag, [])
            k = bisect_right(same_closings, i)
            if k < len(same_closings):
                closing = matches[same_closings[k]]
                elements.append(
                    Element(tag, match.start(), match.end(), closing.start(), closing.end(), True)
                )
                i = same_closings[k] + 1
                continue
            k = bisect_right(openings, i)
            if k < len(openings):
                stop, i = matches[openings[k]].start(), openings[k]
            else:
                stop, i = len(text), len(matches)
            elements.append(Element(tag, match.start(), match.end(), stop, stop, False))
        return Scan(tuple(elements), stray)
