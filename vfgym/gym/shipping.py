"""Sending an episode's State across a process boundary without re-sending the conversation.

Gymnasium's `AsyncVectorEnv` runs each env in a worker process and pickles every step's
`info` back to the main process. `info` carries the episode's State and the conversation
so far, so shipped whole that is O(conversation) bytes a step and O(turns²) an episode —
for a tool task with long outputs, most of what crosses the pipe.

Inside such a worker (and only there, see `in_vector_worker`) a `StateView` crosses the
pipe as a delta: the conversation logs (`LOG_KEYS`: prompt, completion, responses), which
the turn loop appends to, go as the part not sent yet; every other State entry goes whole
(they are small, and environments change them in place, so only a full copy is sure to
be right). An environment may still rewrite a log's history (elide an old reply in
place, pop one message and push another, swap in a new list): so the sender keeps a
snapshot of what it sent and compares the log's sent part with it before sending only
the new part; on any difference the whole log goes again (see `Outbox`).
`info["messages"]` goes as a reference to that view and is rebuilt from it (unless a
wrapper in the worker changed the list: then it goes whole, as it is). The main
process keeps one rebuilt State per episode in flight and applies each delta in order: a
worker's replies reach the main process through one ordered pipe, and the vector env
reads every one, so a delta always finds its base. A view received this way is, like a
local one, a live view of the episode's (rebuilt) State.

Plain `pickle`, `copy` and every other channel still ship the whole State: only
multiprocessing's own pickler, in a vector env's worker, learns the delta form. The main
process holds one rebuilt State per episode in flight, dropped when the episode ends or
the same worker env starts another. A vector env closed mid-episode lets go of its own
when it is garbage-collected (a finalizer on the pipe end that received them), or
earlier, as soon as any async vector env starts a new worker env after it was closed.
Views already handed out keep their State either way.
"""

from __future__ import annotations

import itertools
import multiprocessing
import multiprocessing.connection
import operator
import os
import sys
import weakref
from multiprocessing.reduction import ForkingPickler
from types import FrameType
from typing import Any

from vfgym.gym.state_view import StateView
from vfgym.types import State

#: State entries the turn loop appends to: sent as the part not sent before, as long as
#: the part already sent is unchanged (else whole).
LOG_KEYS = frozenset({"prompt", "completion", "responses"})

_SET, _SAME, _TAIL = 0, 1, 2
#: Immutable types a snapshot keeps as they are (the common leaves of a message).
_LEAVES = frozenset({str, int, float, bool, type(None), bytes})
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

    For each log it keeps what was sent: a text log as the (immutable) string, a list
    log as a structural snapshot of its items (`_snapshot`), taken once per item when the
    item is first sent. Before sending only the new part, the log's sent part must still
    equal that snapshot, so an edit anywhere in the history sends the whole log again.
    The check is one C-level list comparison whose equal leaves are mostly the very same
    objects (identity short-circuits): about 80 ns a message, so some 4 µs a step for a
    50-message conversation, against the whole log pickled and piped on every step.

    Not detected: a change that leaves the sent part equal (`1` becoming `1.0`), and an
    in-place change inside an object other than a plain dict, list, tuple or set (a
    pydantic model in `responses`, a dict subclass): the snapshot holds that object
    itself. Replacing such an object by an unequal one is detected.
    """

    __slots__ = ("episode", "sent", "stream", "version")

    def __init__(self, stream: str, episode: int) -> None:
        self.stream = stream
        self.episode = episode
        self.version = -1
        self.sent: dict[str, Any] = {}  # log key -> what was sent: str, or list snapshot

    def pack(self, state: State) -> tuple[Any, ...]:
        """The arguments of `_rebuild_view` for the State as it is now."""
        self.version += 1
        for gone in [key for key in self.sent if key not in state]:
            del self.sent[gone]  # the receiver drops it too: it must come whole again
        entries = [
            self._log_entry(key, value) if key in LOG_KEYS else (key, _SET, value)
            for key, value in state.items()
        ]
        final = state.get("stop_reason") is not None
        return (self.stream, self.episode, self.version, entries, final)

    def _log_entry(self, key: str, value: Any) -> tuple[str, int, Any]:
        """A log as sent: whole, or when it only grew since last sent, its new part."""
        if type(value) not in (list, str):
            self.sent.pop(key, None)  # a log replaced by something else: no base left
            return (key, _SET, value)
        before = self.sent.get(key)
        if before is None or not _extends(value, before):
            self.sent[key] = value if type(value) is str else _snapshot(value)
            return (key, _SET, value)
        length = len(before)
        if len(value) == length:
            return (key, _SAME, None)
        tail = value[length:]
        if type(value) is str:
            self.sent[key] = value
        else:
            before.extend(_snapshot(tail))  # only the new items are copied
        return (key, _TAIL, tail)


def _extends(value: list[Any] | str, sent: list[Any] | str) -> bool:
    """True when `value` is what was sent (`sent`, a snapshot) with items added at the end.

    Equality, not identity: a log rebuilt as a new list with the same history still
    sends only its new items, and a log edited in place no longer matches its snapshot.
    """
    if type(value) is not type(sent) or len(value) < len(sent):
        return False
    if isinstance(value, str) and isinstance(sent, str):  # (both or neither: same type)
        return value.startswith(sent)
    if len(value) == len(sent):
        return value == sent
    return value[: len(sent)] == sent


def _snapshot(value: Any) -> Any:
    """A copy of `value` that later in-place edits of it cannot reach.

    Containers are copied down to their leaves; the leaves (and objects of other types)
    are kept by reference, so comparing a log with its snapshot mostly meets the very
    same objects and stays cheap.
    """
    kind = type(value)
    if kind is dict:  # a message: mostly str leaves, kept without a call each
        return {k: v if type(v) in _LEAVES else _snapshot(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _LEAVES else _snapshot(v) for v in value]
    if kind is tuple:
        return tuple(_snapshot(item) for item in value)
    if kind is set:
        return set(value)  # its items are hashable, so in practice immutable
    return value


def new_outbox(stream: str | None, episode: int) -> Outbox:
    """An episode's outbox on `stream` (a new stream id when None).

    A stream id is never reused, even by a later worker that gets a recycled pid (and
    the counter as it was at the fork): a stale inbox entry of a closed vector env must
    not be taken for the base of a new stream, nor its release drop the new one.
    """
    return Outbox(stream or f"{os.getpid()}:{next(_STREAMS)}:{os.urandom(4).hex()}", episode)


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
#: stream -> (a weak reference to) the pipe end it arrives on, when it is one.
_RECEIVERS: dict[str, weakref.ref[Any]] = {}
_CONNECTIONS = tuple(
    getattr(multiprocessing.connection, name)
    for name in ("Connection", "PipeConnection")
    if hasattr(multiprocessing.connection, name)
)


def _receiving_connection(frame: FrameType | None) -> Any:
    """The pipe end whose `recv` is unpickling this reply (`frame` is the unpickler's
    caller: `Connection.recv`), or None when the view came some other way."""
    receiver = None if frame is None else frame.f_locals.get("self")
    return receiver if isinstance(receiver, _CONNECTIONS) else None


def _open_stream(stream: str, receiver: Any) -> dict[int, list[Any]]:
    """The inbox of a stream seen for the first time, released with its receiver.

    Once per worker env (not per step): also drops the streams of pipe ends closed since,
    which can never receive again (a vector env closed but still referenced).
    """
    for other, ref in list(_RECEIVERS.items()):
        connection = ref()
        if connection is None or connection.closed:
            _drop_stream(other)
    episodes = _INBOX[stream] = {}
    if receiver is not None:
        _RECEIVERS[stream] = weakref.ref(receiver)
        weakref.finalize(receiver, _drop_stream, stream).atexit = False
    return episodes


def _drop_stream(stream: str) -> None:
    """Forget a stream whose receiver is gone or closed: no delta of it can come."""
    _INBOX.pop(stream, None)
    _RECEIVERS.pop(stream, None)


def _rebuild_view(
    stream: str, episode: int, version: int, entries: list[Any], final: bool
) -> StateView:
    episodes = _INBOX.get(stream)
    if episodes is None:
        episodes = _open_stream(stream, _receiving_connection(sys._getframe(1)))
    slot: list[Any] | None
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
        if not episodes and stream not in _RECEIVERS:  # else kept until its receiver goes
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
    view = messages.view
    if view._outbox is None or not _is_conversation_of(messages, view._state):
        return (list, (list(messages),))
    return (_rebuild_conversation, (view,))


def _is_conversation_of(messages: Conversation, state: State) -> bool:
    """True while `messages` holds exactly the State's prompt and completion messages
    (the very objects), as the env made it: only then can the receiver rebuild it from
    the State. A wrapper in the worker that added, removed or replaced a message in the
    list makes it go whole, as it is. (A message changed in place is the State's own
    message changed, and reaches the receiver with the State.) One identity check a
    message: some 20 ns."""
    prompt, completion = state.get("prompt"), state.get("completion")
    if type(prompt) is not list or type(completion) is not list:
        return False
    if len(messages) != len(prompt) + len(completion):
        return False
    return all(map(operator.is_, messages, itertools.chain(prompt, completion)))


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
