"""The server and the model client as a user of the official openai client meets them.

Each test drives the project's server over loopback HTTP with the real openai
client and compares the answer with what OpenAI and vLLM do: requests they
refuse must be refused here too (so a mistake shows up in tests, not in
production), and what the client sends must mean the same on every server.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from aiohttp import web
from loopback_http import serve_posts
from pydantic import BaseModel
from tool_calls import ADD_TOOL as ADD
from tool_calls import CALL

from vfgym.errors import ModelCallError
from vfgym.inference.client import request_model_response
from vfgym.inference.server import ByteTokenizer, ModelServer, assistant_text, policies

TOK = ByteTokenizer()


HELLO = [{"role": "user", "content": "hello"}]


def _tool_options(tools: list[Any] | None, tool_choice: Any) -> dict[str, Any]:
    """A request's tool_choice, and its tools when there are any."""
    return {"tool_choice": tool_choice} | ({} if tools is None else {"tools": tools})


def meddler(messages: list[dict[str, Any]]) -> str:
    """A policy that appends to the conversation it was handed (a common slip in user
    code), then answers with how many messages it saw."""
    messages.append({"role": "user", "content": "injected by the policy"})
    return str(len(messages))


async def test_a_policy_editing_its_messages_does_not_change_the_prompt_token_ids(
    model_server,
) -> None:
    """`prompt_token_ids` are the ids of the prompt the client sent, which a trainer
    joins with the completion ids; a policy's edits must not leak into them."""
    server = await model_server(meddler)
    async with server.client() as client:
        response = await client.chat.completions.create(
            model="m", messages=HELLO, extra_body={"return_token_ids": True}
        )
    sent = TOK.apply_chat_template(HELLO, add_generation_prompt=True)
    assert response.prompt_token_ids == sent
    assert response.usage.prompt_tokens == len(sent)


async def test_each_of_n_choices_sees_the_messages_as_sent(model_server) -> None:
    """On a real server the n samples are independent; here one choice's policy call
    must not see what another call did to the conversation."""
    server = await model_server(meddler)
    async with server.client() as client:
        response = await client.chat.completions.create(model="m", messages=HELLO, n=3)
    assert [choice.message.content for choice in response.choices] == ["2", "2", "2"]


async def test_each_of_n_text_choices_gets_the_request_as_sent(model_server) -> None:
    def counter(prompt: str, request: dict[str, Any]) -> str:
        request["seen"] = request.get("seen", 0) + 1
        return str(request["seen"])

    server = await model_server(counter)
    async with server.client() as client:
        response = await client.completions.create(model="m", prompt="p", n=3)
    assert [choice.text for choice in response.choices] == ["1", "1", "1"]


async def test_recorded_requests_are_what_the_client_sent(model_server) -> None:
    def rename(messages: list[dict[str, Any]], request: dict[str, Any]) -> str:
        request["model"] = "renamed"
        messages.clear()
        return "ok"

    server = await model_server(rename)
    async with server.client() as client:
        response = await client.chat.completions.create(model="m", messages=HELLO)
    assert response.model == "m"
    assert server.requests == [{"model": "m", "messages": HELLO}]


@pytest.mark.parametrize(
    ("tools", "tool_choice", "says"),
    [
        (None, "auto", "'tools'"),
        (None, "required", "'tools'"),
        (None, {"type": "function", "function": {"name": "add"}}, "'tools'"),
        ([ADD], "sometimes", "'auto'"),
        ([ADD], {"type": "function", "function": {"name": "sub"}}, "'sub'"),
        ([ADD], {"type": "function"}, "'name'"),
        ([ADD], ["add"], "'auto'"),
    ],
    ids=[
        "auto-without-tools",
        "required-without-tools",
        "named-without-tools",
        "unknown-mode",
        "named-tool-not-in-tools",
        "named-without-a-name",
        "a-list",
    ],
)
async def test_a_tool_choice_vllm_refuses_is_a_400(
    model_server, tools: list[Any] | None, tool_choice: Any, says: str
) -> None:
    """vLLM answers each of these with a 400 (OpenAI too), so they must not pass here."""
    server = await model_server(policies.echo)
    async with server.client() as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(
                model="m", messages=HELLO, **_tool_options(tools, tool_choice)
            )
    assert caught.value.param == "tool_choice"
    assert says in caught.value.message
    assert server.requests  # the server refused it, not the client


@pytest.mark.parametrize(
    ("tools", "tool_choice"),
    [
        (None, "none"),
        ([ADD], "none"),
        ([ADD], "auto"),
    ],
)
async def test_a_tool_choice_vllm_accepts_is_served(
    model_server, tools: list[Any] | None, tool_choice: Any
) -> None:
    """(A forced tool_choice, "required" or named, is served when the policy calls the
    tool: see the forced tool_choice tests in this file.)"""
    server = await model_server(policies.echo)
    async with server.client() as client:
        response = await client.chat.completions.create(
            model="m", messages=HELLO, **_tool_options(tools, tool_choice)
        )
    assert response.choices[0].message.content == "hello"


@pytest.mark.parametrize(
    ("tools", "tool_choice"), [(None, None), ([ADD], "none")], ids=["no-tools", "choice-none"]
)
async def test_tool_calls_come_back_as_text_when_the_request_allows_none(
    model_server, tools: list[Any] | None, tool_choice: str | None
) -> None:
    """vLLM parses tool calls only when the request sends tools and does not say
    tool_choice "none" (OpenAI's model cannot call a tool then); otherwise the call
    is plain text in `content`. A client that forgot `tools` must see that here too."""
    server = await model_server(policies.constant({"content": "sum: ", "tool_calls": [CALL]}))
    options: dict[str, Any] = {"extra_body": {"return_token_ids": True}}
    if tools is not None:
        options.update(tools=tools, tool_choice=tool_choice)
    async with server.client() as client:
        response = await client.chat.completions.create(model="m", messages=HELLO, **options)
    [choice] = response.choices
    text = assistant_text({"content": "sum: ", "tool_calls": [CALL]})
    assert choice.message.tool_calls is None
    assert choice.message.content == text
    assert choice.finish_reason == "stop"
    assert choice.token_ids == TOK.encode(text)  # the same ids as the parsed call's


async def test_tool_calls_are_parsed_when_the_request_sends_tools(model_server) -> None:
    server = await model_server(policies.constant({"content": None, "tool_calls": [CALL]}))
    async with server.client() as client:
        response = await client.chat.completions.create(model="m", messages=HELLO, tools=[ADD])
    [choice] = response.choices
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert choice.message.tool_calls[0].function.name == "add"


@pytest.mark.parametrize(
    "response_format",
    [
        {"type": "json"},
        {"type": "json_schema"},
        {"type": "json_schema", "json_schema": {"schema": {"type": "object"}}},
        "json_object",
    ],
    ids=["unknown-type", "schema-missing", "schema-without-name", "a-string"],
)
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
async def test_a_response_format_vllm_refuses_is_a_400(
    model_server, endpoint: str, response_format: Any
) -> None:
    server = await model_server(policies.echo)
    async with server.client() as client:
        with pytest.raises(openai.BadRequestError) as caught:
            if endpoint == "chat":
                await client.chat.completions.create(
                    model="m", messages=HELLO, response_format=response_format
                )
            else:
                await client.completions.create(
                    model="m", prompt="p", extra_body={"response_format": response_format}
                )
    assert caught.value.param == "response_format"
    assert "json_schema" in caught.value.message


class Sum(BaseModel):
    total: int


async def test_structured_output_parses_with_the_openai_helper(model_server) -> None:
    """`client.chat.completions.parse` sends a json_schema response_format and parses
    the answer; the server accepts the format the helper builds."""
    server = await model_server(policies.constant('{"total": 5}'))
    async with server.client() as client:
        response = await client.chat.completions.parse(
            model="m", messages=HELLO, response_format=Sum
        )
        plain = await client.chat.completions.create(
            model="m", messages=HELLO, response_format={"type": "json_object"}, seed=7
        )
    assert response.choices[0].message.parsed == Sum(total=5)
    assert server.requests[0]["response_format"]["type"] == "json_schema"
    assert plain.choices[0].message.content == '{"total": 5}'


async def test_max_completion_tokens_on_text_completions_is_a_400(model_server) -> None:
    """/v1/completions knows only `max_tokens`: OpenAI refuses the chat-only name and
    vLLM ignores it (giving the default 16 tokens), so honouring it here hid the bug."""
    server = await model_server(policies.echo)
    async with server.client() as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.completions.create(
                model="m", prompt="x" * 40, extra_body={"max_completion_tokens": 30}
            )
        null = await client.completions.create(
            model="m", prompt="x" * 40, max_tokens=30, extra_body={"max_completion_tokens": None}
        )
    assert caught.value.param == "max_completion_tokens"
    assert "'max_tokens'" in caught.value.message
    assert null.choices[0].text == "x" * 30


@pytest.mark.parametrize("count", [3, 0, "true"])
async def test_a_chat_logprobs_that_is_not_true_or_false_is_a_400(model_server, count) -> None:
    """`logprobs` is a count on /v1/completions and a flag on chat; OpenAI refuses a
    count on chat, and vLLM refuses one above 1, so it must not pass here."""
    server = await model_server(policies.echo)
    async with server.client() as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(
                model="m", messages=HELLO, extra_body={"logprobs": count}
            )
        flagged = await client.chat.completions.create(
            model="m", messages=HELLO, logprobs=True, top_logprobs=2
        )
        unflagged = await client.chat.completions.create(model="m", messages=HELLO, logprobs=False)
    assert caught.value.param == "logprobs" and "'top_logprobs'" in caught.value.message
    assert len(flagged.choices[0].logprobs.content[0].top_logprobs) == 2
    assert unflagged.choices[0].logprobs is None


async def test_the_client_sends_max_completion_tokens_as_max_tokens_to_text_completions(
    model_server,
) -> None:
    """Chat turns `max_tokens` into `max_completion_tokens`; a completion-mode rollout
    needs the reverse, or the limit is lost on vLLM (which then gives 16 tokens)."""
    server = await model_server(policies.echo)
    async with server.client() as client:
        response = await request_model_response(
            client,
            "m",
            "x" * 40,
            message_type="completion",
            sampling_args={"max_completion_tokens": 30},
        )
    [body] = server.requests
    assert body["max_tokens"] == 30 and "max_completion_tokens" not in body
    assert response.choices[0].text == "x" * 30


async def _sse_chat(request: web.Request) -> web.StreamResponse:
    """A chat completion streamed as vLLM and OpenAI stream it."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    chunk = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}}],
    }
    await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    return response


@pytest.mark.parametrize(
    "sampling_args",
    [{"stream": True}, {"extra_body": {"stream": True}}],
    ids=["argument", "extra-body"],
)
async def test_a_streaming_sampling_arg_is_refused_before_any_request(
    fast_retry, sampling_args: dict[str, Any]
) -> None:
    """A rollout needs the whole answer; a streamed one has no `choices`, which the
    client took for a server fault: it re-sent the request and ended with "check that
    it is up and not overloaded" against a server that was fine."""
    seen: list[web.Request] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append(request)
        return await _sse_chat(request)

    runner, port = await serve_posts(handler, "/v1/chat/completions")
    try:
        async with openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=0
        ) as client:
            with pytest.raises(ValueError, match="stream") as caught:
                await request_model_response(
                    client, "m", HELLO, sampling_args=sampling_args, retry=fast_retry
                )
    finally:
        await runner.cleanup()
    assert "drop" in str(caught.value)
    assert seen == []


async def test_a_client_with_its_own_api_key_still_reaches_the_server(model_server) -> None:
    """`server.client(api_key=...)` (a test of key handling, say) used to raise "got
    multiple values for keyword argument 'api_key'"; the server wants no key."""
    server = await model_server(policies.echo)
    async with server.client(api_key="sk-test") as client:
        response = await client.chat.completions.create(model="m", messages=HELLO)
    with server.sync_client(api_key="sk-test") as sync:
        assert sync.api_key == "sk-test"
    assert client.api_key == "sk-test"
    assert response.choices[0].message.content == "hello"


async def test_a_raising_policy_is_called_once_not_retried(model_server, fast_retry) -> None:
    """A 500 from a policy that raised says so, and the server tells clients not to
    retry: the openai client's own retries and the rollout client's used to call the
    broken policy again and again, and report a flaky server after the backoff."""
    calls: list[int] = []

    def broken(messages: list[dict[str, Any]]) -> str:
        calls.append(1)
        raise RuntimeError("board exploded")

    server = await model_server(broken)
    async with server.client(max_retries=3) as client:
        with pytest.raises(openai.InternalServerError, match="board exploded"):
            await client.chat.completions.create(model="m", messages=HELLO)
        assert calls == [1]
        with pytest.raises(ModelCallError, match="board exploded") as caught:
            await request_model_response(client, "m", HELLO, retry=fast_retry)
    assert calls == [1, 1] and caught.value.attempts == 1


async def test_an_injected_server_fault_is_still_retried(model_server, fast_retry) -> None:
    """Faults stand for a flaky server: a 500 there carries no such header."""
    server = await model_server(policies.echo)
    server.inject_faults("500")
    async with server.client() as client:
        response = await request_model_response(client, "m", HELLO, retry=fast_retry)
    assert response.choices[0].message.content == "hello"
    assert len(server.requests) == 2


@pytest.mark.parametrize("setting", [{"max_model_len": True}, {"port": True}, {"port": False}])
def test_a_bool_for_a_server_size_or_port_is_refused(setting: dict[str, bool]) -> None:
    # `True` is an int to Python: it would have served a 1-token window, or port 1.
    with pytest.raises(ValueError, match="must be"):
        ModelServer(policies.echo, **setting)


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
