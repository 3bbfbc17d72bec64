"""Input rows `generate` is given: `info` as JSON text, and rows that are not the groups
`rollouts_per_example` says they are.

Every test runs a real environment against the project's own model server on
loopback; the helpers are those of tests/test_generate.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import datasets
import pytest
from test_generate import QUESTIONS, check_outputs, make_env, shout

from vfgym.engine.runner import normalize_inputs, run_batch
from vfgym.envs import SingleTurnEnv
from vfgym.inference.server import ModelServer
from vfgym.rubrics import Rubric
from vfgym.types import Messages

GO = [{"role": "user", "content": "go"}]


def target(info: dict[str, Any]) -> float:
    """The reward is the row's `info["target"]`, so a lost or mangled info shows."""
    return float(info["target"])


def info_env() -> SingleTurnEnv:
    return SingleTurnEnv(dataset=[{"question": "q"}], rubric=Rubric(funcs=[target]))


def say_ok(messages: Messages) -> str:
    return "ok"


# -- info given as JSON text ----------------------------------------------------------------


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


# -- rows and rollouts_per_example ------------------------------------------------------------


def plain_rows() -> list[dict[str, Any]]:
    """Four examples, each once, as a caller who expects generate to repeat them has."""
    return make_env().get_eval_inputs(4)


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
