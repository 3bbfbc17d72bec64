"""XMLParser: fields the model writes between tags, like <think>...</think><answer>...</answer>.

Tags make a model's output machine-readable without asking it for JSON. A
field may have alternative tag names (`("code", "python")`): the first is the
one the parser asks for and names the field, all are accepted when reading, so
a model that writes <python> where <code> was asked is still understood.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

from vfgym.parsers._chat import content_text, is_tool_call_only, message_text
from vfgym.parsers._xml_scan import Scan, TagScanner
from vfgym.parsers.parser import Parser, identity
from vfgym.types import Messages

_TAG_NAME = re.compile(r"[A-Za-z_][\w.\-]*")


def _rebuild_fields(values: dict[str, Any], aliases: dict[str, str]) -> XMLFields:
    fields = XMLFields(**values)
    fields._aliases = aliases
    return fields


class XMLFields(SimpleNamespace):
    """The parsed fields: one attribute per canonical field name, None when missing.

    Alternative tag names read as their canonical field (`parsed.python` is
    `parsed.code`), so code written against either name works, while `vars()`
    lists only the canonical fields.
    """

    __slots__ = ("_aliases",)

    def __getattr__(self, name: str) -> Any:
        try:
            aliases = object.__getattribute__(self, "_aliases")
        except AttributeError:
            aliases = {}
        if name in aliases:
            return getattr(self, aliases[name])
        raise AttributeError(f"parsed XML has no field {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        try:
            aliases = object.__getattribute__(self, "_aliases")
        except AttributeError:
            aliases = {}
        return (_rebuild_fields, (dict(vars(self)), dict(aliases)))


def _normalise_fields(fields: Sequence[str | tuple[str, ...]]) -> list[tuple[str, tuple[str, ...]]]:
    if isinstance(fields, str) or not isinstance(fields, Sequence):
        raise TypeError(
            "XMLParser fields must be a list of tag names or tuples of alternative names, "
            f"e.g. ['think', ('code', 'python')]; got {fields!r}"
        )
    if not fields:
        raise ValueError("XMLParser needs at least one field, e.g. XMLParser(['answer'])")
    normalised: list[tuple[str, tuple[str, ...]]] = []
    seen: set[str] = set()
    for field in fields:
        if isinstance(field, str):
            names: tuple[str, ...] = (field,)
        elif isinstance(field, tuple) and field and all(isinstance(n, str) for n in field):
            names = field
        else:
            raise TypeError(
                f"each XMLParser field must be a tag name or a non-empty tuple of tag names, "
                f"got {field!r}"
            )
        for name in names:
            if not _TAG_NAME.fullmatch(name):
                raise ValueError(
                    f"{name!r} is not a usable tag name: use letters, digits, '_', '-' or '.', "
                    "starting with a letter or '_'"
                )
            if name in seen:
                raise ValueError(f"tag name {name!r} appears twice in the XMLParser fields")
            seen.add(name)
        normalised.append((names[0], names))
    return normalised


class XMLParser(Parser):
    """Reads tagged fields out of model text and scores how well the model kept the format."""

    def __init__(
        self,
        fields: Sequence[str | tuple[str, ...]],
        answer_field: str = "answer",
        extract_fn: Callable[[str], Any] = identity,
    ) -> None:
        super().__init__(extract_fn=extract_fn)
        self._fields = _normalise_fields(fields)
        self._canonical_of = {alt: canonical for canonical, alts in self._fields for alt in alts}
        self._index_of = {alt: i for i, (_, alts) in enumerate(self._fields) for alt in alts}
        self._aliases = {alt: c for alt, c in self._canonical_of.items() if alt != c}
        self._scanner = TagScanner(self._canonical_of)
        if answer_field != "answer" and answer_field not in self._canonical_of:
            # A typo here would make every parse_answer None, every reward 0, silently.
            raise ValueError(
                f"answer_field {answer_field!r} is not one of the fields "
                f"{sorted(self._canonical_of)}; name the tag that holds the answer"
            )
        self.answer_field = answer_field

    def get_fields(self) -> list[str]:
        """The canonical field names, in order."""
        return [canonical for canonical, _ in self._fields]

    def parse(self, text: str, strip: bool = True, last: bool = False) -> XMLFields:
        """Read every field of `text`; a missing field is None.

        With `last=True` the last occurrence of a field wins (a model that
        revises its answer), otherwise the first. `strip` trims whitespace
        around each value. None content (a tool-call turn) and content parts are read
        as `Parser.parse` reads them.
        """
        text = content_text(text)
        return self._fields_from(self._scanner.scan(text), text, strip, last)

    def _fields_from(self, scan: Scan, text: str, strip: bool, last: bool) -> XMLFields:
        values: dict[str, str | None] = dict.fromkeys(self.get_fields())
        for element in scan.elements:
            canonical = self._canonical_of[element.tag]
            if values[canonical] is not None and not last:
                continue
            value = text[element.content_start : element.content_end]
            values[canonical] = value.strip() if strip else value
        return _rebuild_fields(values, self._aliases)

    def parse_answer(self, completion: Messages) -> str | None:
        """The answer field of the last assistant turn that has one (None if none does).

        The answer is passed through `extract_fn` before it is returned. A parser
        without the `answer_field` among its fields raises ValueError.
        """
        field = self._answer_canonical()
        if isinstance(completion, str):
            texts = [completion]
        else:
            texts = [message_text(m) for m in reversed(self.get_assistant_messages(completion))]
        for text in texts:
            value = getattr(self.parse(text, last=True), field, None)
            if value is not None:
                return self.extract_fn(value)
        return None

    def _answer_canonical(self) -> str:
        """The canonical name of the answer field; ValueError when there is no such field,
        which would otherwise make every answer None and every reward 0 without a word."""
        field = self._canonical_of.get(self.answer_field)
        if field is None:
            raise ValueError(
                f"XMLParser has no field {self.answer_field!r} to read the answer from (its "
                f"fields are {self.get_fields()}); pass answer_field=<the tag of the answer>"
            )
        return field

    def get_format_str(self) -> str:
        """A description of the expected format, for a system prompt."""
        blocks = []
        for canonical, alts in self._fields:
            block = f"<{canonical}>\n...\n</{canonical}>"
            if len(alts) > 1:
                others = ", ".join(f"<{alt}>" for alt in alts[1:])
                block += f"\n(instead of <{canonical}> you may write {others})"
            blocks.append(block)
        return "\n".join(blocks)

    def format(self, **kwargs: Any) -> str:
        """Write the fields as tagged text, each under its canonical tag.

        A value may be given under any of its field's names. Every field is
        required; an unknown name is an error rather than silently dropped.
        """
        unknown = sorted(set(kwargs) - set(self._canonical_of))
        if unknown:
            raise ValueError(
                f"XMLParser.format got unknown field(s) {unknown}; the fields are "
                f"{self.get_fields()} (alternatives: {sorted(self._aliases)})"
            )
        parts = []
        for canonical, alts in self._fields:
            given = [name for name in alts if name in kwargs]
            if not given:
                raise ValueError(
                    f"XMLParser.format is missing field {canonical!r} "
                    f"(it may be passed as any of {list(alts)})"
                )
            if len(given) > 1:
                raise ValueError(
                    f"XMLParser.format got field {canonical!r} more than once, as {given}"
                )
            parts.append(f"<{canonical}>\n{kwargs[given[0]]}\n</{canonical}>")
        return "\n".join(parts)

    def score_format(self, text: str) -> float:
        """How well one piece of text keeps the format, from 0.2 to 1.0, by verifiers
        0.1.x's formula (so rewards, and the RL signal, match it exactly).

        0.4 x the share of fields present (a field counts when it parses, or when
        one of its tags appears at all; this part is 0 when no field parses), plus
        0.2 always (0.1.x's spacing check, which its own parsing always passes),
        plus 0.2 when the text starts with an opening tag of the first field, plus
        0.2 when it ends with a closing tag of the last field.
        """
        text = content_text(text) or ""
        present, parsed_any = 0, False
        for _canonical, alts in self._fields:
            found = False
            for alt in alts:
                tag = re.escape(alt)
                if re.search(rf"<{tag}>\s*(.*?)\s*</{tag}>", text, re.DOTALL):
                    parsed_any = found = True
                elif f"<{alt}>" in text or f"</{alt}>" in text:
                    found = True
            present += found
        stripped = text.strip()
        score = 0.0  # added up in 0.1.x's order, so the floats are the same too
        if parsed_any:
            score += 0.4 * (present / len(self._fields))
        score += 0.2
        if any(stripped.startswith(f"<{alt}>") for alt in self._fields[0][1]):
            score += 0.2
        if any(stripped.endswith(f"</{alt}>") for alt in self._fields[-1][1]):
            score += 0.2
        return score

    def format_reward_func(self, completion: Messages, **kwargs: Any) -> float:
        """The mean format score of the assistant turns that wrote text.

        A turn that only calls tools is skipped, not scored: it has no text to
        format (verifiers 0.1.x scored its empty content 0.2). A rollout with
        nothing to score gets 0.
        """
        if isinstance(completion, str):
            return self.score_format(completion)
        scores = [
            self.score_format(message_text(m))
            for m in self.get_assistant_messages(completion)
            if not is_tool_call_only(m)
        ]
        return sum(scores) / len(scores) if scores else 0.0
