"""generate / evaluate: outputs, order, sync entry points, clients and concurrency."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import datasets
import openai
import pytest

import vfgym as vf
from vfgym.engine.runner import normalize_inputs, run_batch
from vfgym.envs import Environment, SingleTurnEnv
from vfgym.inference.server import ByteTokenizer, ModelServer
from vfgym.results.jsonl import read_results
from vfgym.rubrics import Rubric
from vfgym.types import GenerateInputs, GenerateOutputs, Messages, State

QUESTIONS = ["alpha", "beta", "gamma", "delta"]


def shout(messages: Messages) -> str:
    return messages[-1]["content"].upper()


def matches(completion: Messages, answer: str) -> float:
    return 1.0 if completion[-1]["content"] == answer else 0.0


def make_env(n: int = 4) -> SingleTurnEnv:
    rows = [{"question": q, "answer": q.upper()} for q in QUESTIONS[:n]]
    return SingleTurnEnv(dataset=rows, rubric=Rubric(funcs=[matches]))


def check_outputs(out: GenerateOutputs, questions: list[str]) -> None:
    assert isinstance(out, GenerateOutputs)
    assert [p[-1]["content"] for p in out.prompt] == questions
    assert [c[-1]["content"] for c in out.completion] == [q.upper() for q in questions]
    assert out.answer == [q.upper() for q in questions]
    assert out.reward == [1.0] * len(questions)
    assert out.metrics["matches"] == [1.0] * len(questions)
    assert [s["completion"] for s in out.state] == out.completion
    assert out.metadata["num_rollouts"] == len(questions)
    assert out.metadata["num_errored"] == 0
    assert out.metadata["avg_reward"] == 1.0
    assert out.metadata["status"] == "complete"


async def test_outputs_keep_input_order_when_rollouts_finish_out_of_order(model_server) -> None:
    async def slow_first(messages: Messages) -> str:
        text = messages[-1]["content"]
        await asyncio.sleep({"alpha": 0.2, "beta": 0.1}.get(text, 0))
        return text.upper()

    server = await model_server(slow_first)
    finished: list[str] = []
    inputs = GenerateInputs(
        prompt=[[{"role": "user", "content": q}] for q in QUESTIONS],
        answer=[q.upper() for q in QUESTIONS],
        info=[{"i": i} for i in range(4)],
        task=["t"] * 4,
    )
    out = await make_env().generate(
        inputs,
        server.client(),
        "m",
        on_result=lambda record: finished.append(record["answer"]),
    )
    check_outputs(out, QUESTIONS)
    assert finished[-1] == "ALPHA" and finished[-2] == "BETA"  # they did finish last
    assert out.info == [{"i": i} for i in range(4)]
    assert out.task == ["t"] * 4
    assert out.example_id == [0, 1, 2, 3]
    assert list(GenerateOutputs.model_fields)[:8] == [
        "prompt",
        "completion",
        "answer",
        "state",
        "info",
        "task",
        "reward",
        "metrics",
    ]


@pytest.mark.parametrize("shape", ["columns", "rows", "datasets"])
async def test_generate_accepts_columns_rows_and_datasets(model_server, shape: str) -> None:
    server = await model_server(shout)
    rows = [{"question": q, "answer": q.upper()} for q in QUESTIONS[:2]]
    inputs: Any = {
        "columns": {"question": QUESTIONS[:2], "answer": [q.upper() for q in QUESTIONS[:2]]},
        "rows": rows,
        "datasets": datasets.Dataset.from_list(rows),
    }[shape]
    out = await make_env().generate(inputs, server.client(), "m")
    check_outputs(out, QUESTIONS[:2])


async def test_num_examples_and_unknown_arguments(model_server) -> None:
    server = await model_server(shout)
    env = make_env()
    out = await env.evaluate(server.client(), "m", num_examples=2)
    check_outputs(out, QUESTIONS[:2])
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['temprature'\]"):
        await env.evaluate(server.client(), "m", temprature=0.5)
    assert len(server.requests) == 2


async def test_verifiers_scheduling_knobs_are_accepted(model_server) -> None:
    server = await model_server(shout)
    out = await make_env(2).evaluate(
        server.client(),
        "m",
        max_concurrent_generation=2,
        max_concurrent_scoring=2,
        interleave_scoring=False,
        save_every=1,
    )
    check_outputs(out, QUESTIONS[:2])


async def test_without_scoring_rewards_are_nan_and_nothing_is_errored(model_server) -> None:
    server = await model_server(shout)
    out = await make_env(2).evaluate(server.client(), "m", score_rollouts=False)
    assert all(math.isnan(r) for r in out.reward)
    assert out.metadata["num_errored"] == 0


async def test_a_custom_rollout_that_raises_is_recorded_and_the_batch_completes(
    model_server,
) -> None:
    class Flaky(Environment):
        async def rollout(self, client, model, prompt, completion=None, answer="", **kwargs):
            if answer == "BETA":
                raise LookupError("no board for beta")
            return [{"role": "assistant", "content": answer}], {"turn": 1, "completion": []}

    env = Flaky(
        dataset=[{"question": q, "answer": q.upper()} for q in QUESTIONS],
        rubric=Rubric(funcs=[matches]),
    )
    server = await model_server(shout)
    out = await env.evaluate(server.client(), "m")
    assert out.state[1]["error"] == {"type": "LookupError", "message": "no board for beta"}
    assert math.isnan(out.reward[1])
    assert [out.reward[i] for i in (0, 2, 3)] == [1.0, 1.0, 1.0]
    assert out.metadata["num_errored"] == 1
    assert out.metadata["avg_reward"] == 1.0


def test_sync_entry_points_from_plain_sync_code() -> None:
    with ModelServer(shout).running() as server:
        env = make_env()
        check_outputs(env.evaluate_sync(server.sync_client(), "m"), QUESTIONS)
        check_outputs(env.evaluate_sync(server.client(), "m", num_examples=2), QUESTIONS[:2])
        rows = env.get_eval_dataset(n=3)
        check_outputs(env.generate_sync(rows, server.sync_client(), "m"), QUESTIONS[:3])


async def test_sync_entry_points_inside_a_running_event_loop() -> None:
    with ModelServer(shout).running() as server:
        env = make_env()
        check_outputs(env.evaluate_sync(server.client(), "m"), QUESTIONS)
        check_outputs(
            env.generate_sync(env.get_dataset(n=2), server.sync_client(), "m"), QUESTIONS[:2]
        )
        # The loop this test runs on is still usable afterwards.
        await asyncio.sleep(0)


def test_one_async_client_serves_several_sync_runs() -> None:
    with ModelServer(shout).running() as server:
        env = make_env(2)
        client = server.client()
        for _ in range(3):  # each run has its own event loop
            check_outputs(env.evaluate_sync(client, "m"), QUESTIONS[:2])
            check_outputs(env.generate_sync(env.get_dataset(), client, "m"), QUESTIONS[:2])


async def test_an_async_client_used_on_this_loop_also_serves_sync_runs() -> None:
    with ModelServer(shout).running() as server:
        env = make_env(2)
        client = server.client()
        check_outputs(await env.evaluate(client, "m"), QUESTIONS[:2])
        check_outputs(env.evaluate_sync(client, "m"), QUESTIONS[:2])
        check_outputs(await env.evaluate(client, "m"), QUESTIONS[:2])


async def test_async_evaluate_with_a_sync_openai_client(model_server) -> None:
    server = await model_server(shout)
    client = server.sync_client()
    assert isinstance(client, openai.OpenAI)
    out = await make_env().evaluate(client, "m")
    check_outputs(out, QUESTIONS)
    assert out.metadata["base_url"] == server.base_url + "/"


def test_the_async_twin_of_a_sync_client_keeps_its_settings() -> None:
    from vfgym.engine.runner import as_async_client

    sync = openai.OpenAI(
        base_url="http://127.0.0.1:9/v1",
        api_key="key",
        project="proj",
        timeout=12.5,
        max_retries=1,
        default_headers={"X-Gateway-Key": "secret"},
        default_query={"api-version": "2024-01-01"},
    )
    twin = as_async_client(sync)
    assert isinstance(twin, openai.AsyncOpenAI)
    assert (twin.api_key, twin.base_url, twin.project) == ("key", sync.base_url, "proj")
    assert (twin.timeout, twin.max_retries) == (12.5, 1)
    assert twin.default_headers["X-Gateway-Key"] == "secret"
    assert twin.default_query == {"api-version": "2024-01-01"}


async def test_rollout_called_directly_with_a_sync_client(model_server) -> None:
    server = await model_server(shout)
    completion, state = await make_env().rollout(
        server.sync_client(), "m", [{"role": "user", "content": "hey"}]
    )
    assert completion == [{"role": "assistant", "content": "HEY"}]
    assert state["stop_reason"] == "completed"


class Gate:
    """A policy that holds each request until `expected` are in flight at once.

    It records the peak number of concurrent requests. Holding requests makes
    sure the peak really reaches `expected` when the scheduler allows it, however
    slowly requests arrive; if fewer can ever be in flight, each request gives up
    waiting after `patience` seconds.
    """

    def __init__(self, expected: int, patience: float = 0.5) -> None:
        self.expected = expected
        self.patience = patience
        self.in_flight = 0
        self.peak = 0
        self.released = 0
        self.full = asyncio.Event()

    async def __call__(self, messages: Messages) -> str:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        if self.in_flight >= self.expected:
            self.full.set()
        try:
            await asyncio.wait_for(self.full.wait(), self.patience)
            self.released += 1
        except TimeoutError:
            pass
        finally:
            self.in_flight -= 1
            if self.in_flight == 0:
                self.full.clear()
        return shout(messages)


async def test_ten_rollouts_run_at_once(model_server) -> None:
    gate = Gate(expected=10, patience=10)
    server = await model_server(gate)
    rows = [{"question": f"q{i}", "answer": f"Q{i}"} for i in range(10)]
    env = SingleTurnEnv(dataset=rows, rubric=Rubric(funcs=[matches]))
    out = await env.evaluate(server.client(), "m")
    assert gate.peak == 10
    assert gate.released == 10
    assert out.reward == [1.0] * 10


async def test_max_concurrent_is_respected(model_server) -> None:
    gate = Gate(expected=3, patience=2)
    server = await model_server(gate)
    rows = [{"question": f"q{i}", "answer": f"Q{i}"} for i in range(9)]
    env = SingleTurnEnv(dataset=rows, rubric=Rubric(funcs=[matches]))
    out = await env.evaluate(server.client(), "m", max_concurrent=3)
    assert gate.peak == 3  # reached, never exceeded
    assert out.reward == [1.0] * 9


@pytest.mark.parametrize(("max_concurrent", "peak", "patience"), [(-1, 150, 10), (100, 100, 3)])
async def test_rollouts_that_wait_fill_the_limit_across_launch_slices(
    model_server, max_concurrent: int, peak: int, patience: float
) -> None:
    """Workers start a slice (64) at a time; waiting rollouts still reach the limit.
    (With a limit of 100, the last 50 requests wait out `patience`: they never make 100.)"""
    gate = Gate(expected=peak, patience=patience)
    server = await model_server(gate)
    rows = [{"question": f"q{i}", "answer": f"Q{i}"} for i in range(150)]
    env = SingleTurnEnv(dataset=rows, rubric=Rubric(funcs=[matches]))
    out = await env.evaluate(server.client(), "m", max_concurrent=max_concurrent)
    assert gate.peak == peak
    assert out.reward == [1.0] * 150
    assert [p[-1]["content"] for p in out.prompt] == [f"q{i}" for i in range(150)]


async def test_a_shared_semaphore_limits_several_batches(model_server) -> None:
    gate = Gate(expected=2, patience=2)
    server = await model_server(gate)
    env = make_env()
    limit = asyncio.Semaphore(2)
    client = server.client()
    first, second = await asyncio.gather(
        env.evaluate(client, "m", semaphore=limit), env.evaluate(client, "m", semaphore=limit)
    )
    assert gate.peak == 2
    check_outputs(first, QUESTIONS)
    check_outputs(second, QUESTIONS)


def test_outputs_repr_gives_column_lengths_not_every_rollout() -> None:
    with ModelServer(shout).running() as server:
        out = make_env().evaluate_sync(server.client(), "m")
    text = repr(out)
    assert "reward=<4 items>" in text and "'matches': <4 items>" in text
    assert "ALPHA" not in text  # no rollout's content
    assert out.reward == [1.0] * 4  # the data itself is untouched


class _CountedRepr:
    reprs = 0

    def __repr__(self) -> str:
        type(self).reprs += 1
        return "counted"


def test_sync_runs_never_format_their_result() -> None:
    """asyncio.run formats its main task's repr, result included, on Python 3.11/3.12;
    for a large GenerateOutputs that took longer than the rollouts themselves."""
    from vfgym.engine._async import run_sync

    async def produce() -> _CountedRepr:
        return _CountedRepr()

    result = run_sync(produce())
    assert isinstance(result, _CountedRepr) and _CountedRepr.reprs == 0


async def test_rewards_see_the_info_and_prompt_that_setup_state_left(model_server) -> None:
    class Hinted(SingleTurnEnv):
        def setup_state(self, state: Any, **kwargs: Any) -> Any:
            state["info"]["hint"] = state["answer"]  # drawn at setup, as a game draws a board
            state["prompt"] = [*state["prompt"], {"role": "user", "content": "Shout it."}]
            return state

    def hinted(info: dict[str, Any], state: Any) -> float:
        return 1.0 if info.get("hint") == state["info"].get("hint") == state["answer"] else 0.0

    def prompt_turns(prompt: Messages) -> float:
        return float(len(prompt))

    rows = [{"question": q, "answer": q.upper()} for q in QUESTIONS[:2]]
    env = Hinted(dataset=rows, rubric=Rubric(funcs=[hinted, prompt_turns], weights=[1.0, 0.0]))
    server = await model_server(shout)
    out = await env.evaluate(server.client(), "m")
    assert out.reward == [1.0, 1.0]
    assert out.metrics["prompt_turns"] == [2.0, 2.0]  # the question and the added turn


TOKENIZER = ByteTokenizer()


WANT_IDS = {"extra_body": {"return_token_ids": True}, "logprobs": True}


def rendered(prompt: Messages, completion: Messages, tools: Any) -> str:
    conversation = list(prompt) + list(completion)
    return TOKENIZER.apply_chat_template(conversation, tools=tools, tokenize=False)


class FailsOnBadAnswer(SingleTurnEnv):
    async def init_state(self, prompt, completion, answer, task, info, example_id, **kwargs):
        if answer == "bad":
            raise RuntimeError("no state for this row")
        return await super().init_state(prompt, completion, answer, task, info, example_id)


class TextRolloutFails(SingleTurnEnv):
    async def rollout(self, *args: Any, **kwargs: Any):
        raise RuntimeError("custom rollout broke")


class Hinted(SingleTurnEnv):
    """A `setup_state` that adds a turn to the prompt and draws a hint into the info."""

    def setup_state(self, state: State, **kwargs: Any) -> State:
        state["info"]["hint"] = state["answer"]
        state["prompt"] = [*state["prompt"], {"role": "user", "content": "Shout it."}]
        return state


def shout_question(messages: list[dict[str, Any]]) -> str:
    return messages[0]["content"].upper()


def hinted(info: dict[str, Any], prompt: Messages) -> float:
    return float(info.get("hint") is not None and len(prompt) == 2)


async def test_run_rollouts_reports_a_failed_rollout_and_keeps_the_others(model_server) -> None:
    server = await model_server(lambda messages: messages[-1]["content"].upper())
    env = FailsOnBadAnswer(dataset=[{"question": "q"}])
    prompts = [[{"role": "user", "content": q}] for q in ("a", "b", "c")]
    pairs = await env.run_rollouts(
        server.client(), "m", prompts, answers=["A", "bad", "C"], max_concurrent=2
    )
    assert [c[-1]["content"] if c else None for c, _ in pairs] == ["A", None, "C"]
    failed = pairs[1][1]
    assert failed["error"] == {"type": "RuntimeError", "message": "no state for this row"}
    assert failed["stop_reason"] == "error" and failed["answer"] == "bad"
    assert not pairs[0][1].get("error") and not pairs[2][1].get("error")


async def test_an_errored_text_rollout_has_a_text_completion(model_server) -> None:
    server = await model_server(lambda prompt: "never asked")
    env = TextRolloutFails(dataset=[{"prompt": "Once"}], message_type="completion")
    out = await env.evaluate(server.client(), "m")
    assert out.state[0]["error"]["message"] == "custom rollout broke"
    assert out.completion == [""] and out.state[0]["completion"] == ""
    assert math.isnan(out.reward[0])
    processed = env.process_env_results(
        out.prompt, out.completion, out.state, out.reward, TOKENIZER
    )
    assert processed.completion_ids == [[]] and processed.rewards == [0.0]


@pytest.mark.parametrize("kind", ["chat", "completion"])
def test_errored_state_matches_the_message_type(kind: str) -> None:
    from vfgym.engine.state import errored_state

    prompt: Messages = "Once" if kind == "completion" else [{"role": "user", "content": "q"}]
    state = errored_state(kind, prompt, "a", "t", {"k": 1}, 3, ValueError("boom"))
    assert state["completion"] == ("" if kind == "completion" else [])
    assert state["error"] == {"type": "ValueError", "message": "boom"}
    assert (state["stop_reason"], state["is_truncated"], state["example_id"]) == ("error", False, 3)


async def test_outputs_hold_the_prompt_the_model_saw(model_server, tmp_path) -> None:
    server = await model_server(shout_question)
    env = Hinted(dataset=[{"question": "hi", "answer": "HI"}], rubric=vf.Rubric(funcs=[hinted]))
    out = await env.evaluate(
        server.client(), "m", sampling_args=WANT_IDS, results_path=tmp_path / "run"
    )
    assert out.reward == [1.0]
    assert out.prompt[0] == out.state[0]["prompt"] and len(out.prompt[0]) == 2
    assert out.info[0]["hint"] == "HI"
    batch = env.process_env_results(out.prompt, out.completion, out.state, out.reward, TOKENIZER)
    ids = batch.prompt_ids[0] + batch.completion_ids[0]
    assert TOKENIZER.decode(ids) == rendered(out.state[0]["prompt"], out.completion[0], None)
    # re-scoring the outputs gives what generate gave
    again = await env.rubric.score_rollouts(
        out.prompt, out.completion, out.answer, [{}], out.task, out.info
    )
    assert again.reward == out.reward
    # and the result line on disk says the same, as does a resumed run
    record = read_results(tmp_path / "run")[1][0]
    assert record["prompt"] == out.prompt[0] and record["info"]["hint"] == "HI"
    resumed = await env.evaluate(
        server.client(), "m", sampling_args=WANT_IDS, results_path=tmp_path / "run", resume=True
    )
    assert resumed.prompt == out.prompt and resumed.info == out.info


GO = [{"role": "user", "content": "go"}]


def target(info: dict[str, Any]) -> float:
    """The reward is the row's `info["target"]`, so a lost or mangled info shows."""
    return float(info["target"])


def info_env() -> SingleTurnEnv:
    return SingleTurnEnv(dataset=[{"question": "q"}], rubric=Rubric(funcs=[target]))


def say_ok(messages: Messages) -> str:
    return "ok"


def plain_rows() -> list[dict[str, Any]]:
    """Four examples, each once, as a caller who expects generate to repeat them has."""
    return make_env().get_eval_inputs(4)


@pytest.mark.parametrize("shape", ["rows", "datasets"])
async def test_json_text_info_next_to_a_prompt_becomes_a_dict(model_server, shape: str) -> None:
    """Hugging Face datasets often store `info` as JSON text; rows with a ready prompt
    must read it as rows with a question do."""
    rows = [{"prompt": GO, "info": '{"target": 3}'}, {"prompt": GO, "info": '{"target": 5}'}]
    inputs: Any = datasets.Dataset.from_list(rows) if shape == "datasets" else rows
    server = await model_server(say_ok)
    out = await info_env().generate(inputs, server.client(), "m")
    assert out.info == [{"target": 3}, {"target": 5}]
    assert out.reward == [3.0, 5.0]
    assert [s["info"] for s in out.state] == [{"target": 3}, {"target": 5}]


@pytest.mark.parametrize("info", ['{"target": 3, "deck": [1, 2]}', "", "  ", None, {"target": 3}])
def test_both_input_paths_read_info_alike(info: Any) -> None:
    """Rows with a prompt and rows with a question (formatted by `format_dataset`) give
    the same `info` for the same column value."""
    env = info_env()
    with_prompt = normalize_inputs(env, [{"prompt": GO, "info": info}])
    with_question = normalize_inputs(env, [{"question": "go", "info": info}])
    assert with_prompt[0]["info"] == with_question[0]["info"]
    assert isinstance(with_prompt[0]["info"], dict)


@pytest.mark.parametrize(
    ("info", "error"),
    [("[1, 2]", TypeError), ("3", TypeError), ("not json", ValueError), ('"text"', TypeError)],
)
async def test_info_text_that_is_not_a_json_object_says_what_info_must_be(
    model_server, info: str, error: type[Exception]
) -> None:
    server = await model_server(say_ok)
    rows = [{"prompt": GO, "info": '{"target": 1}'}, {"prompt": GO, "info": info}]
    with pytest.raises(error, match=r"input row 1: .*'info' must be a dict or the JSON text"):
        await info_env().generate(rows, server.client(), "m")
    assert server.requests == []


@pytest.mark.parametrize(
    ("rows", "why"),
    [
        (plain_rows, r"rows 0 and 1 have example_ids 0 and 1"),
        (lambda: plain_rows()[:3], r"3 input rows are not groups of 2"),
        (
            lambda: [{"question": q, "answer": q.upper()} for q in QUESTIONS],
            r"rows 0 and 1 have example_ids 0 and 1",
        ),
        (
            lambda: [{"prompt": [{"role": "user", "content": q}]} for q in QUESTIONS],
            r"rows 0 and 1 have example_ids 0 and 1",
        ),
    ],
    ids=["dataset-rows", "not-a-multiple", "question-rows", "prompt-rows"],
)
async def test_rows_not_repeated_for_rollouts_per_example_are_refused_before_anything_runs(
    model_server, tmp_path: Path, rows: Any, why: str
) -> None:
    """generate runs one rollout per row: rows not in groups of `rollouts_per_example`
    copies would silently get one rollout each and wrong `num_examples` metadata."""
    server = await model_server(shout)
    with pytest.raises(ValueError, match=why) as refused:
        await make_env().generate(
            rows(), server.client(), "m", rollouts_per_example=2, results_path=tmp_path
        )
    message = str(refused.value)
    assert "one rollout per input row" in message
    assert "env.get_eval_inputs(n, 2)" in message
    assert "rollouts_per_example=1" in message
    assert server.requests == []
    assert list(tmp_path.iterdir()) == []


async def test_run_batch_refuses_ungrouped_rows_too(model_server) -> None:
    server = await model_server(shout)
    with pytest.raises(ValueError, match="not copies of one example"):
        await run_batch(
            make_env(), plain_rows(), client=server.client(), model="m", rollouts_per_example=2
        )
    assert server.requests == []


def test_generate_sync_refuses_ungrouped_rows() -> None:
    with ModelServer(shout).running() as server:
        with pytest.raises(ValueError, match="not copies of one example"):
            make_env().generate_sync(
                plain_rows(), server.sync_client(), "m", rollouts_per_example=2
            )
        assert server.requests == []


@pytest.mark.parametrize("per", [0, -1])
async def test_rollouts_per_example_below_one_is_refused(model_server, per: int) -> None:
    server = await model_server(shout)
    with pytest.raises(ValueError, match=rf"rollouts_per_example must be at least 1, not {per}"):
        await make_env().generate(plain_rows(), server.client(), "m", rollouts_per_example=per)
    assert server.requests == []


async def test_grouped_rows_run_each_copy_and_count_examples(model_server) -> None:
    """The rows `get_eval_inputs` makes are the groups `rollouts_per_example` describes."""
    server = await model_server(shout)
    env = make_env()
    out = await env.generate(
        env.get_eval_inputs(2, rollouts_per_example=2), server.client(), "m", rollouts_per_example=2
    )
    check_outputs(out, ["alpha", "alpha", "beta", "beta"])
    assert out.example_id == [0, 0, 1, 1]
    assert out.metadata["num_examples"] == 2 and out.metadata["rollouts_per_example"] == 2
    sliced = await env.generate(
        env.get_eval_inputs(rollouts_per_example=3),
        server.client(),
        "m",
        rollouts_per_example=3,
        num_examples=1,
    )
    check_outputs(sliced, ["alpha"] * 3)


async def test_evaluate_still_repeats_rows_itself(model_server) -> None:
    server = await model_server(shout)
    out = await make_env(2).evaluate(server.client(), "m", rollouts_per_example=3)
    check_outputs(out, ["alpha"] * 3 + ["beta"] * 3)
    assert out.metadata["num_examples"] == 2 and out.metadata["num_inputs"] == 6
