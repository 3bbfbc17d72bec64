"""A forced tool_choice and `logprobs=0` on /v1/completions, as vLLM answers them.

Every test drives the project's own server over loopback HTTP with the real openai
client. vLLM constrains the model's output under tool_choice "required" or a named
function, so a call of the right function always comes back; a scripted policy
cannot be constrained, so a reply that breaks the promise is an error here rather
than text a client would never get from vLLM.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest
from tool_calls import ADD_TOOL as ADD

from vfgym.inference.server import ByteTokenizer, policies

TOK = ByteTokenizer()
HELLO = [{"role": "user", "content": "hello"}]
SUB = {"type": "function", "function": {"name": "sub", "parameters": {"type": "object"}}}
ADD_CALL = {"function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}
SUB_CALL = {"function": {"name": "sub", "arguments": '{"a": 2, "b": 3}'}}
MUL_CALL = {"function": {"name": "mul", "arguments": '{"a": 2, "b": 3}'}}
NAMED_ADD = {"type": "function", "function": {"name": "add"}}


async def _chat(server: Any, tool_choice: Any, *, stream: bool, n: int = 1) -> Any:
    """One chat request with tools add and sub; a stream is read to its end."""
    async with server.client() as client:
        response = await client.chat.completions.create(
            model="m", messages=HELLO, tools=[ADD, SUB], tool_choice=tool_choice, stream=stream, n=n
        )
        if stream:
            return [chunk async for chunk in response]
        return response


# -- a forced tool_choice whose policy does not call the tool ---------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize(
    ("tool_choice", "reply", "says"),
    [
        ("required", "just text", ["'required'", "'just text'", "no tool call"]),
        (NAMED_ADD, "just text", ["'add'", "'just text'", "no tool call"]),
        (NAMED_ADD, {"content": None, "tool_calls": [SUB_CALL]}, ["'add'", "'sub'"]),
        ("required", {"content": None, "tool_calls": [MUL_CALL]}, ["'mul'", "['add', 'sub']"]),
    ],
    ids=["required-text", "named-text", "named-other-function", "required-unknown-function"],
)
async def test_a_forced_tool_choice_the_policy_breaks_is_a_500_not_text(
    model_server, tool_choice: Any, reply: Any, says: list[str], stream: bool
) -> None:
    """vLLM's guided decoding makes the output a call (of the named function, or of
    one of the tools for "required"); a policy reply that is not one must fail loudly
    and once (no retry calls the same policy again), before any stream starts."""
    server = await model_server(policies.constant(reply))
    with pytest.raises(openai.InternalServerError) as caught:
        await _chat(server, tool_choice, stream=stream)
    message = caught.value.message
    assert "tool_choice" in message
    for part in says:
        assert part in message
    assert len(server.requests) == 1


async def test_one_choice_of_n_breaking_a_required_tool_choice_fails_the_request(
    model_server,
) -> None:
    """Each of `n` choices is sampled under the same constraint on vLLM."""
    replies = iter([{"content": None, "tool_calls": [ADD_CALL]}, "no call here"])
    server = await model_server(lambda messages: next(replies))
    with pytest.raises(openai.InternalServerError) as caught:
        await _chat(server, "required", stream=False, n=2)
    assert "'no call here'" in caught.value.message


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize(
    ("tool_choice", "reply", "finish"),
    [
        ("required", {"content": None, "tool_calls": [SUB_CALL]}, "tool_calls"),
        ("required", {"content": None, "tool_calls": [ADD_CALL, SUB_CALL]}, "tool_calls"),
        (NAMED_ADD, {"content": None, "tool_calls": [ADD_CALL]}, "stop"),
    ],
    ids=["required-one", "required-two", "named"],
)
async def test_a_forced_tool_choice_the_policy_keeps_passes_its_calls(
    model_server, tool_choice: Any, reply: dict[str, Any], finish: str, stream: bool
) -> None:
    server = await model_server(policies.constant(reply))
    answer = await _chat(server, tool_choice, stream=stream)
    if stream:
        reason = answer[-1].choices[0].finish_reason
        names = [
            call.function.name
            for chunk in answer
            for call in chunk.choices[0].delta.tool_calls or []
            if call.function.name
        ]
    else:
        reason = answer.choices[0].finish_reason
        names = [call.function.name for call in answer.choices[0].message.tool_calls]
    assert (reason, names) == (finish, [c["function"]["name"] for c in reply["tool_calls"]])


async def test_auto_tool_choice_still_lets_a_policy_answer_in_text(model_server) -> None:
    server = await model_server(policies.constant("just text"))
    response = await _chat(server, "auto", stream=False)
    assert response.choices[0].message.content == "just text"
    assert response.choices[0].finish_reason == "stop"


# -- /v1/completions with logprobs=0 ----------------------------------------------------------


async def test_text_completion_logprobs_zero_lists_the_sampled_token_per_position(
    model_server,
) -> None:
    """vLLM (and OpenAI's legacy API) answer `logprobs=0` with every parallel list
    filled: `top_logprobs` holds one dict per token with the sampled token and its
    logprob, as for any count (the sampled token is always included)."""
    server = await model_server(policies.constant("hi there"))
    async with server.client() as client:
        response = await client.completions.create(model="m", prompt="p", max_tokens=50, logprobs=0)
    logprobs = response.choices[0].logprobs
    assert "".join(logprobs.tokens) == "hi there"
    assert len(logprobs.token_logprobs) == len(logprobs.text_offset) == len(logprobs.tokens)
    assert logprobs.top_logprobs == [
        {token: lp} for token, lp in zip(logprobs.tokens, logprobs.token_logprobs, strict=True)
    ]


async def test_streamed_text_completion_logprobs_zero_matches_the_whole_answer(
    model_server,
) -> None:
    server = await model_server(policies.constant("hi there"))
    async with server.client() as client:
        whole = await client.completions.create(model="m", prompt="p", max_tokens=50, logprobs=0)
        stream = await client.completions.create(
            model="m", prompt="p", max_tokens=50, logprobs=0, stream=True
        )
        chunks = [chunk async for chunk in stream]
    streamed = [
        top for c in chunks if c.choices[0].logprobs for top in c.choices[0].logprobs.top_logprobs
    ]
    assert streamed == whole.choices[0].logprobs.top_logprobs
    assert all(len(top) == 1 for top in streamed) and streamed


async def test_chat_top_logprobs_zero_stays_empty_as_on_openai(model_server) -> None:
    """The chat API's `top_logprobs=0` is an empty list per token on OpenAI and vLLM;
    only the legacy completions shape includes the sampled token."""
    server = await model_server(policies.constant("hi"))
    async with server.client() as client:
        response = await client.chat.completions.create(
            model="m", messages=HELLO, logprobs=True, top_logprobs=0
        )
    entries = response.choices[0].logprobs.content
    assert [e.token for e in entries] == ["h", "i"]
    assert all(e.top_logprobs == [] for e in entries)
