"""Observation and action spaces for conversations.

Gymnasium's `spaces.Text` only accepts characters from an explicit charset,
alphanumerics by default: a prompt with a space or a newline is not "in" it. Listing
every printable Unicode character would be a set of about 290,000 strings, copied
into every vector sub-space. `UnicodeText` is a `Text` whose membership is a rule
instead: any string without control characters (tab, newline and carriage return
excepted) and without lone surrogates, up to `max_length` characters.

Gymnasium's helpers that map characters to indices (`flatten`, and the shared memory
that `AsyncVectorEnv` uses by default) are given code-point versions for these
spaces here, registered on their `functools.singledispatch` functions. That matters:
with the stock `Text` handlers, `AsyncVectorEnv(shared_memory=True)` reads the text
observations once at construction and hands back those stale strings forever. Ours
decode the current contents on every step, so `gym.make_vec(..., "async")` returns
the right strings with no option to set.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import operator
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any, SupportsIndex, overload

import numpy as np
from gymnasium.spaces import Box, Space, Text
from gymnasium.spaces.utils import flatdim, flatten, flatten_space, unflatten
from gymnasium.vector.utils.shared_memory import (
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)

from vfgym.errors import MessagesNotFlattenableError
from vfgym.gym.actions import checked_message
from vfgym.gym.text import FORBIDDEN, is_clean

#: The default bound on observation text, in characters.
DEFAULT_MAX_TEXT_LENGTH = 65_536

#: One past the largest Unicode code point: the padding value of flattened text.
CODE_POINT_LIMIT = 0x110000

#: The alphabet `sample()` draws from: every character is in the space, and a few
#: beyond ASCII make sure random actions exercise Unicode handling.
SAMPLE_ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    " \n\t.,;:!?'\"()[]{}<>/\\|-_+=*&^%$#@~`"
    "éüßñøΩЖ中あ€→✓"
)

#: Message roles a conversation may hold.
ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


class UnicodeText(Text):
    """Text of 0 to `max_length` characters: any Unicode except control characters.

    Tab, newline and carriage return are allowed; other C0/C1 controls and lone
    surrogates are not (the adapter shows them as visible stand-ins, see
    `vfgym.gym.text.clean_text`). `sample()` draws from `SAMPLE_ALPHABET`, and a
    `mask` passed to it indexes `character_list`, that alphabet.
    """

    def __init__(
        self,
        max_length: int = DEFAULT_MAX_TEXT_LENGTH,
        *,
        min_length: int = 0,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        super().__init__(max_length, min_length=min_length, charset=SAMPLE_ALPHABET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length and is_clean(x)

    def character_index(self, char: str) -> np.int32:
        """The code point of `char`: what flattened text and shared memory hold."""
        return np.int32(ord(char))

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object, /) -> bool:
        return (
            type(other) is type(self)
            and self.min_length == other.min_length  # type: ignore[attr-defined]
            and self.max_length == other.max_length  # type: ignore[attr-defined]
        )

    __hash__ = None  # type: ignore[assignment]  # mutable rng inside, like other spaces


class ModelTurnSpace(UnicodeText):
    """The model's turn: its text, or an assistant message dict (with `tool_calls`).

    `sample()` gives text. A message (a dict, or an openai `ChatCompletionMessage`)
    is how a tool call reaches `step` of a chat env; it is a member exactly when
    `step` would take it (`vfgym.gym.actions.checked_message` decides both) and its
    text is clean like a text member's. A completion-style env (`chat=False`) takes
    text alone. Its text length is not bounded by `max_length` (text or message
    alike), because the model's turn is taken as the model wrote it: `max_length`
    bounds only `sample()` and the flattened form.
    """

    def __init__(
        self,
        max_length: int = DEFAULT_MAX_TEXT_LENGTH,
        *,
        chat: bool = True,
        min_length: int = 0,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        """`chat=False` for a completion-style env, whose turns are text only."""
        super().__init__(max_length, min_length=min_length, seed=seed)
        self.chat = chat

    def contains(self, x: Any) -> bool:
        if isinstance(x, str):  # any length from min_length up, as `step` takes it
            return len(x) >= self.min_length and is_clean(x)
        return self.chat and is_assistant_message(x)

    def __repr__(self) -> str:
        chat = "" if self.chat else ", chat=False"
        return f"ModelTurnSpace({self.min_length}, {self.max_length}{chat})"

    def __eq__(self, other: object, /) -> bool:
        return super().__eq__(other) and self.chat == other.chat  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]


def _is_role(role: Any) -> bool:
    """True for a known role; any other value (an unhashable one too) is simply not one."""
    return isinstance(role, str) and role in ROLES


def is_assistant_message(x: Any) -> bool:
    """True for an assistant turn `step` takes whose text has no control characters.

    The shape check is `step`'s own, so the action space and `step` agree on messages.
    """
    try:
        content = checked_message(x)["content"]
    except (TypeError, ValueError):
        return False
    return content is None or is_clean(content)


class MessagesSpace(Space[list]):
    """Lists of chat-message dicts, for `observation_mode="messages"`.

    A member is a list of dicts, each with a known `role` and a `content` that is
    None or text in a `UnicodeText(max_length)`; other keys (`tool_calls`,
    `tool_call_id`, `name`) may be present, and the whole list's JSON form is at
    most `shared_memory_chars` characters: what an `AsyncVectorEnv` reserves per
    sub-env in shared memory. A `GymEnv` cuts the longest contents of an
    observation (with a note) until it fits.
    """

    def __init__(
        self,
        max_length: int = DEFAULT_MAX_TEXT_LENGTH,
        *,
        shared_memory_chars: int | None = None,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        self.text = UnicodeText(max_length)
        self.max_length = max_length
        self.shared_memory_chars = _checked_json_bound(shared_memory_chars, max_length)
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def contains(self, x: Any) -> bool:
        if not isinstance(x, list):
            return False
        for message in x:
            if not isinstance(message, dict) or not _is_role(message.get("role")):
                return False
            content = message.get("content")
            if content is not None and not self.text.contains(content):
                return False
        try:
            text = json.dumps(x, ensure_ascii=False)
        except (TypeError, ValueError):  # not JSON data: shared memory could not carry it
            return False
        # A lone surrogate (or a control character) outside the contents, in a tool
        # call say, would not encode into shared memory either.
        return len(text) <= self.shared_memory_chars and is_clean(text)

    def sample(self, mask: Any = None, probability: Any = None) -> list[dict[str, Any]]:
        """One to three user or tool messages with short random text, cut to fit the
        space's JSON bound (`shared_memory_chars`), so a sample is always a member."""
        if mask is not None or probability is not None:
            raise ValueError("MessagesSpace.sample does not take a mask or probabilities")
        rng = self.np_random
        messages = []
        for _ in range(int(rng.integers(1, 4))):
            length = int(rng.integers(0, min(64, self.max_length) + 1))
            chars = rng.choice(list(SAMPLE_ALPHABET), size=length)
            messages.append({"role": str(rng.choice(["user", "tool"])), "content": "".join(chars)})
        return _fit_sample(messages, self.shared_memory_chars)

    def __repr__(self) -> str:
        if self.shared_memory_chars == _default_json_bound(self.max_length):
            return f"MessagesSpace({self.max_length})"
        return f"MessagesSpace({self.max_length}, shared_memory_chars={self.shared_memory_chars})"

    def __eq__(self, other: object, /) -> bool:
        """Equal when the members are: the JSON bound decides membership too."""
        return (
            isinstance(other, MessagesSpace)
            and self.max_length == other.max_length
            and self.shared_memory_chars == other.shared_memory_chars
        )

    __hash__ = None  # type: ignore[assignment]


def _default_json_bound(max_length: int) -> int:
    """Room for a few messages of `max_length` characters each, escapes included."""
    return 4 * max_length + 4096


def _checked_json_bound(chars: Any, max_length: int) -> int:
    """`shared_memory_chars` as an int >= 2, or the default for None.

    2 is the JSON of an empty list: below it no list is a member, and `sample()` could
    give nothing. (0 used to mean the default, hiding a bound computed as 0.)"""
    if chars is None:
        return _default_json_bound(max_length)
    if isinstance(chars, bool) or not isinstance(chars, int | np.integer):
        raise TypeError(
            "shared_memory_chars must be an int >= 2 (the JSON length of a message list) "
            f"or None for the default, not {type(chars).__name__}"
        )
    if chars < len("[]"):
        raise ValueError(
            "shared_memory_chars must be an int >= 2 (the JSON length of a message list; "
            f"2 holds only the empty list) or None for the default, not {chars}"
        )
    return int(chars)


def _json_length(messages: list[dict[str, Any]]) -> int:
    """How many characters `messages` take as JSON, as `contains` and shared memory count."""
    return len(json.dumps(messages, ensure_ascii=False))


def _fit_sample(messages: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """`messages` with the last contents shortened, then the last messages dropped,
    until their JSON takes at most `limit` characters (>= 2, so `[]` always fits)."""
    excess = _json_length(messages) - limit
    while excess > 0:
        content = messages[-1]["content"]
        if content:  # each character takes at least one JSON character: cut that many
            messages[-1]["content"] = content[: max(0, len(content) - excess)]
        else:
            messages.pop()
        excess = _json_length(messages) - limit
    return messages


# ------------------------------------------------------------------ flattening
#
# Registered with `register(cls, function)`: mypy's check of the decorator form
# cannot match a subclass of `Space[str]` against Gymnasium's generic `Space[T]`.


def _flatten_unicode(space: UnicodeText, x: str) -> np.ndarray:
    if len(x) > space.max_length:
        raise ValueError(f"text of {len(x)} characters does not fit {space!r}")
    out = np.full(space.max_length, CODE_POINT_LIMIT, dtype=np.int32)
    out[: len(x)] = np.frombuffer(x.encode("utf-32-le"), dtype=np.int32)
    return out


flatten.register(UnicodeText, _flatten_unicode)


def _unflatten_unicode(space: UnicodeText, x: np.ndarray) -> str:
    """The text of code points `x`, padding (`CODE_POINT_LIMIT`) left out.

    Any member of `flatten_space(space)` unflattens to a member of the space, as with
    Gymnasium's `Text`: a code point the space refuses (a surrogate, which no codec
    decodes, or a control character) becomes U+FFFD, one character for one, so what
    `flatten` gave back comes back unchanged."""
    points = np.asarray(x, dtype=np.int32)
    points = points[points < CODE_POINT_LIMIT]
    if (points < 0).any():
        raise ValueError(
            f"flattened text holds code points 0 to {CODE_POINT_LIMIT - 1:#x} and the padding "
            f"{CODE_POINT_LIMIT:#x}, not {int(points.min())}"
        )
    text = points.tobytes().decode("utf-32-le", "surrogatepass")
    return text if is_clean(text) else FORBIDDEN.sub("\ufffd", text)


unflatten.register(UnicodeText, _unflatten_unicode)


@flatten_space.register(UnicodeText)
def _flatten_unicode_space(space: UnicodeText) -> Box:
    return Box(low=0, high=CODE_POINT_LIMIT, shape=(space.max_length,), dtype=np.int32)


@flatdim.register(UnicodeText)
def _flatdim_unicode(space: UnicodeText) -> int:
    return space.max_length


def _flatten_messages(space: MessagesSpace, x: Any) -> np.ndarray:
    raise MessagesNotFlattenableError(space)


flatten.register(MessagesSpace, _flatten_messages)


def _unflatten_messages(space: MessagesSpace, x: Any) -> list:
    raise MessagesNotFlattenableError(space)


unflatten.register(MessagesSpace, _unflatten_messages)


@flatten_space.register(MessagesSpace)
def _flatten_messages_space(space: MessagesSpace) -> Box:
    raise MessagesNotFlattenableError(space)


@flatdim.register(MessagesSpace)
def _flatdim_messages(space: MessagesSpace) -> int:
    raise MessagesNotFlattenableError(space)


# --------------------------------------------------------------- shared memory
#
# Layout per sub-environment: one int32 length, then the text's code points. The
# reader returns a live view; vector envs deep-copy it (their default `copy=True`),
# which decodes the current texts into a plain tuple, the same type SyncVectorEnv
# returns.


def _capacity(space: UnicodeText | MessagesSpace) -> int:
    return space.max_length if isinstance(space, UnicodeText) else space.shared_memory_chars


def _encode(space: UnicodeText | MessagesSpace, value: Any) -> str:
    if isinstance(space, MessagesSpace):
        return json.dumps(value, ensure_ascii=False)
    return value


def _decode(space: UnicodeText | MessagesSpace, text: str) -> Any:
    return json.loads(text) if isinstance(space, MessagesSpace) else text


class SharedTextBatch(Sequence[Any]):
    """The texts (or message lists) of all sub-environments, read from shared memory.

    What an `AsyncVectorEnv` made with `copy=False` returns as observations. It is
    live: every access decodes what is in shared memory *now*, so after the next
    step the same object shows the new observations (take `tuple(batch)` to keep
    them). Otherwise it is a read-only sequence like the tuple a `copy=True` vector
    env returns: a slice gives a tuple, it equals any sequence with equal items, and
    it is unhashable (its contents change). `copy.deepcopy` (what vector envs do
    before returning observations by default) gives a plain tuple.
    """

    def __init__(self, space: UnicodeText | MessagesSpace, buffer: Any, n: int) -> None:
        self._space = space
        self._buffer = buffer
        self._n = n
        self._stride = _capacity(space) + 1
        self._data = np.frombuffer(buffer.get_obj(), dtype=np.int32)  # a view, made once

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: SupportsIndex) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Any, ...]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> Any:
        if isinstance(index, slice):
            return tuple(self._read(i) for i in range(self._n)[index])
        try:
            position = operator.index(index)
        except TypeError:
            raise TypeError(
                f"sub-environments are indexed by an int or a slice, not {type(index).__name__}"
            ) from None
        if not -self._n <= position < self._n:
            raise IndexError(f"sub-environment {position} of {self._n} (0 to {self._n - 1})")
        return self._read(position % self._n)

    def _read(self, index: int) -> Any:
        """The current observation of sub-environment `index` (0 <= index < n)."""
        data = self._data
        start = index * self._stride
        length = int(data[start])
        text = data[start + 1 : start + 1 + length].tobytes().decode("utf-32-le")
        return _decode(self._space, text)

    def __iter__(self) -> Iterator[Any]:
        return (self._read(i) for i in range(self._n))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(other) == self._n and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # the contents change under it

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[Any, ...]:
        return tuple(self)

    def __repr__(self) -> str:
        return f"SharedTextBatch({tuple(self)!r})"


@create_shared_memory.register(UnicodeText)
@create_shared_memory.register(MessagesSpace)
def _create_text_memory(
    space: UnicodeText | MessagesSpace, n: int = 1, ctx: ModuleType = mp
) -> Any:
    return ctx.Array(np.dtype(np.int32).char, n * (_capacity(space) + 1))  # type: ignore[attr-defined]


@read_from_shared_memory.register(UnicodeText)
@read_from_shared_memory.register(MessagesSpace)
def _read_text_memory(space: UnicodeText | MessagesSpace, shared_memory: Any, n: int = 1) -> Any:
    return SharedTextBatch(space, shared_memory, n)


@write_to_shared_memory.register(UnicodeText)
@write_to_shared_memory.register(MessagesSpace)
def _write_text_memory(
    space: UnicodeText | MessagesSpace, index: int, value: Any, shared_memory: Any
) -> None:
    text = _encode(space, value)
    capacity = _capacity(space)
    if len(text) > capacity:
        raise ValueError(
            f"an observation of {len(text)} characters does not fit the {capacity} of shared "
            f"memory reserved for {space!r}; make the vector env with "
            "vector_kwargs={'shared_memory': False}"
        )
    data = np.frombuffer(shared_memory.get_obj(), dtype=np.int32)
    start = index * (capacity + 1)
    data[start] = len(text)
    data[start + 1 : start + 1 + len(text)] = np.frombuffer(
        text.encode("utf-32-le"), dtype=np.int32
    )


__all__ = [
    "DEFAULT_MAX_TEXT_LENGTH",
    "MessagesNotFlattenableError",
    "MessagesSpace",
    "ModelTurnSpace",
    "SharedTextBatch",
    "UnicodeText",
    "is_assistant_message",
]
