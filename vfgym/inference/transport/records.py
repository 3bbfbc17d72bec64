"""Server answers as dicts also read by attribute, their parts wrapped as they are read.

The openai client validates every answer into pydantic models, field by field and,
with logprobs, token by token; that is most of its cost per call. A rollout reads
a handful of fields (`choices[0].message.content`, `.tool_calls`, `finish_reason`,
`usage`), and a trainer the token ids and logprobs, so `ResponseRecord` is the
decoded JSON object itself, and a nested object becomes a record only when it is
read. It keeps the contract of `state["responses"]`: attribute access as on the
SDK's models, None for a field the server left out, `model_dump` for the results
writer; and, being a dict, it is written as JSON as it is and read with `.get`.
"""

from __future__ import annotations

import json
from typing import Any


class ResponseRecord(dict[str, Any]):
    """A JSON object of a server's answer, read by attribute like the openai models.

    `record.choices[0].message.content` reads the decoded JSON: nested objects come
    back as `ResponseRecord`s (made on first read, then kept in their place), lists
    of objects as lists of them. A field the server did not send reads as None (as
    an optional field of the SDK's models does), so `getattr(choice, "token_ids",
    None)` finds vLLM's extras and `choice.logprobs` is None when none were asked
    for. Names starting with an underscore are never fields (they raise
    AttributeError), so copying, pickling and protocol checks behave as on a dict.
    """

    __slots__ = ()

    def __getattribute__(self, name: str) -> Any:
        # Fields first, read straight from the dict: Python's usual lookup would fail
        # before a `__getattr__` ran, and a failed lookup costs microseconds.
        if name[0] != "_":
            value = dict.get(self, name, _MISSING)
            if value is _MISSING:
                if name in _CLASS_NAMES:  # a method or property (`model_dump`, `get`)
                    return object.__getattribute__(self, name)
                return None  # a field the server did not send
            kind = type(value)
            if kind is dict:
                value = ResponseRecord(value)
                dict.__setitem__(self, name, value)
            elif kind is list and value and type(value[0]) is dict:
                value[:] = [ResponseRecord(v) if type(v) is dict else v for v in value]
            return value
        return object.__getattribute__(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        """Set a field, as the SDK's models allow (a hook may rewrite an answer)."""
        if name.startswith("_"):
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r} to set")
        self[name] = value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict.__repr__(self)})"

    @property
    def model_extra(self) -> dict[str, Any]:
        """Empty: every field the server sent is an attribute already (vLLM's extras too)."""
        return {}

    def model_dump(self, *, exclude_none: bool = False, **_ignored: Any) -> dict[str, Any]:
        """A fresh plain-dict copy of the answer, as the SDK models' `model_dump` gives
        (`exclude_none` drops null fields; pydantic's other options do not apply here)."""
        copied: dict[str, Any] = _copy(self, exclude_none)
        return copied

    def model_dump_json(
        self, *, exclude_none: bool = False, indent: int | None = None, **_ignored: Any
    ) -> str:
        """The answer as JSON text, as the SDK models' `model_dump_json` gives it."""
        return json.dumps(self.model_dump(exclude_none=exclude_none), indent=indent)

    def to_dict(self) -> dict[str, Any]:
        """The answer as a plain dict (the SDK models' name for `model_dump`)."""
        return self.model_dump()


_MISSING = object()
#: What attribute access finds on the class (methods, properties), not in the fields.
_CLASS_NAMES = frozenset(name for name in dir(ResponseRecord) if not name.startswith("_"))


def _copy(value: Any, exclude_none: bool) -> Any:
    if isinstance(value, dict):
        return {
            k: _copy(v, exclude_none) for k, v in value.items() if not (exclude_none and v is None)
        }
    if isinstance(value, list):
        return [_copy(v, exclude_none) for v in value]
    return value
