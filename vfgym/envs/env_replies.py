"""What an environment's hooks return, checked: `env_response`'s reply and `setup_state`'s State.

Split from `multiturn_env.py`: the turn loop adds the environment's messages to
the completion through `take_reply`, which refuses a reply that is not
`(messages, state)` or holds something no chat server takes as a message, with an
error that names the hook and says what to return, rather than a model server's
HTTP 400 a turn later.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vfgym.types import Messages, State

if TYPE_CHECKING:
    from vfgym.envs.environment import Environment


def take_reply(env: Environment, state: State, reply: Any) -> Messages:
    """Check `env_response`'s `(messages, state)` and add the messages to the completion."""
    try:
        env_messages, new_state = reply
    except (TypeError, ValueError):
        raise bad_reply(type(env).__name__, reply) from None
    if new_state is not None and new_state is not state:
        if not isinstance(new_state, dict) or is_message(new_state):
            # e.g. two messages returned without the State: the second is no State
            raise bad_reply(type(env).__name__, reply)
        state.update(new_state)
    if env.message_type == "chat":
        if isinstance(env_messages, dict):
            env_messages = [env_messages]
        if not isinstance(env_messages, list):
            raise TypeError(
                f"{type(env).__name__}.env_response must return (list of messages, state), "
                f"got {type(env_messages).__name__} as the messages; e.g. "
                "`return [{'role': 'user', 'content': text}], state`, or `[]` for none"
            )
        for item in env_messages:
            # `_is_chat_message` inlined for the usual message (a dict with a role and
            # a text): the check runs on every turn of every rollout.
            if not (
                type(item) is dict
                and item.get("role") in CHAT_ROLES
                and type(item.get("content")) is str
            ) and not (isinstance(item, dict) and is_chat_message(item)):
                raise bad_message(type(env).__name__, item)
        state["completion"].extend(env_messages)
    else:
        try:
            state["completion"] += env_messages
        except TypeError:
            raise TypeError(
                f"{type(env).__name__}.env_response must return (text, state) in a "
                f"message_type='completion' environment, got "
                f"{type(env_messages).__name__} as the text; return '' for no text"
            ) from None
    return env_messages


def bad_message(env_name: str, item: Any) -> TypeError:
    """The error for a chat `env_response` message that is no chat message: said
    here, not as the next model call's HTTP 400 (which blames the model server) or a
    Gym observation that crashes or reads it wrong, and not left in the completion."""
    return TypeError(
        f"{env_name}.env_response returned a message that {_flaw(item)}: "
        f"{item!r:.80}. Return chat messages, e.g. "
        "`return [{'role': 'user', 'content': text}], state`"
    )


def bad_reply(env_name: str, reply: Any) -> TypeError:
    """The error for an `env_response` that did not return `(messages, state)`."""
    return TypeError(
        f"{env_name}.env_response must return (messages, state), a pair of "
        f"the new messages and the State; it returned {_describe(reply)}. "
        "End it with `return messages, state`."
    )


def prepared_state(env_name: str, state: State, prepared: Any) -> State:
    """The State after `setup_state` returned `prepared`: the same dict, or a new
    one whose keys are taken in (as `env_response`'s are)."""
    if prepared is state:
        return state
    if not isinstance(prepared, dict) or is_message(prepared):
        raise TypeError(
            f"{env_name}.setup_state must return the State (or None, having "
            f"changed it in place), got {type(prepared).__name__}; end it with "
            "`return state`"
        )
    state.update(prepared)
    return state


def is_message(value: dict[str, Any]) -> bool:
    """True for a chat message, which a State (it always has a prompt) never is."""
    return "role" in value and "prompt" not in value


#: The roles a chat message may have (those an OpenAI-compatible chat template knows).
CHAT_ROLES = frozenset({"system", "user", "assistant", "tool", "developer"})


def is_chat_message(message: dict[str, Any]) -> bool:
    """True for a dict a chat server takes as a message: a known role, and content
    that is text, None (an assistant's tool calls) or a list of parts."""
    content = message.get("content")
    return message.get("role") in CHAT_ROLES and (
        content is None or isinstance(content, str | list)
    )


def _flaw(item: Any) -> str:
    """What is wrong with `item` as a chat message, for `bad_message`."""
    if not isinstance(item, dict):
        return f"is a {type(item).__name__}, not a dict"
    if "role" not in item:
        return "has no 'role'"
    if item["role"] not in CHAT_ROLES:
        return f"has the role {item['role']!r}, not one of {sorted(CHAT_ROLES)}"
    return (
        f"has content of type {type(item.get('content')).__name__}; "
        "content must be text (a str), None or a list of parts"
    )


def _describe(reply: Any) -> str:
    """A short account of what `env_response` returned, for its error message."""
    if isinstance(reply, list | tuple):
        kinds = ", ".join(type(item).__name__ for item in reply[:4])
        more = ", ..." if len(reply) > 4 else ""
        return f"a {type(reply).__name__} of {len(reply)} ({kinds}{more})"
    return f"a {type(reply).__name__}"
