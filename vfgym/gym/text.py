"""Turning conversation messages into observation text that always fits the spaces.

The observation spaces accept any Unicode text except control characters other
than tab, newline and carriage return (and lone surrogates, which no encoder can
write). Tool output can contain anything — ANSI colour codes, NUL bytes — so
observation text goes through `clean_text`, which shows each control character
as a visible stand-in instead of dropping it, and `fit_text`, which cuts text
longer than the space allows with a note saying so. The raw messages stay in
`info["messages"]` and in the State.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: Characters no observation contains: C0 controls except tab/newline/CR, DEL, C1
#: controls, and lone surrogates.
FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")

#: How observation text joins the contents of several messages.
SEPARATOR = "\n\n"


def _stand_in(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)  # the Unicode "control pictures": NUL -> ␀, ESC -> ␛
    if code == 0x7F:
        return "\u2421"  # ␡
    if code <= 0x9F:
        return f"<U+{code:04X}>"
    return "\ufffd"  # a lone surrogate cannot be shown; the replacement character marks it


def is_clean(text: str) -> bool:
    """True when `text` holds no character the observation spaces refuse."""
    return FORBIDDEN.search(text) is None


def clean_text(text: str) -> str:
    """`text` with every refused character replaced by a visible stand-in."""
    if text.isprintable() or FORBIDDEN.search(text) is None:
        return text
    return FORBIDDEN.sub(_stand_in, text)


def clean_strings(value: Any) -> Any:
    """`value` with `clean_text` applied to every string in it, through dicts and lists
    (a message's tool calls): a lone surrogate anywhere in an observation would fail
    to encode in an AsyncVectorEnv's shared memory."""
    if type(value) is str:
        return clean_text(value)
    if isinstance(value, dict):
        return {key: clean_strings(item) for key, item in value.items()}
    if isinstance(value, list):
        return [clean_strings(item) for item in value]
    return value


def fit_text(text: str, max_length: int) -> str:
    """`text` cut to `max_length` characters, ending with a note saying it was cut."""
    if len(text) <= max_length:
        return text
    note = (
        f"\n[... cut to {max_length} of {len(text)} characters; "
        "the full text is in info['messages']]"
    )
    if len(note) >= max_length:
        return text[:max_length]
    return text[: max_length - len(note)] + note


def content_text(content: Any) -> str:
    """The text of a message's `content`: a string, None, or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts: keep the text ones
        return "".join(part.get("text") or "" for part in content if isinstance(part, dict))
    return str(content)


def messages_text(messages: Sequence[Mapping[str, Any]] | str) -> str:
    """The contents of `messages` joined by a blank line (a completion string as it is)."""
    if isinstance(messages, str):
        return messages
    if len(messages) == 1:  # the usual reply to a move: no join needed
        return content_text(messages[0].get("content"))
    return SEPARATOR.join([content_text(m.get("content")) for m in messages])


def observation_text(messages: Sequence[Mapping[str, Any]] | str, max_length: int) -> str:
    """What the text observation shows for `messages`: cleaned and cut to fit."""
    if type(messages) is list and len(messages) == 1:  # a game's reply: the common case
        text = messages[0].get("content")
        # Every refused character is unprintable, so printable text (most one-line
        # replies) needs no search.
        if (
            type(text) is str
            and len(text) <= max_length
            and (text.isprintable() or FORBIDDEN.search(text) is None)
        ):
            return text
    return fit_text(clean_text(messages_text(messages)), max_length)


def conversation_text(messages: Iterable[Mapping[str, Any]] | str) -> str:
    """A readable transcript with role headers, tool calls shown, for `render()`."""
    if isinstance(messages, str):
        return messages
    blocks = []
    for message in messages:
        role = message.get("role", "?")
        body = content_text(message.get("content"))
        for call in message.get("tool_calls") or []:
            function = call.get("function", {}) if isinstance(call, dict) else {}
            body += f"\n-> {function.get('name', '?')}({function.get('arguments', '')})"
        blocks.append(f"[{role}]\n{body.strip()}")
    return clean_text("\n\n".join(blocks))


__all__ = [
    "FORBIDDEN",
    "SEPARATOR",
    "clean_text",
    "content_text",
    "conversation_text",
    "fit_text",
    "is_clean",
    "messages_text",
    "observation_text",
]
