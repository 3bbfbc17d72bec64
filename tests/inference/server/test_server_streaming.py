"""Streaming (`stream=True`) as outside tools meet it: the real openai client over loopback.

The server computes the whole answer, then sends it as server-sent events cut per
token, as OpenAI and vLLM stream. A client that joins the chunks must get what
the same request gets without streaming (text, tool calls, logprobs, token ids,
usage), and a request the server refuses must be refused with its HTTP status
before any event, so the openai client raises at `create`, not mid-iteration.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import aiohttp
import openai
import pytest
from scripted_models import echo
from tool_calls import ADD_TOOL, CALL

from vfgym.inference.server import policies
from vfgym.inference.server.tokenizer import ByteTokenizer

HELLO = [{"role": "user", "content": "héllo, 日本"}]
NAMED_CALL = {"id": "call_named", "type": "function", **CALL}
UNNAMED_CALL = {"function": {"name": "add", "arguments": {"a": 1, "b": "ü"}}}


async def _chunks(stream: Any) -> list[Any]:
    """Every chunk of an async openai stream."""
    return [chunk async for chunk in stream]


TOK = ByteTokenizer()


def _choice_steps(chunks: list[Any], index: int) -> list[Any]:
    """The `choices` entries of choice `index`, in the order they came."""
    return [c for chunk in chunks for c in chunk.choices if c.index == index]


def _joined_content(chunks: list[Any], index: int = 0) -> str:
    return "".join(step.delta.content or "" for step in _choice_steps(chunks, index))


def _joined_tool_calls(chunks: list[Any], index: int = 0) -> list[dict[str, Any]]:
    """Tool calls rebuilt from their deltas as a client does: keyed by the call's
    `index`, the first delta naming it, the arguments joined from the rest."""
    calls: dict[int, dict[str, Any]] = {}
    for step in _choice_steps(chunks, index):
        for delta in step.delta.tool_calls or []:
            call = calls.setdefault(delta.index, {"arguments": ""})
            if delta.id is not None:
                call.update(id=delta.id, type=delta.type, name=delta.function.name)
            call["arguments"] += delta.function.arguments or ""
    return [calls[i] for i in sorted(calls)]


def _calls_of(message: Any) -> list[dict[str, Any]]:
    return [
        {
            "id": call.id,
            "type": call.type,
            "name": call.function.name,
            "arguments": call.function.arguments,
        }
        for call in message.tool_calls or []
    ]


def _extra(step: Any, name: str) -> Any:
    """A vLLM extension field (token_ids, prompt_token_ids) of a chunk or choice."""
    return (step.model_extra or {}).get(name)


# -- text ------------------------------------------------------------------------------------


async def test_streamed_chat_joins_to_the_non_streamed_reply(model_server) -> None:
    server = await model_server(echo)
    async with server.client() as client:
        whole = await client.chat.completions.create(model="m", messages=HELLO)
        stream = await client.chat.completions.create(model="m", messages=HELLO, stream=True)
        assert stream.response.headers["content-type"].startswith("text/event-stream")
        chunks = await _chunks(stream)

    expected = whole.choices[0].message.content
    assert _joined_content(chunks) == expected
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("chatcmpl-")
    assert all(c.model == "m" and c.usage is None for c in chunks)

    first, *middle, last = _choice_steps(chunks, 0)
    assert (first.delta.role, first.delta.content) == ("assistant", "")
    assert len(middle) > 3, "the reply must come in several deltas, per token"
    assert all("\ufffd" not in step.delta.content for step in middle)  # no half characters
    assert last.finish_reason == "stop"
    assert last.delta.content is None and last.delta.role is None
    assert all(step.finish_reason is None for step in [first, *middle])


async def test_a_sync_client_streams_too(model_server) -> None:
    """The sync client blocks its thread, so it runs in another while the loop serves."""
    server = await model_server(echo)

    def call() -> list[Any]:
        with server.sync_client() as client:
            stream = client.chat.completions.create(model="m", messages=HELLO, stream=True)
            return list(stream)

    chunks = await asyncio.to_thread(call)
    assert _joined_content(chunks) == echo(HELLO)
    assert _choice_steps(chunks, 0)[-1].finish_reason == "stop"


async def test_a_length_cut_inside_a_character_streams_the_non_streamed_text(model_server) -> None:
    """Cut by max_tokens mid-character, the text ends in U+FFFD; the stream holds
    nothing back at the end, so the joined deltas still equal the whole answer."""
    server = await model_server(policies.constant("日本語"))
    options: dict[str, Any] = {"model": "m", "messages": HELLO, "max_tokens": 4}
    async with server.client() as client:
        whole = await client.chat.completions.create(**options)
        chunks = await _chunks(await client.chat.completions.create(**options, stream=True))
    assert whole.choices[0].message.content == "日\ufffd"
    assert _joined_content(chunks) == "日\ufffd"
    assert _choice_steps(chunks, 0)[-1].finish_reason == "length"


# -- tool calls ------------------------------------------------------------------------------


async def test_streamed_tool_calls_reassemble_to_the_non_streamed_calls(model_server) -> None:
    reply = {"content": "adding: ", "tool_calls": [NAMED_CALL, UNNAMED_CALL]}
    server = await model_server(policies.constant(reply))
    options: dict[str, Any] = {"model": "m", "messages": HELLO, "tools": [ADD_TOOL]}
    async with server.client() as client:
        whole = await client.chat.completions.create(**options)
        chunks = await _chunks(await client.chat.completions.create(**options, stream=True))

    message = whole.choices[0].message
    streamed = _joined_tool_calls(chunks)
    assert _joined_content(chunks) == message.content == "adding: "
    assert [c["name"] for c in streamed] == ["add", "add"]
    assert streamed[0] == _calls_of(message)[0]  # the policy's own id, kept
    assert [json.loads(c["arguments"]) for c in streamed] == [{"a": 2, "b": 3}, {"a": 1, "b": "ü"}]
    assert all(c["type"] == "function" and c["id"].startswith("call_") for c in streamed)
    argument_pieces = [
        d for s in _choice_steps(chunks, 0) for d in s.delta.tool_calls or [] if d.id is None
    ]
    assert len(argument_pieces) > 2, "arguments must come in pieces"
    assert _choice_steps(chunks, 0)[-1].finish_reason == "tool_calls"


async def test_the_openai_stream_helper_rebuilds_the_tool_calls(model_server) -> None:
    """`client.chat.completions.stream` is the openai package's own accumulator."""
    server = await model_server(policies.constant({"content": None, "tool_calls": [NAMED_CALL]}))
    async with server.client() as client:
        whole = await client.chat.completions.create(model="m", messages=HELLO, tools=[ADD_TOOL])
        async with client.chat.completions.stream(
            model="m", messages=HELLO, tools=[ADD_TOOL]
        ) as stream:
            final = await stream.get_final_completion()
    [choice] = final.choices
    assert choice.finish_reason == "tool_calls"
    assert _calls_of(choice.message) == _calls_of(whole.choices[0].message)
    assert not choice.message.content


# -- n, logprobs, token ids, usage -----------------------------------------------------------


async def test_n_choices_are_told_apart_by_index(model_server) -> None:
    answers = itertools.count()

    def policy(messages: Any) -> str:
        return f"answer number {next(answers)}"

    server = await model_server(policy)
    async with server.client() as client:
        chunks = await _chunks(
            await client.chat.completions.create(model="m", messages=HELLO, n=2, stream=True)
        )
    order = [c.choices[0].index for c in chunks]
    assert all(len(c.choices) == 1 for c in chunks)
    assert order[:4] == [0, 1, 0, 1], "the choices take turns, as a server samples them"
    assert {_joined_content(chunks, 0), _joined_content(chunks, 1)} == {
        "answer number 0",
        "answer number 1",
    }
    assert [_choice_steps(chunks, i)[-1].finish_reason for i in (0, 1)] == ["stop", "stop"]


async def test_streamed_logprobs_and_token_ids_join_to_the_non_streamed_ones(model_server) -> None:
    server = await model_server(echo)
    options: dict[str, Any] = {
        "model": "m",
        "messages": HELLO,
        "logprobs": True,
        "top_logprobs": 2,
        "extra_body": {"return_token_ids": True},
    }
    async with server.client() as client:
        whole = await client.chat.completions.create(**options)
        chunks = await _chunks(await client.chat.completions.create(**options, stream=True))

    steps = _choice_steps(chunks, 0)
    entries = [e for s in steps if s.logprobs is not None for e in s.logprobs.content]
    assert entries == whole.choices[0].logprobs.content
    assert [t for s in steps for t in _extra(s, "token_ids")] == whole.choices[0].token_ids
    for step in steps:  # each chunk's logprobs are those of the tokens it carries
        ids = _extra(step, "token_ids")
        assert len(step.logprobs.content if step.logprobs else []) == len(ids)
    assert _extra(chunks[0], "prompt_token_ids") == whole.prompt_token_ids
    assert all(_extra(c, "prompt_token_ids") is None for c in chunks[1:])


async def test_include_usage_adds_a_last_chunk_with_the_usage(model_server) -> None:
    server = await model_server(echo)
    async with server.client() as client:
        whole = await client.chat.completions.create(model="m", messages=HELLO, n=2)
        chunks = await _chunks(
            await client.chat.completions.create(
                model="m",
                messages=HELLO,
                n=2,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
    *body, last = chunks
    assert last.choices == []
    assert last.usage == whole.usage
    assert all(c.usage is None and c.choices for c in body)
    assert [s.finish_reason for s in _choice_steps(chunks, 1)][-1] == "stop"


# -- refusals and faults ---------------------------------------------------------------------


def _raising(messages: Any) -> str:
    raise RuntimeError("board exploded")


REFUSED = {
    "top-logprobs-without-logprobs": ({"top_logprobs": 2}, openai.BadRequestError),
    "context-overflow": ({"max_tokens": 10_000}, openai.BadRequestError),
    "stream-not-a-bool": ({"extra_body": {"stream": "yes"}}, openai.BadRequestError),
    "include-usage-not-a-bool": (
        {"stream_options": {"include_usage": "yes"}},
        openai.BadRequestError,
    ),
    "continuous-usage-stats": (
        {"stream_options": {"continuous_usage_stats": True}},
        openai.BadRequestError,
    ),
    "unknown-model": ({"model": "nope"}, openai.NotFoundError),
    "raising-policy": ({"model": "raising"}, openai.InternalServerError),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
async def test_a_refused_request_gets_its_status_before_the_stream_starts(
    model_server, case: str
) -> None:
    options, error = REFUSED[case]
    server = await model_server({"m": echo, "raising": _raising}, max_model_len=1000)
    request: dict[str, Any] = {"model": "m", "messages": HELLO, "stream": True, **options}
    async with server.client() as client:
        with pytest.raises(error) as caught:
            await client.chat.completions.create(**request)
    assert caught.value.response.headers["content-type"].startswith("application/json")


async def test_a_refused_text_completion_stream_is_a_400_too(model_server) -> None:
    server = await model_server(echo)
    async with server.client() as client:
        with pytest.raises(openai.BadRequestError, match="max_completion_tokens"):
            await client.completions.create(
                model="m", prompt="hi", stream=True, extra_body={"max_completion_tokens": 3}
            )


async def test_a_streamed_request_is_recorded_and_meets_queued_faults(model_server) -> None:
    server = await model_server(echo)
    server.inject_faults("503", "malformed")
    async with server.client() as client:
        with pytest.raises(openai.InternalServerError):
            await client.chat.completions.create(model="m", messages=HELLO, stream=True)
        broken = await client.chat.completions.create(model="m", messages=HELLO, stream=True)
        with pytest.raises(json.JSONDecodeError):
            await _chunks(broken)
        chunks = await _chunks(
            await client.chat.completions.create(model="m", messages=HELLO, stream=True)
        )
    assert _joined_content(chunks) == echo(HELLO)
    assert [r["stream"] for r in server.requests] == [True, True, True]


async def test_a_client_that_hangs_up_mid_stream_leaves_the_server_serving(model_server) -> None:
    server = await model_server(policies.constant("x" * 5000))
    async with aiohttp.ClientSession() as session:
        body = {"model": "m", "messages": HELLO, "stream": True}
        async with session.post(f"{server.base_url}/chat/completions", json=body) as response:
            assert response.status == 200
            await response.content.readline()
    async with server.client() as client:
        chunks = await _chunks(
            await client.chat.completions.create(model="m", messages=HELLO, stream=True)
        )
    assert _joined_content(chunks) == "x" * 5000


# -- text completions ------------------------------------------------------------------------


async def test_streamed_text_completion_joins_to_the_non_streamed_one(model_server) -> None:
    server = await model_server(echo)
    options: dict[str, Any] = {
        "model": "m",
        "prompt": ["héllo", "日本 and more"],
        "n": 2,
        "max_tokens": 8,
        "logprobs": 2,
        "extra_body": {"return_token_ids": True},
    }
    async with server.client() as client:
        whole = await client.completions.create(**options)
        chunks = await _chunks(
            await client.completions.create(
                **options, stream=True, stream_options={"include_usage": True}
            )
        )

    *body, last = chunks
    assert all(c.object == "text_completion" and c.usage is None for c in body)
    assert last.choices == [] and last.usage == whole.usage
    for expected in whole.choices:
        steps = _choice_steps(chunks, expected.index)
        assert len(steps) > 2
        assert "".join(s.text for s in steps) == expected.text
        assert steps[-1].finish_reason == expected.finish_reason
        assert [t for s in steps for t in _extra(s, "token_ids")] == _extra(expected, "token_ids")
        assert _extra(steps[0], "prompt_token_ids") == _extra(expected, "prompt_token_ids")
        pieces = [s.logprobs for s in steps if s.logprobs is not None]
        for field in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
            joined = [v for p in pieces for v in getattr(p, field)]
            assert joined == getattr(expected.logprobs, field)
    assert [c.finish_reason for c in whole.choices] == ["stop", "stop", "length", "length"]
    assert TOK.decode(_extra(whole.choices[2], "token_ids")) == whole.choices[2].text
