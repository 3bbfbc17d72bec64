"""`vfgym.integrations.trl.policy_server`: the trainer's model behind vLLM's token-level
API, through the real openai client and plain HTTP on loopback."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import openai
import pytest
from tiny_policy import completion_logprobs, load_tiny

from vfgym.integrations.trl.policy_server import PolicyServer, parse_tool_calls

MESSAGES = [{"role": "user", "content": "Guess a number between 1 and 5."}]


def post(server: PolicyServer, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    root = server.base_url.removesuffix("/v1")
    request = urllib.request.Request(
        root + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_chat_and_token_id_completions_return_the_sampled_ids_and_their_logprobs(
    tiny_model_dir: Path,
) -> None:
    model, tokenizer = load_tiny(tiny_model_dir)
    with PolicyServer(model, tokenizer, seed=1) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        chat = client.chat.completions.create(
            model="policy",
            messages=MESSAGES,  # type: ignore[arg-type]
            max_tokens=8,
            logprobs=True,
            extra_body={"return_token_ids": True},
        )
        extra = chat.model_extra or {}
        prompt_ids = extra["prompt_token_ids"]
        ids = (chat.choices[0].model_extra or {})["token_ids"]
        logprobs = [item.logprob for item in chat.choices[0].logprobs.content]  # type: ignore[union-attr]
        assert 1 <= len(ids) == len(logprobs) <= 8
        # the prompt is the chat template's rendering, as /tokenize gives it
        status, tokenized = post(server, "/tokenize", {"messages": MESSAGES})
        assert status == 200 and tokenized["tokens"] == prompt_ids
        # the logprobs are the model's for the ids it sampled
        assert logprobs == pytest.approx(completion_logprobs(model, prompt_ids, ids), abs=2e-3)

        # token-exact continuation: the kept ids go back as a token-id prompt
        text = client.completions.create(
            model="policy",
            prompt=prompt_ids + ids,
            max_tokens=4,
            logprobs=0,
            extra_body={"return_token_ids": True},
        )
        choice = text.choices[0].model_extra or {}
        assert choice["prompt_token_ids"] == prompt_ids + ids
        assert len(choice["token_ids"]) == len(text.choices[0].logprobs.token_logprobs)  # type: ignore[union-attr, arg-type]

        status, refused = post(
            server, "/v1/chat/completions", {"messages": MESSAGES, "stop": ["\n"]}
        )
        assert status == 400 and "stop strings are not supported" in refused["error"]["message"]


def test_hermes_tool_calls_are_parsed_and_a_broken_one_stays_text() -> None:
    content, calls = parse_tool_calls(
        'Let me add.<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
    )
    assert content == "Let me add."
    assert [c["function"] for c in calls] == [{"name": "add", "arguments": '{"a": 2, "b": 3}'}]
    broken = '<tool_call>\n{"name": "add", "arguments": \n</tool_call>'
    assert parse_tool_calls(broken) == (broken, [])
