"""vfgym.inference.messages: a response's assistant turn as a plain, re-sendable dict, and
the message helpers the engine and the client share."""

from __future__ import annotations

from openai.types.chat import ChatCompletion

from vfgym.inference.messages import assistant_message, last_content


def _response(tool_calls: list[dict[str, object]]) -> ChatCompletion:
    return ChatCompletion.model_validate(
        {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {"role": "assistant", "content": None, "tool_calls": tool_calls},
                }
            ],
        }
    )


def test_a_function_tool_call_is_kept_in_wire_format() -> None:
    call = {"id": "a", "type": "function", "function": {"name": "add", "arguments": '{"x": 1}'}}
    message = assistant_message(_response([call]))
    assert message == {"role": "assistant", "content": "", "tool_calls": [call]}


def test_a_custom_tool_call_is_kept_as_the_server_sent_it() -> None:
    function = {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    custom = {"id": "b", "type": "custom", "custom": {"name": "grep", "input": "x"}}
    message = assistant_message(_response([function, custom]))
    assert message["tool_calls"] == [function, custom]


def test_last_content_of_a_message_with_content_parts_is_its_text() -> None:
    """`last_content` is typed `str`, and games call `.strip()` on it; content parts came
    back as the list itself."""
    parts = [
        {"type": "text", "text": "guess "},
        {"type": "image_url", "image_url": {"url": "data:x"}},
        {"type": "text", "text": "CRANE"},
    ]
    assert last_content([{"role": "user", "content": parts}]) == "guess CRANE"
