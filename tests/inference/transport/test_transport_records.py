"""ResponseRecord: a server's answer read by attribute, as the openai models are read."""

from __future__ import annotations

import copy
import json
import pickle

import openai

from vfgym.inference.messages import assistant_message, finish_reason
from vfgym.inference.overflow import cut_by_length
from vfgym.inference.transport import ResponseRecord
from vfgym.training.response_ids import response_tokens

TOOL_ANSWER = {
    "id": "chatcmpl-7",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": '{"key": "a"}'},
                    }
                ],
            },
            "finish_reason": "length",
            "logprobs": {
                "content": [
                    {"token": "token_id:11", "logprob": -0.5, "bytes": None, "top_logprobs": []},
                    {"token": "token_id:12", "logprob": -0.25, "bytes": None, "top_logprobs": []},
                ]
            },
            "token_ids": [11, 12],
        }
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    "prompt_token_ids": [1, 2, 3, 4, 5],
}


def test_fields_read_as_on_the_sdks_models() -> None:
    record = ResponseRecord(copy.deepcopy(TOOL_ANSWER))
    sdk = openai.types.chat.ChatCompletion.model_validate(copy.deepcopy(TOOL_ANSWER))
    for read in (
        lambda r: r.choices[0].message.content,
        lambda r: r.choices[0].message.tool_calls[0].function.arguments,
        lambda r: r.choices[0].finish_reason,
        lambda r: r.choices[0].logprobs.content[1].logprob,
        lambda r: r.usage.total_tokens,
        lambda r: r.choices[0].message.refusal,  # not sent: None on both
    ):
        assert read(record) == read(sdk)
    assert record.prompt_token_ids == [1, 2, 3, 4, 5]
    assert record.choices[0].token_ids == [11, 12]


def test_the_readers_of_state_responses_accept_a_record() -> None:
    record = ResponseRecord(copy.deepcopy(TOOL_ANSWER))
    assert assistant_message(record) == {  # type: ignore[arg-type]
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"key": "a"}'},
            }
        ],
    }
    assert finish_reason(record) == "length"
    assert cut_by_length(record)
    assert response_tokens(record) == ([11, 12], [-0.5, -0.25])


def test_a_part_is_wrapped_once_and_kept() -> None:
    record = ResponseRecord(copy.deepcopy(TOOL_ANSWER))
    assert record.choices[0] is record.choices[0]
    assert record.choices[0].message is record.choices[0].message
    assert isinstance(record["choices"][0], ResponseRecord)  # kept in its place


def test_model_dump_is_a_fresh_plain_copy() -> None:
    record = ResponseRecord(copy.deepcopy(TOOL_ANSWER))
    record.choices[0].message.content  # noqa: B018  (wraps the parts)
    dumped = record.model_dump()
    assert dumped == TOOL_ANSWER
    assert type(dumped["choices"][0]) is dict
    dumped["choices"][0]["message"]["content"] = "changed"
    assert record.choices[0].message.content is None
    slim = record.model_dump(exclude_none=True)
    assert "content" not in slim["choices"][0]["message"]
    assert "bytes" not in slim["choices"][0]["logprobs"]["content"][0]


def test_a_record_is_json_pickle_and_copy_as_it_is() -> None:
    record = ResponseRecord(copy.deepcopy(TOOL_ANSWER))
    record.choices[0].message  # noqa: B018
    assert json.loads(json.dumps(record)) == TOOL_ANSWER
    assert json.loads(record.model_dump_json()) == TOOL_ANSWER
    again = pickle.loads(pickle.dumps(record))
    assert again == record
    assert again.choices[0].message.tool_calls[0].id == "call_1"
    deep = copy.deepcopy(record)
    assert deep.usage.prompt_tokens == 5 and deep is not record


def test_a_field_can_be_set_and_private_names_are_no_fields() -> None:
    record = ResponseRecord(copy.deepcopy(TOOL_ANSWER))
    record.choices[0].message.content = "rewritten"
    assert record.model_dump()["choices"][0]["message"]["content"] == "rewritten"
    assert record.model_extra == {}
    for name in ("_data", "__await__"):
        try:
            getattr(record, name)
        except AttributeError:
            pass
        else:
            raise AssertionError(f"{name} read as a field")
