"""vfgym against a real CPU vLLM serving a tiny random-weight model (see conftest.py).

The model's answers are noise, so these tests assert what vfgym makes of a real
server's responses (results written, finish reasons, truncation, tool calls, token
ids), never how good the answers are.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from openai import AsyncOpenAI, OpenAI
from transport_paths import ClientPath, client_path_fixture  # noqa: F401  (the fixture)
from vllm_process import MAX_MODEL_LEN, VLLMServer

import vfgym as vf
from vfgym.engine.seeds import rollout_seed
from vfgym.training.processing import ServerTokenizer, response_field

#: Asks vLLM for the prompt's and the answer's token ids with every response.
TOKEN_IDS = {"extra_body": {"return_token_ids": True}}
#: Few tokens per turn: the model is noise, and two CPU cores are shared.
SHORT = {"max_tokens": 12, "temperature": 1.0}


@pytest.fixture
async def client(vllm_server: VLLMServer, client_path: ClientPath) -> AsyncIterator[AsyncOpenAI]:
    """The real openai client, pointed at the test's vLLM (which checks no key), closed
    on the test's own event loop; each test runs once with its calls through the openai
    SDK and once through vfgym's transport (`client_path`)."""
    async with AsyncOpenAI(
        base_url=vllm_server.base_url, api_key="EMPTY", max_retries=0
    ) as openai_client:
        yield openai_client


def one_question_env(question: str, copies: int = 1) -> vf.SingleTurnEnv:
    """A single-turn environment asking `question`, scored 1 for any reply."""

    def replied(completion: Any, **kwargs: Any) -> float:
        return 1.0 if completion else 0.0

    rows = [{"prompt": [{"role": "user", "content": question}], "answer": ""}] * copies
    return vf.SingleTurnEnv(dataset=rows, rubric=vf.Rubric(funcs=[replied]))


def chat_messages(completion: Any) -> list[dict[str, Any]]:
    """A chat rollout's completion as the list of message dicts it is."""
    assert isinstance(completion, list), f"not a chat completion: {completion!r}"
    return completion


def sampled_ids(response: Any) -> tuple[list[int], list[int]]:
    """The prompt ids vLLM generated from and the ids it generated, as its response says
    (`return_token_ids`; in token-exact mode the completion's own, kept on the response)."""
    prompt_ids = response_field(response, "prompt_token_ids")
    generated = response_field(response.choices[0], "token_ids")
    assert prompt_ids and generated is not None, "vLLM sent no token ids"
    return list(prompt_ids), list(generated)


# ------------------------------------------------------------------ vfgym eval (CLI)


@pytest.mark.parametrize("env_id", ["guess-the-number", "tictactoe", "calculator"])
def test_vfgym_eval_against_vllm_writes_results(
    vllm_server: VLLMServer, env_id: str, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "vfgym",
        "eval",
        env_id,
        "--base-url",
        vllm_server.base_url,
        "-m",
        vllm_server.model,
        "-n",
        "2",
        "-r",
        "2",
        "-S",
        json.dumps(SHORT),
        "-o",
        str(out),
        "--no-progress",
    ]
    done = subprocess.run(
        command,
        env={**os.environ, "OPENAI_API_KEY": "EMPTY"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"vfgym eval failed:\n{done.stdout}\n{done.stderr}"
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(row["example_id"] for row in rows) == [0, 0, 1, 1]
    for row in rows:
        assert row.get("error") is None, row["error"]
        assert isinstance(row["reward"], float) and 0.0 <= row["reward"] <= 1.0
        replies = [m for m in row["completion"] if m["role"] == "assistant"]
        assert replies, "a rollout without a single model reply"
        assert row["completion_tokens"] > 0
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["model"] == vllm_server.model
    assert metadata["base_url"].rstrip("/") == vllm_server.base_url
    assert metadata["sampling_args"] == SHORT


# ------------------------------------------------------------------ sampling arguments


async def test_the_request_carries_the_sampling_args_given(
    vllm_server: VLLMServer, client: AsyncOpenAI
) -> None:
    env = one_question_env("Name a colour.")
    given = {
        "temperature": 0.37,
        "top_p": 0.83,
        "max_tokens": 9,
        "seed": 4242,
        "frequency_penalty": 0.25,
        "top_k": 17,  # not an openai-client argument: vfgym sends it in extra_body
    }
    out = await env.evaluate(client, vllm_server.model, sampling_args=given)
    (response,) = out.state[0]["responses"]
    logged = [line for line in vllm_server.log().splitlines() if response.id in line]
    params = " ".join(line for line in logged if "SamplingParams(" in line)
    assert params, f"no request log line for {response.id} in {vllm_server.log_path}"
    for expected in (
        "temperature=0.37",
        "top_p=0.83",
        "top_k=17",
        f"seed={rollout_seed(4242, 0)}",  # the rollout's own, derived from the given one
        "frequency_penalty=0.25",
        "max_tokens=9",
    ):
        assert expected in params, f"{expected} missing from {params}"
    assert response.usage.completion_tokens <= 9


# ------------------------------------------------------------------ truncation


async def test_a_last_reply_cut_at_max_tokens_ends_the_rollout_truncated(
    vllm_server: VLLMServer, client: AsyncOpenAI
) -> None:
    env = vf.load_environment("guess-the-number", num_examples=2, seed=0)
    # A bias against the end of turn: the reply always runs into max_tokens.
    never_end = str(end_of_turn(vllm_server))
    out = await env.evaluate(
        client,
        vllm_server.model,
        sampling_args={**TOKEN_IDS, "max_tokens": 5, "logit_bias": {never_end: -100}},
        num_examples=2,
    )
    for state in out.state:
        assert state.get("error") is None
        # A cut reply is an invalid move the game answers, not an end of the episode; the
        # episode ends (the game's own move limit) with its last reply cut too, and that
        # makes the rollout truncated.
        finishes = {response.choices[0].finish_reason for response in state["responses"]}
        assert finishes == {"length"}
        assert state["stop_reason"] == "length"
        assert state["is_truncated"] is True
    # ... and a trainer masks it: a cut reply is no answer to learn from.
    with ServerTokenizer(vllm_server.base_url, vllm_server.model) as tokenizer:
        processed = env.process_env_results(
            out.prompt,
            out.completion,
            out.state,
            out.reward,
            tokenizer,
            mask_truncated_completions=True,
        )
    assert processed.is_truncated == [True, True]
    assert all(not any(mask) for mask in processed.completion_mask)


def end_of_turn(server: VLLMServer) -> int:
    """The tiny model's `<|im_end|>` id, read from the tokenizer it was made with."""
    added = json.loads((server.model_dir / "tokenizer.json").read_text())["added_tokens"]
    return next(token["id"] for token in added if token["content"] == "<|im_end|>")


async def test_a_prompt_longer_than_the_window_errors_the_rollout(
    vllm_server: VLLMServer,
    client: AsyncOpenAI,
) -> None:
    words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()
    question = " ".join(f"{words[i % len(words)]}{i}" for i in range(3000))
    with ServerTokenizer(vllm_server.base_url, vllm_server.model) as tokenizer:
        assert len(tokenizer.encode(question)) > MAX_MODEL_LEN  # really past the window
    env = one_question_env(question, copies=2)
    out = await env.evaluate(client, vllm_server.model, sampling_args=SHORT)
    # A rollout the model never answered is no wrong answer: errored, reward NaN, vLLM's
    # own message kept; the batch completes.
    for state, reward in zip(out.state, out.reward, strict=True):
        assert state["stop_reason"] == "error"
        assert state["error"]["type"] == "NoModelTurnError"
        assert str(MAX_MODEL_LEN) in state["error"]["message"]  # vLLM's words, kept
        assert math.isnan(reward)
    assert out.completion[0] == []
    assert out.metadata["status"] == "complete_with_errors"


# ------------------------------------------------------------------ concurrency


async def _most_requests_running(metrics_url: str, stop: asyncio.Event) -> int:
    """The most requests vLLM's scheduler ran at once, polled from its /metrics gauge."""
    most = 0
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
        while not stop.is_set():
            async with http.get(metrics_url) as response:
                text = await response.text()
            for value in re.findall(r"^vllm:num_requests_running\{[^}]*\} ([0-9.]+)$", text, re.M):
                most = max(most, int(float(value)))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.05)
    return most


async def test_32_concurrent_rollouts_complete(
    vllm_server: VLLMServer, client: AsyncOpenAI
) -> None:
    env = vf.load_environment("guess-the-number", num_examples=8, seed=1)
    stop = asyncio.Event()
    metrics_url = vllm_server.base_url.removesuffix("/v1") + "/metrics"
    watcher = asyncio.create_task(_most_requests_running(metrics_url, stop))
    try:
        out = await env.evaluate(
            client,
            vllm_server.model,
            sampling_args={"max_tokens": 6},
            num_examples=8,
            rollouts_per_example=4,
            max_concurrent=32,
        )
    finally:
        stop.set()
    most_running = await watcher
    assert len(out.state) == 32
    assert out.example_id == [i for i in range(8) for _ in range(4)]
    for state in out.state:
        assert state.get("error") is None, state.get("error")
        assert state["responses"], "a rollout that never got a response"
    # vLLM ran them together: its scheduler's gauge of running requests went past one
    # (its periodic log line, every 10 s, can miss a batch this short).
    assert most_running > 1


# ------------------------------------------------------------------ tool calls


@pytest.mark.parametrize(
    "tool_choice",
    ["required", {"type": "function", "function": {"name": "calculator"}}],
    ids=["required", "named"],
)
async def test_forced_tool_calls_reach_the_tool_env_and_are_answered(
    vllm_server: VLLMServer, client: AsyncOpenAI, tool_choice: Any
) -> None:
    # Random weights never call a tool unprompted; a forced tool_choice makes vLLM produce
    # the call under its structured-output grammar. vLLM 0.32 CPU fills the arguments with
    # any JSON (seen: "[]", "\"\""), so ToolEnv answers most calls with its argument
    # error: what is asserted is that every call reaches ToolEnv and gets its tool message.
    env = vf.load_environment("calculator", num_examples=1, max_turns=2, seed=0)
    out = await env.evaluate(
        client,
        vllm_server.model,
        sampling_args={"tool_choice": tool_choice, "max_tokens": 200, "temperature": 1.0},
        num_examples=1,
    )
    (state,) = out.state
    assert state.get("error") is None, state.get("error")
    completion = chat_messages(out.completion[0])
    replies = [m for m in completion if m["role"] == "assistant"]
    calls = [call for reply in replies for call in reply.get("tool_calls") or []]
    assert calls, f"vLLM returned no tool call under tool_choice={tool_choice!r}: {completion}"
    assert all(call["function"]["name"] == "calculator" for call in calls)
    answered = {m["tool_call_id"] for m in completion if m["role"] == "tool"}
    # Each call got its tool message: the result, or what was wrong with its arguments.
    assert {call["id"] for call in calls} <= answered


# ------------------------------------------------------------------ token-level data


async def test_single_turn_ids_equal_the_servers_prompt_and_sampled_ids(
    vllm_server: VLLMServer,
    client: AsyncOpenAI,
) -> None:
    env = one_question_env("What is the capital of France?", copies=2)
    out = await env.evaluate(
        client,
        vllm_server.model,
        sampling_args={**SHORT, **TOKEN_IDS, "logprobs": True},
        rollouts_per_example=1,
    )
    with ServerTokenizer(vllm_server.base_url, vllm_server.model) as tokenizer:
        processed = env.process_env_results(
            out.prompt, out.completion, out.state, out.reward, tokenizer
        )
    for row, state in enumerate(out.state):
        (response,) = state["responses"]
        prompt_ids, generated = sampled_ids(response)
        assert processed.prompt_ids[row] == prompt_ids
        assert processed.completion_ids[row] == generated
        assert processed.completion_mask[row] == [1] * len(generated)
        assert len(processed.completion_logprobs[row]) == len(generated)


class Echo(vf.MultiTurnEnv):
    """A five-turn conversation: the environment answers every reply with a fixed line."""

    async def is_completed(self, messages: Any, state: vf.State, **kwargs: Any) -> bool:
        return state["turn"] >= 5

    def env_response(self, messages: Any, state: vf.State, **kwargs: Any) -> Any:
        return [{"role": "user", "content": "Go on."}], state


def assert_every_turn_exact(processed: vf.ProcessedOutputs, state: vf.State, rollout: int) -> None:
    """For every turn, the ids vLLM reports it generated from (`prompt_token_ids`) and
    sampled (`token_ids`) are a prefix of the row `process_env_results` gives for it;
    the mask is 1 exactly on the sampled ids and their logprobs are the server's."""
    rows = [k for k, index in enumerate(processed.rollout_index) if index == rollout]
    assert len(rows) == state["token_samples"]
    sampled: list[int] = []
    logprobs: list[float] = []
    for k in rows:
        triples = zip(
            processed.completion_ids[k],
            processed.completion_mask[k],
            processed.completion_logprobs[k],
            strict=True,
        )
        for token, mask, logprob in triples:
            if mask:
                sampled.append(token)
                logprobs.append(logprob)
    position = 0
    for turn, response in enumerate(state["responses"]):
        prompt_ids, generated = sampled_ids(response)
        seen = prompt_ids + generated
        owners = [
            k
            for k in rows
            if (processed.prompt_ids[k] + processed.completion_ids[k])[: len(seen)] == seen
        ]
        assert owners, f"turn {turn}: vfgym's ids are not the ids vLLM generated from"
        assert sampled[position : position + len(generated)] == generated
        served = [entry.logprob for entry in response.choices[0].logprobs.content]
        assert logprobs[position : position + len(generated)] == pytest.approx(served)
        position += len(generated)
    assert position == len(sampled), "a token with mask 1 that the model did not sample"


async def play_and_check(
    env: vf.MultiTurnEnv, server: VLLMServer, client: AsyncOpenAI, args: dict[str, Any]
) -> Any:
    """Evaluate `env` against vLLM and check every turn of every rollout is token-exact."""
    out = await env.evaluate(client, server.model, sampling_args=args, rollouts_per_example=2)
    with ServerTokenizer(server.base_url, server.model) as tokenizer:
        processed = env.process_env_results(
            out.prompt, out.completion, out.state, out.reward, tokenizer, mask_env_responses=True
        )
    for rollout, state in enumerate(out.state):
        assert state.get("error") is None, state.get("error")
        assert state["token_mode"] == "exact"  # the default against vLLM
        assert state["token_samples"] == 1  # ChatML keeps the prefix: one exact sample
        assert_every_turn_exact(processed, state, rollout)
    return out


def echo_env() -> Echo:
    return Echo(dataset=[{"prompt": [{"role": "user", "content": "Tell me a story."}]}])


async def test_five_turn_rollouts_are_token_exact(
    vllm_server: VLLMServer, client: AsyncOpenAI
) -> None:
    args = {
        "max_tokens": 24,
        "temperature": 1.0,
        "seed": 7,
        # Leans the noise towards ending its turn, so turns end as a model's would.
        "logit_bias": {str(end_of_turn(vllm_server)): 4},
    }
    out = await play_and_check(echo_env(), vllm_server, client, args)
    assert all(len(state["responses"]) == 5 for state in out.state)
    # The two copies of the example got seeds of their own, so they differ.
    assert out.completion[0] != out.completion[1]


async def test_rollouts_cut_by_a_stop_string_are_token_exact(
    vllm_server: VLLMServer, client: AsyncOpenAI
) -> None:
    # A stop string ends the text inside a token vLLM keeps whole in token_ids; the next
    # turn is sent those ids, never the cut text re-tokenized.
    args = {"max_tokens": 24, "temperature": 1.0, "seed": 3, "stop": ["e", "a"]}
    out = await play_and_check(echo_env(), vllm_server, client, args)
    finishes = {r.choices[0].finish_reason for s in out.state for r in s["responses"]}
    assert "stop" in finishes


#: A hermes tool call of the calculator, as the tiny model's template writes one.
CALL_REGEX = (
    r'<tool_call>\n\{"name": "calculator", "arguments": '
    r'\{"expression": "[1-9] \+ [1-9]"\}\}\n</tool_call>'
)


async def test_hermes_tool_calls_are_parsed_run_and_token_exact(
    vllm_server: VLLMServer, client: AsyncOpenAI
) -> None:
    # Random weights call no tool on their own: vLLM's structured outputs force the text
    # of a hermes call, which vfgym parses from the sampled text, runs, and answers.
    env = vf.load_environment("calculator", num_examples=1, max_turns=3, seed=0)
    args = {
        "max_tokens": 60,
        "logit_bias": {str(end_of_turn(vllm_server)): 5},
        "extra_body": {"structured_outputs": {"regex": CALL_REGEX}},
    }
    out = await play_and_check(env, vllm_server, client, args)
    for completion in out.completion:
        calls = [m for m in chat_messages(completion) if m.get("tool_calls")]
        results = [m for m in chat_messages(completion) if m["role"] == "tool"]
        assert calls and len(results) == len(calls)
        for call_turn, result in zip(calls, results, strict=True):
            (call,) = call_turn["tool_calls"]
            expression = json.loads(call["function"]["arguments"])["expression"]
            assert result["tool_call_id"] == call["id"]
            assert result["content"] == str(eval(expression))  # the tool really ran


async def test_chat_mode_compares_every_turn_with_the_servers_ids(
    vllm_server: VLLMServer, client: AsyncOpenAI
) -> None:
    """Chat mode re-renders the history from text; with return_token_ids vfgym checks
    each turn against its sequence, and splits where vLLM saw something else."""
    env = echo_env()
    env.token_mode = "chat"
    args = {"max_tokens": 24, "seed": 11, "stop": ["e"], "logprobs": True, **TOKEN_IDS}
    out = await env.evaluate(client, vllm_server.model, sampling_args=args, rollouts_per_example=2)
    with ServerTokenizer(vllm_server.base_url, vllm_server.model) as tokenizer:
        processed = env.process_env_results(
            out.prompt, out.completion, out.state, out.reward, tokenizer, mask_env_responses=True
        )
    for rollout, state in enumerate(out.state):
        assert state["token_mode"] == "chat"
        assert state["token_samples"] >= 1
        assert_every_turn_exact(processed, state, rollout)
    # A stop string cuts the text inside a token, so chat mode's next prompt is not the
    # sampled ids: the drift is found and split, not hidden.
    assert any(state["token_samples"] > 1 for state in out.state)


# ------------------------------------------------------------------ Gymnasium


def test_the_gym_adapter_plays_episodes_with_a_policy_calling_vllm(
    vllm_server: VLLMServer,
) -> None:
    import gymnasium as gym

    import vfgym.gym  # noqa: F401  (registers the vfgym/<Name>-v0 ids)

    env = gym.make("vfgym/GuessTheNumber-v0", num_examples=3)
    policy = OpenAI(base_url=vllm_server.base_url, api_key="EMPTY", max_retries=0)
    try:
        for episode in range(3):
            observation, info = env.reset(seed=episode)
            steps, done = 0, False
            while not done:
                reply = policy.chat.completions.create(
                    model=vllm_server.model,
                    messages=info["messages"],
                    max_tokens=8,
                    temperature=1.0,
                    seed=episode * 100 + steps,
                )
                action = reply.choices[0].message.content or ""
                observation, reward, terminated, truncated, info = env.step(action)
                steps += 1
                done = terminated or truncated
                assert isinstance(observation, str) and observation
            assert steps >= 1
            assert isinstance(reward, float) and not math.isnan(reward)
            assert info["messages"][-1]["role"] in ("user", "assistant")
            # The conversation the policy answered is the one the episode recorded.
            replies = [m for m in info["messages"] if m["role"] == "assistant"]
            assert len(replies) == steps
    finally:
        env.close()
        policy.close()
