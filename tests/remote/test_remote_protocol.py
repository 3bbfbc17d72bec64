"""The env server's frames: what a client frame may hold, and what the server sends back."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from vfgym.remote.client import http_base
from vfgym.remote.protocol import (
    ERROR_CODES,
    FrameError,
    action_frame,
    action_of,
    encode,
    observation_data,
    parse_client_frame,
    reset_arguments,
)


def test_error_codes_are_openenvs(openenv_client: Any) -> None:
    from openenv.core.env_server.types import WSErrorCode

    assert set(ERROR_CODES) <= {code.value for code in WSErrorCode}


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("", "INVALID_JSON"),
        ("{'single': 'quotes'}", "INVALID_JSON"),
        ("[]", "VALIDATION_ERROR"),
        ('{"type": "Reset"}', "UNKNOWN_TYPE"),
        ('{"data": {}}', "UNKNOWN_TYPE"),
        ('{"type": "step", "data": [1]}', "VALIDATION_ERROR"),
    ],
)
def test_bad_client_frames_get_openenvs_codes(text: str, code: str) -> None:
    with pytest.raises(FrameError) as raised:
        parse_client_frame(text)
    assert raised.value.code == code


def test_a_frame_without_data_has_empty_data() -> None:
    assert parse_client_frame('{"type": "state"}') == ("state", {})
    assert parse_client_frame('{"type": "reset", "data": null}') == ("reset", {})


def test_reset_arguments_are_checked() -> None:
    assert reset_arguments({"seed": 3, "options": {"index": 2}, "episode_id": "e"}) == (
        3,
        {"index": 2},
    )
    for bad in ({"seed": -1}, {"seed": 1.5}, {"seed": True}, {"options": [1]}):
        with pytest.raises(FrameError) as raised:
            reset_arguments(bad)
        assert raised.value.code == "VALIDATION_ERROR"


def test_actions_round_trip_between_gym_and_the_wire() -> None:
    assert action_of(action_frame("<move>crane</move>")) == "<move>crane</move>"
    call = {"id": "c1", "type": "function", "function": {"name": "python", "arguments": "{}"}}
    message = {"role": "assistant", "content": "", "tool_calls": [call]}
    assert action_frame(message) == {"content": "", "tool_calls": [call]}
    assert action_of(action_frame(message)) == message
    with pytest.raises(FrameError, match="'content'"):
        action_of({})
    with pytest.raises(TypeError, match="model's text"):
        action_frame(42)


def test_observation_frames_keep_terminated_and_truncated_apart() -> None:
    info = {"turn": 4, "stop_reason": "max_turns", "episode_reward": 0.0, "metrics": {}, "x": 1}
    data = observation_data("board", 0.0, False, True, info)
    assert data == {
        "observation": {"text": "board"},
        "reward": 0.0,
        "done": True,
        "metadata": {
            "terminated": False,
            "truncated": True,
            "turn": 4,
            "stop_reason": "max_turns",
            "episode_reward": 0.0,
            "metrics": {},
        },
    }


def test_frames_are_strict_json() -> None:
    text = encode({"type": "observation", "data": {"reward": math.nan, "m": [math.inf]}})
    assert json.loads(text) == {"type": "observation", "data": {"reward": None, "m": [None]}}


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("http://h:1", "http://h:1"),
        ("http://h:1/", "http://h:1"),
        ("ws://h:1/ws", "http://h:1"),
        ("wss://h/prefix/ws", "https://h/prefix"),
    ],
)
def test_server_urls_are_read_in_every_form(url: str, base: str) -> None:
    assert http_base(url) == base


def test_a_url_without_scheme_says_what_one_looks_like() -> None:
    with pytest.raises(ValueError, match="http://HOST:PORT"):
        http_base("localhost:8765")
