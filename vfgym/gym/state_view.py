"""A read-only view of an episode's State, as `info["state"]` carries it.

Why not the State dict itself: Gymnasium's checker requires every `info` to be new
data that shares no dict with an earlier one, and vector envs explode dict-valued
info entries key by key into arrays. A view is a small object, one per episode
(it reads the live State, so a new one per step would show nothing more), is stored
whole by vector envs, and has no way to set or delete a State entry (the nested values
are the live objects, though: read them, do not modify them). After
`reset()` the old view keeps showing the old episode, never the new one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from vfgym.types import State

#: State entries that measure wall-clock time rather than what happened; two
#: replays of the same episode differ only there, so equality ignores them.
CLOCK_KEYS = frozenset({"timing"})
CLOCK_LOG_FIELDS = frozenset({"duration_s"})


def _without_clock(state: Mapping[str, Any]) -> dict[str, Any]:
    content = {k: v for k, v in state.items() if k not in CLOCK_KEYS}
    log = content.get("tool_call_log")
    if isinstance(log, list):
        content["tool_call_log"] = [
            {k: v for k, v in entry.items() if k not in CLOCK_LOG_FIELDS}
            if isinstance(entry, dict)
            else entry
            for entry in log
        ]
    return content


class StateView(Mapping[str, Any]):
    """Read-only mapping over a State; equal to another when the episodes are the same.

    Use `view["game_state"]`, `view["completion"]`, `dict(view)` as with the State.
    Nested values are the live objects: read them, do not modify them.
    """

    __slots__ = ("_outbox", "_state")

    def __init__(self, state: State, outbox: Any = None) -> None:
        self._state = state
        # Set in a vector env's worker: how the view crosses the pipe as a delta
        # (`vfgym.gym.shipping`); plain pickling ignores it and sends the whole State.
        self._outbox = outbox

    def __getitem__(self, key: str) -> Any:
        return self._state[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._state)

    def __len__(self) -> int:
        return len(self._state)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StateView):
            other = other._state
        if not isinstance(other, Mapping):
            return NotImplemented
        return _without_clock(self._state) == _without_clock(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        keys = ", ".join(self._state)
        return f"StateView(turn={self._state.get('turn')}, keys=[{keys}])"

    def __reduce__(self) -> tuple[Any, ...]:
        return (StateView, (self._state,))


__all__ = ["StateView"]
