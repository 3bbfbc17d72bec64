"""Reading a tool's docstring: its description, and one per parameter.

Google, NumPy and reST styles are read, since tool authors write all three; the
model must get the description alone, not the sections run together into it.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

#: Section names (Google or NumPy style) whose entries describe parameters.
_PARAM_SECTIONS = frozenset(
    {
        "args",
        "arguments",
        "parameters",
        "params",
        "keyword args",
        "keyword arguments",
        "kwargs",
        "other args",
        "other arguments",
        "other parameters",
    }
)
#: Other section names: their text is neither the tool's description nor a parameter's.
_OTHER_SECTIONS = frozenset(
    {
        "attention",
        "attributes",
        "caution",
        "danger",
        "error",
        "example",
        "examples",
        "hint",
        "important",
        "methods",
        "note",
        "notes",
        "raise",
        "raises",
        "references",
        "return",
        "returns",
        "see also",
        "tip",
        "todo",
        "warning",
        "warnings",
        "warns",
        "yield",
        "yields",
    }
)
_GOOGLE_HEADER = re.compile(r"^([A-Za-z][A-Za-z ]*?)\s*:$")
_NUMPY_RULE = re.compile(r"^\s*-{3,}\s*$")
# `name (type): text`; the type may hold one level of brackets: `(dict(str, int))`.
_GOOGLE_ENTRY = re.compile(r"^(\*{0,2}\w+)\s*(?:\((?:[^()]|\([^()]*\))*\))?\s*:\s*(.*)$")
# `name : type` or `a, b : type`; the text is on the lines below.
_NUMPY_ENTRY = re.compile(r"^(\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?::.*)?$")
# `:field words: text`, such as `:param int count: text` or `:returns: text`.
_REST_FIELD = re.compile(r"^:(\w+)((?:\s+[^:]*)?):\s*(.*)$")
_REST_PARAM_FIELDS = frozenset({"param", "parameter", "arg", "argument", "key", "keyword"})


@dataclass
class _Section:
    """The docstring section being read: what it holds, its style and its indent."""

    params: bool
    style: str  # "google", "numpy" or "rest"
    indent: int  # of its header (of a reST field's line)
    entry_indent: int | None = None  # where its entries sit, set by its first line
    names: list[str] = field(default_factory=list)  # the parameters being described


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into a description and per-argument descriptions.

    Google, NumPy and reST styles are read: whichever a tool's author writes, the
    model must get the description alone, not the sections (`Returns`, a
    `Parameters` table, `:param x:` fields) run together into one line of it.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    args: dict[str, str] = {}
    section: _Section | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        indent = len(line) - len(line.lstrip())
        opened = _open_section(lines, index, section, args)
        if opened is not None:
            section, width = opened
            index += width
            continue
        if section is None:
            summary.append(line.strip())
        elif line.strip():
            _read_section_line(section, line.strip(), indent, args)
        index += 1
    return " ".join(part for part in summary if part).strip(), args


def _open_section(
    lines: list[str], index: int, section: _Section | None, args: dict[str, str]
) -> tuple[_Section, int] | None:
    """The section that starts at `lines[index]` and how many lines its header
    takes, or None; a reST parameter field's own text goes into `args`.

    A header counts only outside a section or no deeper than the current one's,
    so a continuation line such as `Returns:` inside a description stays text.
    """
    line = lines[index]
    stripped = line.strip()
    indent = len(line) - len(line.lstrip())
    if section is not None and indent > section.indent:
        return None
    following = lines[index + 1] if index + 1 < len(lines) else ""
    if stripped and _NUMPY_RULE.match(following) and not _NUMPY_RULE.match(stripped):
        return _Section(stripped.lower() in _PARAM_SECTIONS, "numpy", indent), 2
    header = _GOOGLE_HEADER.match(stripped)
    name = header.group(1).lower() if header else ""
    if name in _PARAM_SECTIONS or name in _OTHER_SECTIONS:
        return _Section(name in _PARAM_SECTIONS, "google", indent), 1
    rest = _REST_FIELD.match(stripped)
    if rest is None:
        return None
    opened = _Section(rest.group(1) in _REST_PARAM_FIELDS, "rest", indent)
    words = rest.group(2).split()
    if opened.params and words:
        opened.names = [words[-1].lstrip("*")]
        args[opened.names[0]] = rest.group(3).strip()
    return opened, 1


def _read_section_line(section: _Section, text: str, indent: int, args: dict[str, str]) -> None:
    """One non-blank line inside a section: a parameter's entry, more of its text
    (a deeper line), or text no parameter owns (ignored)."""
    if not section.params:
        return
    if section.entry_indent is None:
        # Google entries sit where the first one does (deeper than the header, or
        # flush with it), NumPy ones at the header's indent, reST text deeper.
        first = {"numpy": section.indent, "rest": section.indent + 1}
        section.entry_indent = first.get(section.style, indent)
    if indent < section.entry_indent:
        section.params, section.names = False, []  # dedented: the section has ended
        return
    if section.style != "rest" and indent == section.entry_indent:
        names, entry_text = _entry(section.style, text)
        if names:
            section.names = names
            for name in names:
                args[name] = entry_text
            return
    for name in section.names:
        args[name] = f"{args[name]} {text}".strip()


def _entry(style: str, text: str) -> tuple[list[str], str]:
    """The parameter names an entry line describes, and its text on that line."""
    if style == "google":
        match = _GOOGLE_ENTRY.match(text)
        return ([match.group(1).lstrip("*")], match.group(2).strip()) if match else ([], "")
    match = _NUMPY_ENTRY.match(text)
    if match is None:
        return [], ""
    return [name.strip().lstrip("*") for name in match.group(1).split(",")], ""


__all__ = ["parse_docstring"]
