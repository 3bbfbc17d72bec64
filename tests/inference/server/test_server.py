"""The project's model server, driven through the real openai clients over loopback HTTP."""

from __future__ import annotations

import asyncio
import json
import socket
import threading

import aiohttp
import openai
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scripted_models import echo
from tool_calls import ADD_TOOL

from vfgym.inference.server import ByteTokenizer, ModelServer, assistant_text, policies
from vfgym.inference.server.faults import parse_fault

TOK = ByteTokenizer()


USER_HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def server():
    async with ModelServer(echo) as srv:
        yield srv


@pytest.fixture
async def client(server):
    async with server.client() as c:
        yield c


async def test_chat_completion_is_a_valid_openai_object(server, client):
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "héllo"}]
    response = await client.chat.completions.create(model="any-name", messages=messages)

    assert response.object == "chat.completion"
    assert response.id.startswith("chatcmpl-")
    assert response.model == "any-name"
    [choice] = response.choices
    assert choice.message.role == "assistant"
    assert choice.message.content == "echo: olléh"
    assert choice.finish_reason == "stop"
    assert choice.logprobs is None
    assert response.usage.prompt_tokens == len(
        TOK.apply_chat_template(messages, add_generation_prompt=True)
    )
    assert response.usage.completion_tokens == len(TOK.encode("echo: olléh"))
    assert response.usage.total_tokens == (
        response.usage.prompt_tokens + response.usage.completion_tokens
    )


async def test_text_completion_and_batched_prompts(client):
    single = await client.completions.create(model="m", prompt="abc")
    assert single.object == "text_completion"
    assert single.choices[0].text == "ABC"
    assert single.choices[0].finish_reason == "stop"
    assert single.usage.prompt_tokens == 3
    assert single.usage.completion_tokens == 3

    batch = await client.completions.create(model="m", prompt=["ab", "xyz"], n=2)
    assert [c.index for c in batch.choices] == [0, 1, 2, 3]
    assert [c.text for c in batch.choices] == ["AB", "AB", "XYZ", "XYZ"]
    assert batch.usage.prompt_tokens == 5


async def test_models_lists_the_served_name(server, client):
    models = await client.models.list()
    assert [m.id for m in models.data] == ["vfgym-test"]


async def test_sync_client_from_another_thread(server):
    # The sync client blocks its thread, so it must be used from another thread
    # while this loop keeps serving.
    def call() -> str:
        with server.sync_client() as c:
            out = c.chat.completions.create(model="m", messages=USER_HI)
        return out.choices[0].message.content

    assert await asyncio.to_thread(call) == "echo: ih"


async def test_tool_calls_round_trip_and_prompt_ids_extend_the_turn():
    def policy(messages, request):
        if messages[-1]["role"] == "tool":
            return f"the sum is {messages[-1]['content']}"
        assert request["tools"][0]["function"]["name"] == "add"
        return {"content": "", "tool_calls": [{"function": {"name": "add", "arguments": {"a": 2}}}]}

    async with ModelServer(policy) as srv, srv.client() as client:
        messages = [{"role": "user", "content": "add 2 and 3"}]
        extra = {"return_token_ids": True}
        first = await client.chat.completions.create(
            model="m", messages=messages, tools=[ADD_TOOL], extra_body=extra
        )
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls"
        assert choice.message.content is None
        [call] = choice.message.tool_calls
        assert call.type == "function"
        assert call.id.startswith("call_")
        assert call.function.name == "add"
        assert json.loads(call.function.arguments) == {"a": 2}

        assistant = choice.message.model_dump(exclude_none=True)
        assert choice.token_ids == TOK.encode(assistant_text(assistant))
        messages += [assistant, {"role": "tool", "tool_call_id": call.id, "content": "5"}]
        second = await client.chat.completions.create(
            model="m", messages=messages, tools=[ADD_TOOL], extra_body=extra
        )
        assert second.choices[0].message.content == "the sum is 5"
        # The trainer's invariant: prompt ids + completion ids are a prefix of the next prompt.
        rebuilt = first.prompt_token_ids + choice.token_ids
        assert second.prompt_token_ids[: len(rebuilt)] == rebuilt
        assert second.prompt_token_ids == TOK.apply_chat_template(
            messages, tools=[ADD_TOOL], add_generation_prompt=True
        )


async def test_n_calls_the_policy_once_per_choice():
    calls = []

    async def policy(messages):
        calls.append(len(messages))
        answer = f"answer {len(calls)}"
        await asyncio.sleep(0)
        return answer

    async with ModelServer(policy) as srv, srv.client() as client:
        response = await client.chat.completions.create(model="m", messages=USER_HI, n=3)
    assert len(calls) == 3
    assert [c.index for c in response.choices] == [0, 1, 2]
    assert sorted(c.message.content for c in response.choices) == [
        "answer 1",
        "answer 2",
        "answer 3",
    ]
    assert response.usage.completion_tokens == 3 * len(TOK.encode("answer 1"))


async def test_a_mapping_serves_each_model_and_unknown_models_are_404():
    policies = {"reference": lambda m: "ref", "student": lambda m: "stu"}
    async with ModelServer(policies) as srv, srv.client() as client:
        ref = await client.chat.completions.create(model="reference", messages=USER_HI)
        stu = await client.chat.completions.create(model="student", messages=USER_HI)
        assert (ref.choices[0].message.content, stu.choices[0].message.content) == ("ref", "stu")
        assert [m.id for m in (await client.models.list()).data] == ["reference", "student"]
        with pytest.raises(openai.NotFoundError) as info:
            await client.chat.completions.create(model="gpt-x", messages=USER_HI)
    assert "gpt-x" in str(info.value)
    assert "reference" in str(info.value)


async def test_policy_errors_become_500_with_the_message():
    def broken(messages):
        raise RuntimeError("board exploded")

    async with ModelServer({"broken": broken, "bad": lambda m: 42}) as srv:
        async with srv.client() as client:
            with pytest.raises(openai.InternalServerError, match="board exploded"):
                await client.chat.completions.create(model="broken", messages=USER_HI)
            with pytest.raises(openai.InternalServerError, match="must return a str"):
                await client.chat.completions.create(model="bad", messages=USER_HI)


async def test_blocking_policy_can_be_offloaded():
    seen = []

    def policy(messages):
        seen.append(threading.current_thread() is threading.main_thread())
        return "ok"

    async with ModelServer(policy, offload_sync=True) as srv, srv.client() as client:
        response = await client.chat.completions.create(model="m", messages=USER_HI)
    assert response.choices[0].message.content == "ok"
    assert seen == [False]


async def test_by_turn_scripts_each_rollout_independently():
    script = policies.by_turn(["first", {"content": "second"}])
    async with ModelServer(script) as srv, srv.client() as client:

        async def rollout() -> list[str]:
            messages = list(USER_HI)
            seen = []
            for _ in range(2):
                r = await client.chat.completions.create(model="m", messages=messages)
                seen.append(r.choices[0].message.content)
                messages += [{"role": "assistant", "content": seen[-1]}, USER_HI[0]]
            return seen

        results = await asyncio.gather(*(rollout() for _ in range(4)))
        assert results == [["first", "second"]] * 4
        with pytest.raises(openai.InternalServerError, match="turn 3"):
            await client.chat.completions.create(model="m", messages=messages_with(2))


def messages_with(assistant_turns: int) -> list[dict]:
    out = list(USER_HI)
    for _ in range(assistant_turns):
        out += [{"role": "assistant", "content": "x"}, USER_HI[0]]
    return out


def test_ready_made_policies():
    assert policies.echo([{"role": "user", "content": [{"type": "text", "text": "a"}]}]) == "a"
    assert policies.echo("prompt") == "prompt"
    assert policies.constant("k")(USER_HI) == "k"
    assert policies.by_turn(["a"], then="z")(messages_with(3)) == "z"
    with pytest.raises(ValueError, match="at least one"):
        policies.by_turn([])


class DuckTokenizer:
    """A tokenizer that is not a ByteTokenizer, to exercise the server's generic path."""

    vocab_size = TOK.vocab_size

    def encode(self, text, add_special_tokens=False):
        return TOK.encode(text)

    def decode(self, ids, skip_special_tokens=False):
        return TOK.decode(ids, skip_special_tokens=skip_special_tokens)

    def apply_chat_template(self, conversation, tools=None, **kwargs):
        return TOK.apply_chat_template(conversation, tools=tools, **kwargs)


async def test_any_hugging_face_like_tokenizer_can_count_tokens():
    async with ModelServer(echo, tokenizer=DuckTokenizer()) as srv, srv.client() as client:
        response = await client.chat.completions.create(
            model="m",
            messages=USER_HI,
            logprobs=True,
            max_tokens=3,
            extra_body={"return_token_ids": True},
        )
    choice = response.choices[0]
    assert choice.token_ids == TOK.encode("ech")
    assert [e.token for e in choice.logprobs.content] == ["e", "c", "h"]
    assert response.prompt_token_ids == TOK.apply_chat_template(USER_HI, add_generation_prompt=True)


async def test_logprobs_with_token_ids_in_both_vllm_styles(client):
    response = await client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "çava"}],
        logprobs=True,
        top_logprobs=3,
        extra_body={"return_token_ids": True, "return_tokens_as_token_ids": True},
    )
    choice = response.choices[0]
    content = choice.message.content
    entries = choice.logprobs.content
    ids_from_logprobs = [int(e.token.removeprefix("token_id:")) for e in entries]
    assert ids_from_logprobs == choice.token_ids == TOK.encode(content)
    assert TOK.decode(choice.token_ids) == content
    assert all(e.logprob <= 0 for e in entries)
    assert all(len(e.top_logprobs) == 3 for e in entries)
    assert all(e.top_logprobs[0].token == e.token for e in entries)
    assert all(t.logprob <= e.logprob for e in entries for t in e.top_logprobs)
    assert response.prompt_token_ids == TOK.apply_chat_template(
        [{"role": "user", "content": "çava"}], add_generation_prompt=True
    )


async def test_logprobs_as_text_carry_bytes_that_rebuild_the_content(client):
    response = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "日本"}], logprobs=True
    )
    choice = response.choices[0]
    entries = choice.logprobs.content
    assert b"".join(bytes(e.bytes) for e in entries).decode() == choice.message.content
    assert all(e.top_logprobs == [] for e in entries)
    assert not hasattr(choice, "token_ids") or choice.token_ids is None


async def test_text_completion_logprobs_and_token_ids(client):
    response = await client.completions.create(
        model="m",
        prompt="abc",
        logprobs=2,
        extra_body={"return_token_ids": True, "return_tokens_as_token_ids": True},
    )
    choice = response.choices[0]
    assert choice.prompt_token_ids == TOK.encode("abc")
    assert choice.token_ids == TOK.encode("ABC")
    assert [int(t.split(":")[1]) for t in choice.logprobs.tokens] == choice.token_ids
    assert all(lp <= 0 for lp in choice.logprobs.token_logprobs)
    assert all(len(top) == 2 for top in choice.logprobs.top_logprobs)


async def test_max_tokens_cuts_the_content_with_finish_reason_length(client):
    response = await client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "abcdefgh"}],
        max_tokens=4,
        extra_body={"return_token_ids": True},
    )
    choice = response.choices[0]
    assert choice.finish_reason == "length"
    assert choice.message.content == "echo"
    assert choice.token_ids == TOK.encode("echo")
    assert response.usage.completion_tokens == 4

    newer = await client.chat.completions.create(
        model="m", messages=USER_HI, max_completion_tokens=2
    )
    assert (newer.choices[0].message.content, newer.choices[0].finish_reason) == ("ec", "length")

    text = await client.completions.create(model="m", prompt="abcdef", max_tokens=2)
    assert (text.choices[0].text, text.choices[0].finish_reason) == ("AB", "length")


async def test_truncated_tool_call_turn_comes_back_as_text():
    def policy(messages):
        return {"content": "x", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}

    async with ModelServer(policy) as srv, srv.client() as client:
        response = await client.chat.completions.create(model="m", messages=USER_HI, max_tokens=5)
    choice = response.choices[0]
    assert choice.finish_reason == "length"
    assert choice.message.tool_calls is None
    assert choice.message.content == "x<too"


async def test_stop_strings_end_the_content(client):
    response = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "cba|def"}], stop=["|"]
    )
    assert response.choices[0].message.content == "echo: fed"
    assert response.choices[0].finish_reason == "stop"


async def test_context_overflow_is_a_vllm_style_400():
    async with ModelServer(echo, max_model_len=40) as srv, srv.client() as client:
        with pytest.raises(openai.BadRequestError) as info:
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x" * 50}]
            )
        assert "maximum context length is 40 tokens" in str(info.value)

        prompt = len(TOK.apply_chat_template(USER_HI, add_generation_prompt=True))
        with pytest.raises(openai.BadRequestError, match=f"requested {prompt + 40} tokens"):
            await client.chat.completions.create(model="m", messages=USER_HI, max_tokens=40)

        fits = await client.chat.completions.create(model="m", messages=USER_HI, max_tokens=3)
        assert fits.choices[0].message.content == "ech"


async def test_without_max_tokens_the_rest_of_the_window_bounds_the_answer():
    async with ModelServer(lambda m: "y" * 100, max_model_len=30) as srv, srv.client() as client:
        response = await client.chat.completions.create(model="m", messages=USER_HI)
    prompt = len(TOK.apply_chat_template(USER_HI, add_generation_prompt=True))
    assert response.choices[0].finish_reason == "length"
    assert response.choices[0].message.content == "y" * (30 - prompt)


async def test_tokenize_and_detokenize_endpoints(server):
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "é"}]
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{server.url}/tokenize", json={"model": "m", "prompt": "hé"}) as resp:
            plain = await resp.json()
        async with http.post(
            f"{server.url}/tokenize",
            json={"model": "m", "messages": messages, "add_generation_prompt": True},
        ) as resp:
            chat = await resp.json()
        async with http.post(
            f"{server.url}/detokenize", json={"model": "m", "tokens": chat["tokens"]}
        ) as resp:
            text = await resp.json()
        async with http.post(f"{server.url}/detokenize", json={"tokens": [1, 99999]}) as resp:
            bad_status, bad = resp.status, await resp.json()

    assert plain == {
        "count": 3,
        "max_model_len": 32768,
        "tokens": TOK.encode("hé"),
        "token_strs": None,
    }
    assert chat["tokens"] == TOK.apply_chat_template(messages, add_generation_prompt=True)
    assert chat["count"] == len(chat["tokens"])
    assert text["prompt"] == "<|system|>s<|end|><|user|>é<|end|><|assistant|>"
    assert bad_status == 400
    assert "99999" in bad["error"]["message"]


async def test_bad_requests_get_clear_400s(server, client):
    with pytest.raises(openai.BadRequestError, match="n"):
        await client.chat.completions.create(model="m", messages=USER_HI, n=0)
    with pytest.raises(openai.BadRequestError, match="role"):
        await client.chat.completions.create(model="m", messages=[{"role": "wizard"}])
    with pytest.raises(openai.BadRequestError, match="messages"):
        await client.chat.completions.create(model="m", messages=[])
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{server.base_url}/chat/completions", data=b"{nope") as resp:
            assert resp.status == 400
            assert "not valid JSON" in (await resp.json())["error"]["message"]


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ("500", openai.InternalServerError),
        ("503", openai.InternalServerError),
        ("429", openai.RateLimitError),
        ("context", openai.BadRequestError),
        ("drop", openai.APIConnectionError),
        (("slow", 5.0), openai.APITimeoutError),
        # The openai client does not wrap a body it cannot parse: it raises the JSON error.
        ("malformed", json.JSONDecodeError),
    ],
)
async def test_each_fault_raises_its_client_error_then_the_server_recovers(server, fault, error):
    server.inject_faults(fault)
    async with server.client(timeout=0.3) as impatient:
        with pytest.raises(error):
            await impatient.chat.completions.create(model="m", messages=USER_HI)
        assert server.pending_faults == 0
        after = await impatient.chat.completions.create(model="m", messages=USER_HI)
    assert after.choices[0].message.content == "echo: ih"


async def test_rate_limit_fault_advertises_retry_after(server, client):
    server.inject_faults(("429", 2.5))
    with pytest.raises(openai.RateLimitError) as info:
        await client.chat.completions.create(model="m", messages=USER_HI)
    headers = info.value.response.headers
    assert headers["retry-after"] == "3"
    assert headers["retry-after-ms"] == "2500"


async def test_faults_are_consumed_in_order_and_fail_always_persists(server, client):
    server.inject_faults("500", "429")
    with pytest.raises(openai.InternalServerError):
        await client.completions.create(model="m", prompt="a")
    with pytest.raises(openai.RateLimitError):
        await client.completions.create(model="m", prompt="a")
    server.fail_always("503")
    for _ in range(2):
        with pytest.raises(openai.InternalServerError, match="unavailable"):
            await client.chat.completions.create(model="m", messages=USER_HI)
    server.clear_faults()
    ok = await client.chat.completions.create(model="m", messages=USER_HI)
    assert ok.choices[0].finish_reason == "stop"


async def test_client_retries_get_through_queued_faults(server):
    # A short Retry-After keeps the client's own backoff out of the test's run time.
    server.inject_faults(("429", 0.01), ("429", 0.01))
    async with server.client(max_retries=2) as patient:
        response = await patient.chat.completions.create(model="m", messages=USER_HI)
    assert response.choices[0].message.content == "echo: ih"
    assert len(server.requests) == 3


def test_bad_fault_specs_are_refused():
    with pytest.raises(ValueError, match="unknown fault kind"):
        parse_fault("418")
    with pytest.raises(ValueError, match="needs a delay"):
        parse_fault("slow")
    with pytest.raises(ValueError, match="must be >= 0"):
        parse_fault(("slow", -1))
    assert parse_fault(500).kind == "500"


async def test_requests_record_sampling_args_and_extra_body(server, client):
    await client.chat.completions.create(
        model="m",
        messages=USER_HI,
        temperature=0.7,
        top_p=0.9,
        max_tokens=64,
        seed=3,
        extra_body={"top_k": 20, "min_p": 0.05, "skip_special_tokens": False},
    )
    [body] = server.requests
    assert body["messages"] == USER_HI
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == (
        0.7,
        0.9,
        64,
        3,
    )
    assert (body["top_k"], body["min_p"], body["skip_special_tokens"]) == (20, 0.05, False)
    server.clear_requests()
    assert server.requests == []


def test_sync_runner_serves_plain_sync_code():
    with ModelServer(echo).running() as srv:
        port = srv.port
        with srv.sync_client() as client:
            response = client.chat.completions.create(model="m", messages=USER_HI)
            assert response.choices[0].message.content == "echo: ih"
            srv.inject_faults("500")
            with pytest.raises(openai.InternalServerError):
                client.chat.completions.create(model="m", messages=USER_HI)
            text = client.completions.create(model="m", prompt="ok")
            assert text.choices[0].text == "OK"
        assert len(srv.requests) == 3
    assert not srv.is_running
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0


def test_start_stop_and_misuse():
    srv = ModelServer(echo)
    with pytest.raises(RuntimeError, match="not running"):
        _ = srv.base_url
    srv.start()
    try:
        assert srv.base_url == f"http://127.0.0.1:{srv.port}/v1"
        with pytest.raises(RuntimeError, match="already running"):
            srv.start()
    finally:
        srv.stop()
    srv.stop()  # idempotent
    with pytest.raises(ValueError, match="max_model_len"):
        ModelServer(echo, max_model_len=0)
    with pytest.raises(TypeError, match="callable"):
        ModelServer({"m": "not a function"})


def test_a_taken_port_fails_to_start():
    with ModelServer(echo) as first:
        with pytest.raises(OSError):
            ModelServer(echo, port=first.port).start()


# Every code point, lone surrogates included.
any_text = st.text(st.characters(codec=None, categories=None, exclude_categories=()))


@given(any_text)
@example("\ud800")  # a lone high surrogate
@example("a\udcff\ud83d\ude00b")  # a lone low surrogate and a split pair
@example("日本<|end|>")
def test_decode_inverts_encode_for_every_string(text):
    ids = TOK.encode(text)
    assert TOK.decode(ids) == text
    assert all(0 <= t < TOK.vocab_size for t in ids)
    assert TOK.count(text) == len(ids)


@given(st.binary())
def test_decoding_any_byte_tokens_never_fails(data):
    ids = [b + 16 for b in data]
    assert isinstance(TOK.decode(ids), str)


def test_special_token_names_in_text_encode_as_special_tokens():
    assert TOK.encode("a<|end|>") == [ord("a") + 16, TOK.eos_token_id]
    assert TOK.encode("<|end|>", split_special_tokens=True) == [b + 16 for b in b"<|end|>"]
    assert TOK.decode(TOK.encode("x<|user|>y"), skip_special_tokens=True) == "xy"
    assert TOK("ab")["input_ids"] == TOK.encode("ab")
    assert TOK(["a", "bc"])["attention_mask"] == [[1], [1, 1]]


text_st = st.text(max_size=12)


tool_call_st = st.fixed_dictionaries(
    {
        "id": st.just("call_1"),
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {
                "name": st.sampled_from(["add", "look"]),
                "arguments": st.one_of(
                    st.dictionaries(st.text(max_size=4), st.integers()).map(json.dumps),
                    text_st,
                ),
            }
        ),
    }
)


message_st = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "user", "tool"]), "content": text_st}
    ),
    st.fixed_dictionaries(
        {"role": st.just("assistant"), "content": st.one_of(st.none(), text_st)},
        optional={"tool_calls": st.lists(tool_call_st, min_size=1, max_size=2)},
    ),
)


@settings(max_examples=60)
@given(st.lists(message_st, max_size=6), st.sampled_from([None, [ADD_TOOL]]))
def test_chat_template_is_prefix_stable(messages, tools):
    def render(msgs, gen=False):
        return TOK.apply_chat_template(msgs, tools=tools, add_generation_prompt=gen)

    full = render(messages)
    assert TOK.count_chat_tokens(messages, tools, add_generation_prompt=False) == len(full)
    assert TOK.encode(TOK.apply_chat_template(messages, tools=tools, tokenize=False)) == full
    for k, message in enumerate(messages):
        if message["role"] == "assistant":
            prompt = render(messages[:k], gen=True)
            turn = prompt + TOK.encode(assistant_text(message))
            assert turn == render(messages[: k + 1])
            assert full[: len(turn)] == turn
        before = render(messages[:k])
        assert render(messages[: k + 1], gen=True)[: len(before)] == before


def test_tokenizer_refuses_what_it_cannot_render():
    with pytest.raises(ValueError, match="role"):
        TOK.apply_chat_template([{"role": "narrator", "content": "x"}])
    with pytest.raises(ValueError, match="text content parts"):
        TOK.apply_chat_template([{"role": "user", "content": [{"type": "image_url"}]}])
    with pytest.raises(TypeError, match="return_tensors"):
        TOK.apply_chat_template(USER_HI, return_tensors="pt")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        TOK.decode([TOK.vocab_size])
    assert TOK.apply_chat_template(
        messages=[{"role": "user", "content": [{"type": "text", "text": "a"}, {"text": "b"}]}],
        tokenize=False,
    ) == ("<|user|>ab")
