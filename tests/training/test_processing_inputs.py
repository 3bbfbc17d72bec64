"""Token processing on inputs a trainer meets outside the happy path: States read
back from results.jsonl, rewards written there as null, outputs of the other
message type, responses with text logprobs, and a `/tokenize` that cannot answer."""

from __future__ import annotations

import asyncio
import json
import math
import socket
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from loopback_http import ScriptedServer, serve_posts

import vfgym as vf
from vfgym.envs import SingleTurnEnv
from vfgym.errors import MissingTokenIdsError, ServerTokenizerError
from vfgym.inference.server import ByteTokenizer, ModelServer
from vfgym.results.jsonl import RESULTS_FILE
from vfgym.training.processing import ServerTokenizer, process_env_results

TOKENIZER = ByteTokenizer()


WANT_IDS = {"extra_body": {"return_token_ids": True}, "logprobs": True}


TEXT_IDS = {"logprobs": 1, "extra_body": {"return_token_ids": True}}


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2}'}}
    ],
}


def tool_policy(messages: list[dict[str, Any]], request: dict[str, Any]) -> Any:
    """Calls `add` once, then answers with text that is not ASCII."""
    return CALL if not any(m["role"] == "tool" for m in messages) else "5 é 😀"


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    with ModelServer(tool_policy).running() as running:
        yield running


def tool_env() -> vf.ToolEnv:
    return vf.ToolEnv(tools=[add], dataset=[{"prompt": [{"role": "user", "content": "2+? é"}]}])


class TextEnv(vf.MultiTurnEnv):
    def is_completed(self, messages: Any, state: vf.State, **kwargs: Any) -> bool:
        return state["turn"] >= 2

    def env_response(self, messages: Any, state: vf.State, **kwargs: Any):
        return "\nENV é\n", state


def text_policy(prompt: str) -> str:
    return "modèl😀" + str(prompt.count("ENV"))


def processed(env: vf.Environment, out: Any, **kwargs: Any) -> vf.ProcessedOutputs:
    return env.process_env_results(
        out.prompt, out.completion, out.state, out.reward, TOKENIZER, **kwargs
    )


def test_a_resumed_chat_run_with_the_responses_column_processes_like_the_original(
    server: ModelServer, tmp_path: Path
) -> None:
    """Responses saved with `state_columns=["responses"]` read back as plain dicts;
    their ids and logprobs are the same data, and were refused with
    `'dict' object has no attribute 'choices'`."""
    env = tool_env()
    client = server.sync_client()
    first = env.evaluate_sync(
        client, "m", WANT_IDS, results_path=tmp_path, state_columns=["responses"]
    )
    assert not first.state[0].get("error"), first.state[0].get("error")
    requests = len(server.requests)
    again = env.evaluate_sync(
        client, "m", WANT_IDS, results_path=tmp_path, state_columns=["responses"], resume=True
    )
    assert len(server.requests) == requests  # nothing was generated again
    assert isinstance(again.state[0]["responses"][0], dict)
    want = processed(env, first, mask_env_responses=True)
    assert processed(env, again, mask_env_responses=True) == want
    assert any(lp < 0 for lp in want.completion_logprobs[0])


def test_a_resumed_completion_mode_run_processes_like_the_original(tmp_path: Path) -> None:
    env = TextEnv(dataset=[{"prompt": "Q: gö\n"}], message_type="completion")
    columns = ["responses", "responses_start_idx"]
    with ModelServer(text_policy).running() as text_server:
        client = text_server.sync_client()
        first = env.evaluate_sync(
            client, "m", TEXT_IDS, results_path=tmp_path, state_columns=columns
        )
        again = env.evaluate_sync(
            client, "m", TEXT_IDS, results_path=tmp_path, state_columns=columns, resume=True
        )
    assert isinstance(again.state[0]["responses"][0], dict)
    want = processed(env, first, mask_env_responses=True)
    assert processed(env, again, mask_env_responses=True) == want
    assert TOKENIZER.decode(want.prompt_ids[0] + want.completion_ids[0]) == (
        "Q: gö\nmodèl😀0\nENV é\nmodèl😀1"
    )


def test_a_resumed_run_without_the_responses_column_says_which_column_to_keep(
    server: ModelServer, tmp_path: Path
) -> None:
    env = tool_env()
    env.evaluate_sync(server.sync_client(), "m", WANT_IDS, results_path=tmp_path)
    again = env.evaluate_sync(
        server.sync_client(), "m", WANT_IDS, results_path=tmp_path, resume=True
    )
    with pytest.raises(MissingTokenIdsError, match=r"state_columns=\['responses'\]"):
        processed(env, again)


def test_completion_mode_states_without_start_indices_name_the_missing_column(
    tmp_path: Path,
) -> None:
    env = TextEnv(dataset=[{"prompt": "Q: go\n"}], message_type="completion")
    with ModelServer(text_policy).running() as text_server:
        client = text_server.sync_client()
        env.evaluate_sync(client, "m", TEXT_IDS, results_path=tmp_path, state_columns=["responses"])
        again = env.evaluate_sync(
            client, "m", TEXT_IDS, results_path=tmp_path, state_columns=["responses"], resume=True
        )
    with pytest.raises(MissingTokenIdsError, match=r"state_columns=\[.*'responses_start_idx'\]"):
        processed(env, again)


@pytest.mark.parametrize("reward", [None, math.inf, -math.inf, math.nan], ids=repr)
def test_a_reward_that_is_not_a_finite_number_carries_no_signal(
    server: ModelServer, reward: Any
) -> None:
    """results.jsonl writes a NaN or infinite reward as null: read back, None raised
    `float() argument must be ... not 'NoneType'`; infinity went to the trainer as is."""
    env = tool_env()
    out = env.evaluate_sync(server.sync_client(), "m", WANT_IDS)
    good = env.process_env_results(out.prompt, out.completion, out.state, [1.0], TOKENIZER)
    bad = env.process_env_results(out.prompt, out.completion, out.state, [reward], TOKENIZER)
    assert good.rewards == [1.0] and any(good.completion_mask[0])
    assert bad.rewards == [0.0]
    assert bad.completion_mask[0] == [0] * len(good.completion_ids[0])
    assert bad.completion_ids == good.completion_ids


def test_a_reward_that_is_not_a_number_is_named(server: ModelServer) -> None:
    env = tool_env()
    out = env.evaluate_sync(server.sync_client(), "m", WANT_IDS)
    with pytest.raises(ValueError, match=r"rewards\[0\] is 'high'"):
        env.process_env_results(out.prompt, out.completion, out.state, ["high"], TOKENIZER)


def test_logprobs_without_token_ids_say_how_to_ask_for_the_ids(server: ModelServer) -> None:
    """`logprobs=True` alone gives text tokens; the error said only "logprob tokens are
    text, not ids"."""
    env = tool_env()
    out = env.evaluate_sync(server.sync_client(), "m", {"logprobs": True})
    assert out.state[0]["responses"][0].choices[0].logprobs.content
    with pytest.raises(MissingTokenIdsError, match="return_token_ids"):
        processed(env, out)


def test_completion_mode_outputs_processed_as_chat_name_the_message_type() -> None:
    """The module function defaults to chat; text outputs raised
    `'str' object has no attribute 'get'`."""
    env = TextEnv(dataset=[{"prompt": "Q: go\n"}], message_type="completion")
    with ModelServer(text_policy).running() as text_server:
        out = env.evaluate_sync(text_server.sync_client(), "m", TEXT_IDS)
    with pytest.raises(TypeError, match="message_type='completion'"):
        process_env_results(out.prompt, out.completion, out.state, out.reward, TOKENIZER)


def test_chat_outputs_processed_as_completion_mode_name_the_message_type(
    server: ModelServer,
) -> None:
    """Chat outputs as text were blamed on turns "written by hand"."""
    env = tool_env()
    out = env.evaluate_sync(server.sync_client(), "m", WANT_IDS)
    with pytest.raises(TypeError, match="message_type='chat'"):
        process_env_results(
            out.prompt,
            out.completion,
            out.state,
            out.reward,
            TOKENIZER,
            message_type="completion",
        )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_tokenize_endpoint_names_the_address_and_the_way_out() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ServerTokenizerError, match=rf"could not reach {url}/tokenize.*running"):
        ServerTokenizer(url + "/v1", "m").encode("x")


async def test_a_server_without_tokenize_says_to_pass_a_local_tokenizer(
    scripted: Callable[..., Awaitable[ScriptedServer]],
) -> None:
    """OpenAI's API has no /tokenize: the error said only "answered HTTP 404"."""
    chat_only = await scripted((200, {}, {}))  # serves /v1/chat/completions alone
    tokenizer = ServerTokenizer(f"http://127.0.0.1:{chat_only.port}/v1", "m")
    with pytest.raises(ServerTokenizerError, match=r"HTTP 404.*Hugging Face tokenizer"):
        await asyncio.to_thread(tokenizer.encode, "x")  # off the server's loop


async def test_a_tokenize_answer_without_tokens_is_named() -> None:
    """A proxy answering 200 with another body raised a bare `KeyError: 'tokens'`."""

    async def wrong(request: web.Request) -> web.Response:
        return web.json_response({"detail": "not vLLM"})

    runner, port = await serve_posts(wrong, "/tokenize")
    try:
        tokenizer = ServerTokenizer(f"http://127.0.0.1:{port}", "m")
        with pytest.raises(
            ServerTokenizerError, match=r"no token ids.*\{\"detail\": \"not vLLM\"\}"
        ):
            await asyncio.to_thread(tokenizer.encode, "x")  # off the server's loop
    finally:
        await runner.cleanup()


def test_per_rollout_tool_lists_of_another_length_are_refused(server: ModelServer) -> None:
    """Three tool lists for two rollouts were rendered as one tool list of lists: a
    prompt no server saw, with no error."""
    env = vf.ToolEnv(tools=[add], dataset=[{"prompt": [{"role": "user", "content": "hi"}]}] * 2)
    out = env.evaluate_sync(server.sync_client(), "m", WANT_IDS)
    args = (out.prompt, out.completion, out.state, out.reward, TOKENIZER)
    shared = process_env_results(*args, oai_tools=env.oai_tools)
    each = process_env_results(*args, oai_tools=[env.oai_tools, env.oai_tools])
    first_prompt = out.state[0]["responses"][0].model_extra["prompt_token_ids"]
    assert shared.prompt_ids[0] == each.prompt_ids[0] == first_prompt
    with pytest.raises(ValueError, match="3 tool lists but there are 2 rollouts"):
        process_env_results(*args, oai_tools=[env.oai_tools] * 3)


def test_max_seq_len_none_is_no_limit_and_a_float_is_refused(server: ModelServer) -> None:
    """None reads as no limit, as -1 does; 512.0 or True is refused by name rather than
    failing inside a comparison or cutting the sequence at 1 token."""
    env = tool_env()
    out = env.evaluate_sync(server.sync_client(), "m", WANT_IDS)
    args = (out.prompt, out.completion, out.state, [1.0], TOKENIZER)
    unlimited = env.process_env_results(*args, max_seq_len=-1)
    assert env.process_env_results(*args, max_seq_len=None) == unlimited
    for bad in (512.0, True, "512"):
        with pytest.raises(TypeError, match="max_seq_len must be a whole number"):
            env.process_env_results(*args, max_seq_len=bad)


TOKEN_IDS_AND_LOGPROBS = {"logprobs": True, "extra_body": {"return_token_ids": True}}


SAY_HI = [{"role": "user", "content": "Say hi."}]


def chat_body(logprobs: list[Any]) -> str:
    """A chat completion answering "hi" (ids 104, 105 in bytes) with `logprobs`,
    as JSON text: Python's encoder writes -Infinity and NaN as a lax server does."""
    content = [
        {"token": f"token_id:{i}", "logprob": lp, "bytes": [i], "top_logprobs": []}
        for i, lp in zip((104, 105), logprobs, strict=True)
    ]
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "hi"},
                "finish_reason": "stop",
                "logprobs": {"content": content},
                "token_ids": [104, 105],
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }
    return json.dumps(body)


async def run_and_resume(
    server: ScriptedServer, tmp_path: Path
) -> tuple[vf.ProcessedOutputs, vf.ProcessedOutputs, list[dict[str, Any]]]:
    """The run's processed outputs live, then as a resume reads them back from disk."""
    env = SingleTurnEnv(dataset=[{"prompt": SAY_HI, "answer": "hi"}])
    client = server.client()
    kwargs: dict[str, Any] = {"results_path": tmp_path, "state_columns": ["responses"]}
    first = await env.evaluate(client, "m", TOKEN_IDS_AND_LOGPROBS, **kwargs)
    assert not first.state[0].get("error"), first.state[0].get("error")
    again = await env.evaluate(client, "m", TOKEN_IDS_AND_LOGPROBS, resume=True, **kwargs)
    assert len(server.bodies) == 1  # the resume generated nothing
    lines = (tmp_path / RESULTS_FILE).read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]

    def process(out: vf.GenerateOutputs) -> vf.ProcessedOutputs:
        return env.process_env_results(out.prompt, out.completion, out.state, out.reward, TOKENIZER)

    return process(first), process(again), records


def same(a: list[float], b: list[float]) -> bool:
    return all((math.isnan(x) and math.isnan(y)) or x == y for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("missing", [None, -math.inf, math.nan], ids=["null", "-Infinity", "NaN"])
async def test_a_logprob_that_is_no_number_processes_as_missing_live_and_read_back(
    scripted: Any, tmp_path: Path, missing: Any
) -> None:
    """results.jsonl writes a logprob that is null or not a finite number as null; it
    read back as `float(None)`, a TypeError, and a live null failed the same way. Both
    are a token without a logprob: 0.0, as when the server sends no logprobs at all."""
    server = await scripted((200, chat_body([-0.5, missing]), {}))
    live, resumed, records = await run_and_resume(server, tmp_path)
    content = records[0]["state"]["responses"][0]["choices"][0]["logprobs"]["content"]
    assert content[1]["logprob"] is None  # strict JSON: what a reader must cope with
    assert live.completion_logprobs == [[-0.5, 0.0]]
    assert resumed == live
    assert live.completion_ids == [[104, 105]]
