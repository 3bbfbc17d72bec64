"""Metrics and logprobs as every path gives them: a logprob results.jsonl holds as
null, a metric some rollouts lack, the sync scoring path's metrics, and an integer
tool argument too long for Python to read."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from loopback_http import ScriptedServer

import vfgym as vf
from vfgym.envs import EnvGroup, SingleTurnEnv
from vfgym.gym import GymEnv
from vfgym.inference.server import ByteTokenizer
from vfgym.results.jsonl import RESULTS_FILE
from vfgym.rubrics import Rubric
from vfgym.rubrics.rubric import rollout_args
from vfgym.tools import schema as tools
from vfgym.tools.schema import Tool
from vfgym.types import Messages, State

TOKENIZER = ByteTokenizer()
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


# -- a null logprob ---------------------------------------------------------------------


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


# -- a metric some rollouts lack ---------------------------------------------------------


def matches(completion: Messages, answer: str) -> float:
    return 1.0 if completion[-1]["content"] == answer else 0.0


def length(completion: Messages) -> float:
    return float(len(completion[-1]["content"]))


def echo(messages: Messages) -> str:
    return messages[-1]["content"]


def same(a: list[float], b: list[float]) -> bool:
    return all((math.isnan(x) and math.isnan(y)) or x == y for x, y in zip(a, b, strict=True))


async def test_a_metric_a_rollout_lacks_is_nan_in_generate_and_in_score_rollouts(
    model_server: Any,
) -> None:
    """An EnvGroup's tasks have their own rubrics: a rollout of one task has no value
    for another task's metric. `generate` gave NaN there (no value, left out of the
    summary's statistics) and `score_rollouts` 0.0 (a score the rollout never got,
    pulling the mean down)."""
    server = await model_server(echo)
    first = SingleTurnEnv(dataset=[{"question": "a", "answer": "a"}], rubric=Rubric([matches]))
    second = SingleTurnEnv(dataset=[{"question": "bb", "answer": "x"}], rubric=Rubric([length]))
    group = EnvGroup([first, second], env_names=["first", "second"])
    out = await group.evaluate(server.client(), "m")
    assert out.task == ["first", "second"]
    assert out.metrics["matches"][0] == 1.0 and math.isnan(out.metrics["matches"][1])
    assert math.isnan(out.metrics["length"][0]) and out.metrics["length"][1] == 2.0

    again = await group.rubric.score_rollouts(
        out.prompt, out.completion, out.answer, out.state, out.task, out.info
    )
    assert set(again.metrics) == set(out.metrics)
    for name, column in out.metrics.items():
        assert same(again.metrics[name], column), (name, again.metrics[name], column)


# -- the sync scoring path's metrics ---------------------------------------------------


class FrozenMetricsRubric(Rubric):
    """A rubric whose own `score_values_sync` hands back a read-only view of its metrics."""

    def score_values_sync(self, *args: Any, **kwargs: Any) -> tuple[float, Mapping[str, float]]:
        reward, metrics = super().score_values_sync(*args, **kwargs)
        return reward, MappingProxyType(metrics)


def said_hi(completion: Messages) -> float:
    return 1.0 if "hi" in str(completion) else 0.0


class OneTurn(vf.MultiTurnEnv):
    def is_completed(self, messages: Messages, state: State, **kwargs: Any) -> bool:
        return state["turn"] >= 1

    def env_response(self, messages: Messages, state: State, **kwargs: Any) -> Any:
        return [{"role": "user", "content": "again"}], state


def test_score_state_sync_gives_a_plain_dict_of_metrics_as_score_rollout_does() -> None:
    rubric = FrozenMetricsRubric([said_hi])
    state = {
        "prompt": SAY_HI,
        "completion": [{"role": "assistant", "content": "hi"}],
        "answer": "",
    }
    reward, metrics = rubric.score_state_sync(state)
    assert type(metrics) is dict
    assert reward == 1.0 and metrics == {"said_hi": 1.0, "reward_errors": 0.0}
    assert type(rubric.score_rollout_sync(*rollout_args(state)).metrics) is dict


def test_the_gym_adapter_hands_out_a_plain_dict_of_metrics() -> None:
    """A mapping proxy in `info["metrics"]` cannot be edited, copied with
    `copy.deepcopy` or pickled into a vector env's worker pipe."""
    env = OneTurn(
        dataset=[{"prompt": SAY_HI, "answer": ""}], rubric=FrozenMetricsRubric([said_hi])
    )
    gym_env = GymEnv(env)
    gym_env.reset(seed=0)
    _, reward, terminated, _, info = gym_env.step("hi")
    assert terminated and reward == 1.0
    assert type(info["metrics"]) is dict and info["metrics"]["said_hi"] == 1.0
    gym_env.close()


# -- an integer argument longer than Python reads -------------------------------------


def repeat(text: str, times: int) -> str:
    """Repeat a text."""
    return text * min(times, 3)


def totals(counts: list[int]) -> int:
    """Sum counts."""
    return sum(counts)


#: Python's default limit on the digits of an integer read from text.
MAX_INTEGER_DIGITS = 4300
TOO_LONG = "9" * (MAX_INTEGER_DIGITS + 700)


@pytest.mark.parametrize(
    ("func", "arguments", "where"),
    [
        (repeat, {"text": "a", "times": TOO_LONG}, "times"),
        (repeat, {"text": "a", "times": "-" + TOO_LONG}, "times"),
        (totals, {"counts": [1, TOO_LONG]}, "counts.1"),
    ],
)
def test_an_integer_with_too_many_digits_is_named_in_the_projects_words(
    func: Any, arguments: dict[str, Any], where: str
) -> None:
    with pytest.raises(ValueError) as caught:
        Tool.from_function(func).validate(arguments)
    message = str(caught.value)
    assert (
        f"{where}: the integer has {MAX_INTEGER_DIGITS + 700} digits, too long to read; "
        f"send an integer of at most {MAX_INTEGER_DIGITS} digits"
    ) in message
    assert "exceeded maximum size" not in message and "set_int_max_str_digits" not in message


def test_a_float_too_large_for_an_integer_says_to_send_digits() -> None:
    with pytest.raises(ValueError) as caught:
        Tool.from_function(repeat).validate({"text": "a", "times": 1e20})
    message = str(caught.value)
    assert "times: 1e+20 is too large to read as an integer" in message
    assert "send the integer's digits, with no decimal point or exponent" in message
    assert Tool.from_function(repeat).validate({"text": "a", "times": 10**20})["times"] == 10**20


def test_json_arguments_with_a_too_long_integer_literal_are_refused_in_the_projects_words() -> None:
    """`json.loads` fails on such a literal with Python's own wording ("Exceeds the
    limit (4300 digits) for integer string conversion ... sys.set_int_max_str_digits()"),
    which tells the model nothing it can do."""
    assert tools.MAX_INTEGER_DIGITS == MAX_INTEGER_DIGITS
    decoder = json.JSONDecoder(parse_int=tools.read_json_integer)
    assert decoder.decode('{"n": -12, "m": [3]}') == {"n": -12, "m": [3]}
    with pytest.raises(ValueError) as caught:
        decoder.decode(f'{{"times": {TOO_LONG}}}')
    message = str(caught.value)
    assert message.startswith(
        f"an integer in the arguments has {MAX_INTEGER_DIGITS + 700} digits, too long to read"
    )
    assert f"send an integer of at most {MAX_INTEGER_DIGITS} digits" in message
    assert "set_int_max_str_digits" not in message


async def test_a_tool_env_tells_the_model_an_integer_literal_is_too_long() -> None:
    env = vf.ToolEnv(tools=[repeat], dataset=[{"prompt": SAY_HI, "answer": "ok"}])
    raw = f'{{"text": "a", "times": {TOO_LONG}}}'
    call = {"id": "c", "type": "function", "function": {"name": "repeat", "arguments": raw}}
    turn = {"role": "assistant", "content": "", "tool_calls": [call]}
    replies, _ = await env.env_response([*SAY_HI, turn], {})
    assert f"send an integer of at most {MAX_INTEGER_DIGITS} digits" in replies[0]["content"]
