"""Input rows that bring their own `prompt` are checked before any rollout starts, as
dataset rows are when an environment is built: a bad message is refused naming the input
row and saying what to give instead, not sent to the model server on every rollout.

Every test runs a real environment against the project's own model server on loopback.
"""

from __future__ import annotations

from typing import Any

import datasets
import pytest
from endless_env import GO

from vfgym.envs import SingleTurnEnv
from vfgym.types import GenerateInputs, Messages


def answer_ok(messages: Messages) -> str:
    return "ok"


def env() -> SingleTurnEnv:
    return SingleTurnEnv(dataset=[{"question": "q"}])


#: A past turn that called a tool, and the tool's reply, as a valid prompt holds them.
CALL = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
HISTORY = [
    {"role": "user", "content": "add 1"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "content": "1", "tool_call_id": "c1"},
]
DICT_ARGS = {**CALL, "function": {"name": "add", "arguments": {"a": 1}}}

BAD_PROMPTS = {
    "unknown role": (
        [{"role": "robot", "content": "hi"}],
        ValueError,
        r"input row 1: 'prompt' item 0 has role 'robot'; a chat message's role is one of",
    ),
    "no content": (
        [{"role": "user"}],
        ValueError,
        r"input row 1: 'prompt' item 0: the user message has no 'content'; give its text",
    ),
    "tool without id": (
        [*HISTORY[:2], {"role": "tool", "content": "1"}],
        ValueError,
        r"input row 1: 'prompt' item 2: the tool message has no 'tool_call_id'; .*set its "
        r"'tool_call_id' to that call's 'id'",
    ),
    "dict arguments": (
        [HISTORY[0], {"role": "assistant", "content": None, "tool_calls": [DICT_ARGS]}],
        TypeError,
        r"input row 1: 'prompt' item 1: tool call 0's arguments are a dict; give them as "
        r"JSON text.*json\.dumps\(arguments\)",
    ),
    "not a message": (
        [GO[0], "hello"],
        TypeError,
        r"input row 1: 'prompt' item 1 is str, expected a chat message dict such as",
    ),
    "one message, not a list": (
        GO[0],
        TypeError,
        r"input row 1: 'prompt' is one message dict; wrap it in a list",
    ),
}


@pytest.mark.parametrize("case", list(BAD_PROMPTS))
async def test_a_bad_message_in_a_given_prompt_is_refused_naming_its_row(
    model_server, case: str
) -> None:
    prompt, error, says = BAD_PROMPTS[case]
    server = await model_server(answer_ok)
    rows: list[dict[str, Any]] = [{"prompt": GO}, {"prompt": prompt}]
    with pytest.raises(error, match=says):
        await env().generate(rows, server.client(), "m")
    assert server.requests == []  # refused before any rollout started


async def test_a_bad_prompt_in_generate_inputs_is_refused_naming_its_row(model_server) -> None:
    server = await model_server(answer_ok)
    inputs = GenerateInputs(prompt=[GO, GO, [{"role": "robot", "content": "hi"}]])
    with pytest.raises(ValueError, match=r"input row 2: 'prompt' item 0 has role 'robot'"):
        await env().generate(inputs, server.client(), "m")
    assert server.requests == []


async def test_valid_given_prompts_still_run(model_server) -> None:
    """Tool history, content parts and text prompts are all fine as given."""
    server = await model_server(answer_ok)
    parts = [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
    rows = [{"prompt": GO}, {"prompt": HISTORY}, {"prompt": parts}]
    out = await env().generate(rows, server.client(), "m")
    assert out.prompt == [GO, HISTORY, parts]
    assert [c[-1]["content"] for c in out.completion] == ["ok"] * 3
    sent = sorted([m["role"] for m in r["messages"]] for r in server.requests)
    assert sent == [["user"], ["user"], ["user", "assistant", "tool"]]


async def test_prompts_from_a_hugging_face_dataset_are_accepted(model_server) -> None:
    """Arrow gives every message every key any message has, as None: that is padding,
    not a bad message."""
    server = await model_server(answer_ok)
    inputs = datasets.Dataset.from_list([{"prompt": GO}, {"prompt": HISTORY}])
    out = await env().generate(inputs, server.client(), "m")
    assert [c[-1]["content"] for c in out.completion] == ["ok", "ok"]
    assert not any(s.get("error") for s in out.state)


async def test_raw_question_rows_are_still_formatted_by_the_env(model_server) -> None:
    server = await model_server(answer_ok)
    system = SingleTurnEnv(dataset=[{"question": "q"}], system_prompt="Be brief.")
    out = await system.generate([{"question": "go"}, {"question": "stop"}], server.client(), "m")
    assert out.prompt == [
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "go"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "stop"}],
    ]
    assert [c[-1]["content"] for c in out.completion] == ["ok", "ok"]


async def test_a_completion_env_still_takes_text_prompts(model_server) -> None:
    server = await model_server(answer_ok)
    text_env = SingleTurnEnv(dataset=[{"prompt": "q"}], message_type="completion")
    out = await text_env.generate([{"prompt": "Say ok:"}], server.client(), "m")
    assert out.prompt == ["Say ok:"]
    assert not out.state[0].get("error")


async def test_a_dataset_mixing_prompt_and_question_rows_formats_the_questions(
    model_server,
) -> None:
    """Arrow gives the question row a None prompt (and the prompt row a None question):
    the question row must still be formatted, not sent with no prompt."""
    server = await model_server(answer_ok)
    rows = [{"prompt": GO, "question": None}, {"prompt": None, "question": "stop"}]
    inputs = datasets.Dataset.from_list(rows)
    out = await env().generate(inputs, server.client(), "m")
    assert out.prompt == [GO, [{"role": "user", "content": "stop"}]]
    assert not any(s.get("error") for s in out.state)


async def test_a_completion_env_refuses_chat_messages_naming_the_row(model_server) -> None:
    server = await model_server(answer_ok)
    text_env = SingleTurnEnv(dataset=[{"prompt": "q"}], message_type="completion")
    with pytest.raises(ValueError, match=r"input row 1: message_type='completion' needs a text"):
        await text_env.generate([{"prompt": "a"}, {"prompt": GO}], server.client(), "m")
    assert server.requests == []
