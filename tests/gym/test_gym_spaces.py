"""The text and message spaces, and how observation text is made to fit them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from gym_test_envs import CalculatorEnv, GuessEnv, guess_rows
from gymnasium.spaces.utils import flatdim, flatten, flatten_space, unflatten
from gymnasium.vector.utils.shared_memory import (
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)
from gymnasium.wrappers import FlattenObservation

from vfgym.envs import MultiTurnEnv
from vfgym.gym import GymEnv, MessagesSpace, ModelTurnSpace, UnicodeText
from vfgym.gym.text import FORBIDDEN, clean_text, fit_text, observation_text
from vfgym.inference.messages import last_content
from vfgym.types import Messages, State


def test_unicode_text_accepts_printable_unicode_and_layout_whitespace():
    space = UnicodeText(100)
    for text in ["", "hello world", "a\nb\tc\r\n", "Ünïcödé ✓ 中文 😀 👨‍👩‍👧", "\u00a0nbsp"]:
        assert space.contains(text), text
    for bad in ["bell\x07", "esc\x1b[0m", "nul\x00", "c1\x85", "\ud800", "x" * 101, 5, None]:
        assert not space.contains(bad), repr(bad)


def test_samples_are_members_and_follow_the_seed():
    for space in (UnicodeText(300), ModelTurnSpace(300), MessagesSpace(300)):
        space.seed(5)
        first = [space.sample() for _ in range(20)]
        assert all(space.contains(s) for s in first)
        space.seed(5)
        assert [space.sample() for _ in range(20)] == first


def test_model_turn_space_takes_assistant_messages_with_tool_calls():
    space = ModelTurnSpace(10)
    assert space.contains({"role": "assistant", "content": None, "tool_calls": [CALL]})
    assert space.contains({"role": "assistant", "content": "x" * 50})  # no length bound
    assert space.contains({"content": "ok", "usage": {"completion_tokens": 1}})
    assert space.contains({"tool_calls": [{"function": {"name": "add", "arguments": {"a": 1}}}]})
    assert not space.contains({"role": "user", "content": "hi"})
    assert not space.contains({"role": "assistant", "tool_calls": "add"})


def test_a_text_action_is_as_unbounded_as_a_message_and_as_step_takes_it():
    env = GymEnv(GuessEnv(), max_text_length=16)  # observations cut to 16 characters
    try:
        env.reset(seed=0)
        action = "my guess is 5, " * 10  # longer than the observations' bound
        assert env.action_space.contains({"role": "assistant", "content": action})
        assert env.action_space.contains(action)
        assert env.step(action)[0] == "5: go higher."  # step takes it as it is
        assert not env.action_space.contains(action + "\x00")  # still clean text only
    finally:
        env.close()


def test_a_messages_space_answers_false_for_any_non_member_instead_of_raising():
    space = MessagesSpace(100)
    assert space.contains([{"role": "user", "content": "hi"}])
    for bad in ([{"role": ["user"], "content": "hi"}], [{"role": {"r": 1}}], [{"role": None}]):
        assert space.contains(bad) is False, bad


CALL = {"id": "c", "type": "function", "function": {"name": "add", "arguments": "{}"}}

#: Messages that the action space and `step` used to disagree on, and the answer.
MESSAGES = [
    ({}, False),
    ({"role": "assistant", "content": None}, False),
    ({"content": None, "tool_calls": []}, False),
    ({"content": "x", "tool_calls": [5]}, False),
    ({"content": "", "tool_calls": [{"id": "c", "function": "add"}]}, False),
    ({"content": "", "tool_calls": [{"function": {"name": "add", "arguments": 5}}]}, False),
    ({"content": "", "tool_calls": [{"function": {"name": ["add"]}}]}, False),
    ({"content": None, "tool_calls": (CALL,)}, True),
]


@pytest.mark.parametrize(("message", "member"), MESSAGES)
def test_a_message_is_in_the_action_space_exactly_when_step_takes_it(message, member):
    space = ModelTurnSpace(10)
    assert space.contains(message) is member
    env = GymEnv(CalculatorEnv())
    env.reset(options={"index": 0})
    try:
        env.step(message)
        taken = True
    except (TypeError, ValueError):
        taken = False
    finally:
        env.close()
    assert taken is member


def test_message_text_follows_the_rule_of_text_actions():
    space = ModelTurnSpace(10)
    for text in ["a\x00b", "esc\x1b", "\ud800"]:
        assert not space.contains(text)
        assert not space.contains({"role": "assistant", "content": text}), repr(text)
    assert space.contains({"role": "assistant", "content": "tab\tnewline\n" * 20})


# ------------------------------------------------------- shared-memory batches


def shared_batch(space: UnicodeText | MessagesSpace, values: list[Any]) -> Any:
    """What AsyncVectorEnv(copy=False) hands out: a live view of `values` in shared memory."""
    memory = create_shared_memory(space, n=len(values))
    for index, value in enumerate(values):
        write_to_shared_memory(space, index, value, memory)
    return read_from_shared_memory(space, memory, n=len(values)), memory


def test_a_shared_batch_is_a_read_only_sequence_like_a_tuple():
    space = UnicodeText(16)
    batch, _ = shared_batch(space, ["a", "bb", "ccc"])
    assert isinstance(batch, Sequence)
    assert batch[:1] == ("a",) and type(batch[:1]) is tuple
    assert batch[::-1] == ("ccc", "bb", "a") and batch[5:] == ()
    assert batch[np.int64(1)] == "bb" and batch[-1] == "ccc"
    assert batch == ("a", "bb", "ccc") == batch and batch == ["a", "bb", "ccc"]
    assert ("a", "bb", "ccc") == batch
    assert batch != ("a", "bb") and batch != ("a", "bb", "x") and batch != "abbccc"
    assert list(reversed(batch)) == ["ccc", "bb", "a"]
    assert "bb" in batch and batch.index("ccc") == 2 and batch.count("a") == 1
    with pytest.raises(TypeError, match="unhashable"):
        hash(batch)
    with pytest.raises(TypeError, match="an int or a slice, not str"):
        batch["0"]
    with pytest.raises(IndexError, match="sub-environment 3 of 3"):
        batch[3]
    assert not hasattr(batch, "__setitem__")


def test_a_shared_batch_reads_the_memory_when_accessed():
    space = MessagesSpace(16)
    batch, memory = shared_batch(space, [[{"role": "user", "content": "hi"}]])
    assert batch[:] == ([{"role": "user", "content": "hi"}],)
    write_to_shared_memory(space, 0, [{"role": "tool", "content": "42"}], memory)
    assert batch[:] == ([{"role": "tool", "content": "42"}],)
    assert batch == [[{"role": "tool", "content": "42"}]]


def test_messages_space_checks_structure_and_text():
    space = MessagesSpace(20)
    assert space.contains([{"role": "tool", "content": "42", "tool_call_id": "c"}])
    assert space.contains([])
    assert not space.contains([{"role": "narrator", "content": "x"}])
    assert not space.contains([{"role": "user", "content": "\x1b"}])
    assert not space.contains({"role": "user", "content": "x"})


def test_flatten_round_trips_every_code_point():
    space = UnicodeText(16)
    text = "a é 中😀\n"
    flat = flatten(space, text)
    assert flat.shape == (16,) and flat.dtype == np.int32
    assert unflatten(space, flat) == text
    assert flatdim(space) == 16 and flatten_space(space).contains(flat)


def test_messages_observations_refuse_flattening_and_point_to_text_mode():
    """FlattenObservation on a messages env says why it fails and what to use instead."""
    space = MessagesSpace(16)
    member = [{"role": "user", "content": "hi"}]
    for attempt in (
        lambda: flatten_space(space),
        lambda: flatdim(space),
        lambda: flatten(space, member),
        lambda: unflatten(space, np.zeros(16, dtype=np.int32)),
    ):
        # Both the NotImplementedError of unknown spaces and flatdim's ValueError.
        for kind in (NotImplementedError, ValueError):
            with pytest.raises(kind, match=r'cannot be flattened.*observation_mode="text"'):
                attempt()
    env = GymEnv(GuessEnv(), observation_mode="messages")
    try:
        with pytest.raises(NotImplementedError, match='observation_mode="text"'):
            FlattenObservation(env)
    finally:
        env.close()


def test_control_characters_are_shown_not_dropped():
    assert clean_text("\x1b[31mred\x1b[0m\x00") == "␛[31mred␛[0m␀"
    assert clean_text("c1\x85 del\x7f") == "c1<U+0085> del␡"
    assert clean_text("plain\ttext\n") == "plain\ttext\n"


class EchoEnv(MultiTurnEnv):
    """Answers every turn with one message repeating the model's text."""

    def env_response(self, messages: Messages, state: State, **kwargs: Any) -> Any:
        return [{"role": "user", "content": f"you said: {last_content(messages)}"}], state


@pytest.mark.parametrize(
    ("said", "expected"),
    [
        ("plain", "you said: plain"),
        ("two\nlines\tand a tab", "you said: two\nlines\tand a tab"),
        ("esc\x1b[0m nul\x00", "you said: esc\u241b[0m nul\u2400"),
        ("x" * 150, None),  # cut to the space, with a note
    ],
)
def test_a_one_message_reply_is_cleaned_and_cut_like_any_observation(said, expected):
    env = GymEnv(EchoEnv(dataset=guess_rows(2), max_turns=3), max_text_length=100)
    env.reset(seed=0)
    observation, *_, info = env.step(said)
    assert observation == observation_text(info["messages"][-1:], 100)
    assert observation in env.observation_space
    if expected is None:
        assert len(observation) == 100 and "cut to 100 of 160" in observation
    else:
        assert observation == expected
    env.close()


def test_long_text_is_cut_with_a_note():
    cut = fit_text("x" * 1000, 200)
    assert len(cut) == 200 and cut.startswith("x" * 50) and "cut to 200 of 1000" in cut
    assert fit_text("short", 200) == "short"
    assert fit_text("y" * 50, 10) == "y" * 10


def test_observations_always_fit_the_space():
    env = GymEnv(GuessEnv(), max_text_length=100)
    observation, info = env.reset(seed=0)
    assert len(observation) == 100 and observation in env.observation_space
    assert "info['messages']" in observation
    assert info["messages"][0]["content"].startswith("Guess my number")
    env.environment.system_prompt = None
    observation, *_ = env.step("\x1b[1m 7")
    assert observation in env.observation_space
    env.close()
    with pytest.raises(ValueError, match="at least 1"):
        GymEnv(GuessEnv(), max_text_length=0)


def test_every_refused_character_is_unprintable():
    """`clean_text` skips its search for printable text: that must never skip one."""
    refused = [chr(c) for c in range(0x110000) if FORBIDDEN.match(chr(c))]
    assert len(refused) == 32 - 3 + 1 + 32 + 2048
    assert not any(c.isprintable() for c in refused)
    assert clean_text("tab\there\x1b[0m") == "tab\there\u241b[0m"


def test_a_lone_surrogate_outside_a_messages_content_is_cleaned_and_refused() -> None:
    """A tool call's id holding a lone surrogate comes back in the tool reply's
    `tool_call_id`: the messages-mode observation shows a stand-in there too (so it
    fits shared memory), and the space refuses a list that still holds one."""
    env = GymEnv(CalculatorEnv(), observation_mode="messages")
    env.reset(seed=0)
    call = {"id": "call\ud800", "type": "function"}
    call["function"] = {"name": "add", "arguments": '{"a": 1, "b": 2}'}
    observation, *_ = env.step({"role": "assistant", "content": None, "tool_calls": [call]})
    assert observation == [{"role": "tool", "content": "3", "tool_call_id": "call\ufffd"}]
    assert env.observation_space.contains(observation)
    space = env.observation_space
    memory = create_shared_memory(space, n=1)
    write_to_shared_memory(space, 0, observation, memory)
    assert read_from_shared_memory(space, memory, n=1)[0] == observation
    assert not space.contains([{"role": "tool", "content": "3", "tool_call_id": "\ud800"}])
    assert not space.contains([{"role": "user", "content": "hi", "name": "a\x85b"}])
    env.close()
