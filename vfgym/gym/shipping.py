"""Sending an episode's State across a process boundary without re-sending the conversation.

Gymnasium's `AsyncVectorEnv` runs each env in a worker process and pickles every step's
`info` back to the main process. `info` carries the episode's State and the conversation
so far, so shipped whole that is O(conversation) bytes a step and O(turns²) an episode —
for a tool task with long outputs, most of what crosses the pipe.

Inside such a worker (and only there, see `in_vector_worker`) a `StateView` crosses the
pipe as a delta: the conversation logs (`LOG_KEYS`: prompt, completion, responses), which
the turn loop only ever appends to, go as the part not sent yet; every other State entry
goes whole (they are small, and environments change them in place, so only a full copy
is sure to be right). `info["messages"]` goes as a reference to that view and is rebuilt
from it. The main process keeps one rebuilt State per episode in flight and applies each
delta in order: a worker's replies reach the main process through one ordered pipe, and
the vector env reads every one, so a delta always finds its base. A view received this
way is, like a local one, a live view of the episode's (rebuilt) State.

Plain `pickle`, `copy` and every other channel still ship the whole State: only
multiprocessing's own pickler, in a vector env's worker, learns the delta form. The main
process holds one rebuilt State per episode in flight (dropped when the episode ends or
the same worker env starts another); a vector env closed mid-episode leaves one per env.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from multiprocessing.reduction import ForkingPickler
from typing import Any

from vfgym.gym.state_view import StateView
from vfgym.types import State

#: State entries the turn loop only appends to: sent as the part not sent before.
LOG_KEYS = frozenset({"prompt", "completion", "responses"})

_SET, _SAME, _TAIL = 0, 1, 2
_STREAMS = itertools.count()


def in_vector_worker() -> bool:
    """True in a worker process of Gymnasium's `AsyncVectorEnv` (named `Worker<...>-i`)."""
    return (
        multiprocessing.parent_process() is not None
        and multiprocessing.current_process().name.startswith("Worker<")
    )


class Outbox:
    """What one episode's views have sent of its State so far (the sending side).

    One per episode, so a view of a finished episode pickled after the next one began
    (Gymnasium's same-step autoreset sends both in one reply) still sends its own part.
    """

    __slots__ = ("episode", "sent", "stream", "version")

    def __init__(self, stream: str, episode: int) -> None:
        self.stream = stream
        self.episode = episode
        self.version = -1
        self.sent: dict[str, tuple[Any, int]] = {}  # log key -> (the log, length sent)

    def pack(self, state: State) -> tuple[Any, ...]:
        """The arguments of `_rebuild_view` for the State as it is now."""
        self.version += 1
        entries = []
        for key, value in state.items():
            if key in LOG_KEYS and type(value) in (list, str):
                before = self.sent.get(key)
                self.sent[key] = (value, len(value))
                if before is not None and _extends(value, before):
                    length = before[1]
                    if len(value) == length:
                        entries.append((key, _SAME, None))
                    else:
                        entries.append((key, _TAIL, value[length:]))
                    continue
            entries.append((key, _SET, value))
        final = state.get("stop_reason") is not None
        return (self.stream, self.episode, self.version, entries, final)


def _extends(value: Any, before: tuple[Any, int]) -> bool:
    """True when `value` is what was sent before, with items added at the end only."""
    sent, length = before
    if type(value) is str:
        return len(value) >= length and value.startswith(sent)
    return value is sent and len(value) >= length


def new_outbox(stream: str | None, episode: int) -> Outbox:
    """An episode's outbox on `stream` (a new stream id when None)."""
    return Outbox(stream or f"{os.getpid()}:{next(_STREAMS)}", episode)


class Conversation(list):  # type: ignore[type-arg]
    """`info["messages"]` as sent from a vector worker: a list, plus the view it came from.

    It crosses the pipe as a reference to that view (sent once per reply) and is
    rebuilt from the received State, so the conversation is never sent twice.
    """

    __slots__ = ("view",)

    def __init__(self, messages: list[Any], view: StateView) -> None:
        super().__init__(messages)
        self.view = view


# --------------------------------------------------------------- the receiving side

#: stream -> episode -> [version, rebuilt State]; only episodes still in flight.
_INBOX: dict[str, dict[int, list[Any]]] = {}


def _rebuild_view(
    stream: str, episode: int, version: int, entries: list[Any], final: bool
) -> StateView:
    episodes = _INBOX.setdefault(stream, {})
    if version == 0:
        for older in [e for e in episodes if e < episode]:  # abandoned by a reset
            del episodes[older]
        slot = episodes[episode] = [-1, {}]
    else:
        slot = episodes.get(episode)
        if slot is None or slot[0] != version - 1:
            raise RuntimeError(
                f"a State update ({stream} episode {episode} #{version}) arrived without "
                "the updates before it; State views from a vector env worker must be "
                "received in order by the vector env itself"
            )
    state = slot[1]
    keys = []
    for key, kind, value in entries:
        keys.append(key)
        if kind == _SET:
            state[key] = value
        elif kind == _TAIL:  # a log grew: lists in place (views of it are live), text anew
            if type(value) is str:
                state[key] = state[key] + value
            else:
                state[key].extend(value)
    for gone in [k for k in state if k not in keys]:
        del state[gone]
    slot[0] = version
    if final:
        del episodes[episode]
        if not episodes:
            del _INBOX[stream]
    return StateView(state)


def _rebuild_conversation(view: StateView) -> list[Any]:
    return view["prompt"] + view["completion"]


def _reduce_view(view: StateView) -> tuple[Any, ...]:
    outbox = view._outbox
    if outbox is None:
        return view.__reduce__()
    return (_rebuild_view, outbox.pack(view._state))


def _reduce_conversation(messages: Conversation) -> tuple[Any, ...]:
    if messages.view._outbox is None:
        return (list, (list(messages),))
    return (_rebuild_conversation, (messages.view,))


def use_delta_shipping() -> None:
    """Teach multiprocessing's pickler (in this process only) to send views as deltas."""
    ForkingPickler.register(StateView, _reduce_view)
    ForkingPickler.register(Conversation, _reduce_conversation)


__all__ = [
    "LOG_KEYS",
    "Conversation",
    "Outbox",
    "in_vector_worker",
    "new_outbox",
    "use_delta_shipping",
]
