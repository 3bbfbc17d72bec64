"""The server's sampling limits, stop strings, tool choice and policy replies, as the
openai client meets them against vLLM and OpenAI.

Every test drives the project's own server over loopback HTTP with the real openai
client (sync or async). Where the answer differs between servers, the expectation
below is vLLM's, and the test says why.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import openai
import pytest
from tool_calls import ADD_TOOL as ADD

from vfgym.inference.server import ByteTokenizer, ModelServer, assistant_text, policies
from vfgym.inference.server.faults import parse_fault

TOK = ByteTokenizer()


HELLO = [{"role": "user", "content": "hello"}]


SUB = {"type": "function", "function": {"name": "sub", "parameters": {"type": "object"}}}


CALL = {"function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}


def test_a_reply_that_fills_max_tokens_exactly_ends_with_length() -> None:
    """vLLM stops at `max_tokens` before it can sample the end-of-turn token, so a
    5-token reply under max_tokens=5 finishes with "length" (and is masked as
    truncated by trainers), and needs max_tokens=6 to finish with "stop". The text
    and the token count are the reply's either way."""
    with ModelServer(policies.constant("hello")).running() as server:
        client = server.sync_client(max_retries=0)
        full = client.chat.completions.create(model="m", messages=HELLO, max_tokens=5)
        room = client.chat.completions.create(model="m", messages=HELLO, max_completion_tokens=6)
        text_full = client.completions.create(model="m", prompt="p", max_tokens=5)
        text_room = client.completions.create(model="m", prompt="p", max_tokens=6)
    assert (full.choices[0].message.content, full.choices[0].finish_reason) == ("hello", "length")
    assert full.usage.completion_tokens == 5
    assert (room.choices[0].message.content, room.choices[0].finish_reason) == ("hello", "stop")
    assert (text_full.choices[0].text, text_full.choices[0].finish_reason) == ("hello", "length")
    assert (text_room.choices[0].text, text_room.choices[0].finish_reason) == ("hello", "stop")


async def test_a_reply_that_fills_the_context_window_exactly_ends_with_length(
    model_server,
) -> None:
    """Without max_tokens a chat reply may fill the window; one that fills it to the
    last token had no room for its end token either."""
    prompt = len(TOK.apply_chat_template(HELLO, add_generation_prompt=True))
    server = await model_server(policies.constant("y" * 10), max_model_len=prompt + 10)
    async with server.client(max_retries=0) as client:
        response = await client.chat.completions.create(model="m", messages=HELLO, stream=True)
        chunks = [chunk async for chunk in response]
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "y" * 10
    assert chunks[-1].choices[0].finish_reason == "length"


@pytest.mark.parametrize(
    ("max_tokens", "expected"),
    [
        (4, ("abcX", "length")),
        (5, ("abcXY", "length")),
        (6, ("abc", "stop")),
        (None, ("abc", "stop")),
    ],
)
async def test_a_stop_string_counts_only_once_it_is_generated_within_max_tokens(
    model_server, max_tokens: int | None, expected: tuple[str, str]
) -> None:
    """vLLM notices a stop string once its last token is sampled: when `max_tokens`
    ends before that, the reply is cut by length, partial stop string included."""
    server = await model_server(policies.constant("abcXYZdef"))
    async with server.client(max_retries=0) as client:
        chat = await client.chat.completions.create(
            model="m", messages=HELLO, stop="XYZ", max_tokens=max_tokens
        )
        text = await client.completions.create(
            model="m", prompt="p", stop=["nope", "XYZ"], max_tokens=max_tokens
        )
    assert (chat.choices[0].message.content, chat.choices[0].finish_reason) == expected
    assert (text.choices[0].text, text.choices[0].finish_reason) == expected


async def test_a_stop_string_inside_a_tool_call_ends_the_turn_as_text(model_server) -> None:
    """vLLM matches stop strings against everything the model writes, tool-call markup
    included; a call cut short by one no longer parses, so it comes back as text."""
    server = await model_server(policies.constant({"content": "sum: ", "tool_calls": [CALL]}))
    rendered = assistant_text({"content": "sum: ", "tool_calls": [CALL]})
    cut = rendered[: rendered.index('"b"')]
    async with server.client(max_retries=0) as client:
        response = await client.chat.completions.create(
            model="m",
            messages=HELLO,
            tools=[ADD],
            stop=['"b"'],
            extra_body={"return_token_ids": True},
        )
    [choice] = response.choices
    assert choice.message.tool_calls is None
    assert (choice.message.content, choice.finish_reason) == (cut, "stop")
    assert choice.token_ids == TOK.encode(cut)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("tool_choice", "finish"),
    [
        ("auto", "tool_calls"),
        ("required", "tool_calls"),
        ({"type": "function", "function": {"name": "add"}}, "stop"),
    ],
    ids=["auto", "required", "named"],
)
async def test_the_finish_reason_of_a_tool_call_follows_tool_choice_as_on_openai(
    model_server, tool_choice: Any, finish: str, stream: bool
) -> None:
    """OpenAI answers a forced named function with finish_reason "stop" (and vLLM
    does the same); "auto" and "required" give "tool_calls"."""
    server = await model_server(policies.constant({"content": None, "tool_calls": [CALL]}))
    async with server.client(max_retries=0) as client:
        response = await client.chat.completions.create(
            model="m", messages=HELLO, tools=[ADD, SUB], tool_choice=tool_choice, stream=stream
        )
        if stream:
            chunks = [chunk async for chunk in response]
            reason = chunks[-1].choices[0].finish_reason
            names = [
                call.function.name
                for chunk in chunks
                for call in chunk.choices[0].delta.tool_calls or []
                if call.function.name
            ]
        else:
            reason = response.choices[0].finish_reason
            names = [call.function.name for call in response.choices[0].message.tool_calls]
    assert (reason, names) == (finish, ["add"])


def test_suffix_on_text_completions_is_a_400() -> None:
    """vLLM answers `suffix` with a 400 ("suffix is not currently supported"); ignoring
    it would hand a fill-in-the-middle client a plain continuation without a word."""
    with ModelServer(policies.constant("hello")).running() as server:
        client = server.sync_client(max_retries=0)
        with pytest.raises(openai.BadRequestError) as caught:
            client.completions.create(model="m", prompt="def f(", suffix="\n    return x")
    assert caught.value.param == "suffix"
    assert "suffix" in caught.value.message
    assert "prompt" in caught.value.message  # says what to do instead


def _exhausted_sync() -> Any:
    replies = iter(["only one"])
    return lambda messages: next(replies)


def _exhausted_async() -> Any:
    replies = iter(["only one"])

    async def policy(messages: Any) -> str:
        return next(replies)

    return policy


@pytest.mark.parametrize("make", [_exhausted_sync, _exhausted_async], ids=["sync", "async"])
async def test_a_policy_whose_next_runs_out_gets_a_500_naming_stop_iteration(
    model_server, make: Any
) -> None:
    """`next(replies)` on a used-up script is the usual way a scripted policy runs
    out; the 500 must say StopIteration and how to avoid it, not "coroutine raised
    StopIteration" from inside the server."""
    server = await model_server(make())
    async with server.client(max_retries=0) as client:
        first = await client.chat.completions.create(model="m", messages=HELLO)
        with pytest.raises(openai.InternalServerError) as caught:
            await client.chat.completions.create(model="m", messages=HELLO)
    assert first.choices[0].message.content == "only one"
    assert "raised StopIteration" in caught.value.message
    assert "next()" in caught.value.message
    assert "coroutine raised" not in caught.value.message


async def test_a_policy_raising_cancelled_error_is_a_500_called_once(model_server) -> None:
    """A policy that lets a CancelledError of its own escape (from a task it awaited)
    used to drop the connection, which every client retries: the broken policy ran
    once per retry and the client saw a connection error. It is the policy's error."""
    calls: list[int] = []

    async def policy(messages: Any) -> str:
        calls.append(1)
        inner = asyncio.get_running_loop().create_future()
        inner.cancel()
        return await inner

    server = await model_server(policy)
    async with server.client(max_retries=2) as client:
        with pytest.raises(openai.InternalServerError) as caught:
            await client.chat.completions.create(model="m", messages=HELLO)
        after = await client.models.list()
    assert calls == [1]
    assert "CancelledError" in caught.value.message
    assert [m.id for m in after.data]  # the server itself is still up


def test_tool_call_arguments_of_none_are_an_empty_json_object() -> None:
    """OpenAI and vLLM always send arguments as a JSON object string; a policy that
    leaves them None must not hand the client the string "null"."""
    reply = {"tool_calls": [{"function": {"name": "add", "arguments": None}}]}
    with ModelServer(policies.constant(reply)).running() as server:
        client = server.sync_client(max_retries=0)
        response = client.chat.completions.create(model="m", messages=HELLO, tools=[ADD])
    assert response.choices[0].message.tool_calls[0].function.arguments == "{}"


@pytest.mark.parametrize("call_id", [5, ["x"]])
async def test_a_tool_call_id_that_is_not_a_string_is_a_500_naming_it(
    model_server, call_id: Any
) -> None:
    """A tool call id is a string on the wire; an int one reached the client as is."""
    reply = {"tool_calls": [{"id": call_id, "function": {"name": "add", "arguments": "{}"}}]}
    server = await model_server(policies.constant(reply))
    async with server.client(max_retries=0) as client:
        with pytest.raises(openai.InternalServerError) as caught:
            await client.chat.completions.create(model="m", messages=HELLO, tools=[ADD])
    assert "tool_calls[0]" in caught.value.message and "id" in caught.value.message


def test_by_turn_refuses_a_single_string_for_its_script() -> None:
    """`by_turn("hi")` would be a script of the replies "h" and "i"."""
    with pytest.raises(TypeError, match="list of replies"):
        policies.by_turn("hi")


@pytest.mark.parametrize("seconds", [math.inf, math.nan, "inf"])
@pytest.mark.parametrize("kind", ["slow", "429"])
def test_a_fault_whose_seconds_are_not_finite_is_refused(kind: str, seconds: Any) -> None:
    """A 429 with infinite Retry-After used to be answered as a 500 (OverflowError in
    the server), and a "slow" one hung the request for ever."""
    with pytest.raises(ValueError, match="finite"):
        parse_fault((kind, seconds))
    with ModelServer(policies.echo).running() as server:
        with pytest.raises(ValueError, match="finite"):
            server.inject_faults((kind, seconds))
        assert server.pending_faults == 0


@pytest.mark.parametrize("seed", ["7", 1.5, True, 2**64])
def test_a_seed_that_is_no_64_bit_integer_is_a_400(seed: Any) -> None:
    """vLLM and OpenAI refuse such a seed; accepted, a client's mistake would go
    unnoticed here and fail against the real server."""
    with ModelServer(policies.constant("hello")).running() as server:
        client = server.sync_client(max_retries=0)
        for create, kwargs in (
            (client.chat.completions.create, {"messages": HELLO}),
            (client.completions.create, {"prompt": "p"}),
        ):
            with pytest.raises(openai.BadRequestError, match="'seed' must be"):
                create(model="m", seed=seed, **kwargs)
        ok = client.chat.completions.create(model="m", messages=HELLO, seed=-(2**63))
    assert ok.choices[0].message.content == "hello"


LONG = "the answer is forty two"  # 23 tokens


GO = [{"role": "user", "content": "go"}]


async def test_the_server_answers_length_when_max_tokens_cuts_a_chat_reply(model_server) -> None:
    server = await model_server(policies.constant(LONG))
    client = server.client()
    cut = await client.chat.completions.create(model="m", messages=GO, max_tokens=5)
    whole = await client.chat.completions.create(model="m", messages=GO, max_tokens=100)
    assert (cut.choices[0].finish_reason, cut.choices[0].message.content) == ("length", LONG[:5])
    assert (whole.choices[0].finish_reason, whole.choices[0].message.content) == ("stop", LONG)


async def test_the_server_answers_length_when_max_tokens_cuts_a_text_reply(model_server) -> None:
    server = await model_server(policies.constant(LONG))
    cut = await server.client().completions.create(model="m", prompt="go", max_tokens=5)
    assert (cut.choices[0].finish_reason, cut.choices[0].text) == ("length", LONG[:5])
