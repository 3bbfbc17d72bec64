"""Defects found by building environments from what a pandas user has: a DataFrame, or
its rows (`df.to_dict("records")`), where a missing cell is NaN, not None."""

from __future__ import annotations

import math

import pandas as pd
import pytest

import vfgym as vf
from vfgym.inference.server import ModelServer


def echo_answer(messages: list[dict[str, str]]) -> str:
    """A stand-in model that answers with the question's last word."""
    return messages[-1]["content"].split()[-1]


def exact(completion: list[dict[str, str]], answer: str) -> float:
    return float(completion[-1]["content"] == answer)


def test_a_dataframe_is_a_dataset() -> None:
    """A DataFrame was refused ("a dataset must be a datasets.Dataset, ..., not
    DataFrame") although its rows are exactly what the environment reads."""
    frame = pd.DataFrame({"question": ["say 4", "say 7"], "answer": ["4", "7"]})
    env = vf.SingleTurnEnv(dataset=frame, rubric=vf.Rubric(funcs=[exact]))
    rows = env.get_dataset()
    assert [r["answer"] for r in rows] == ["4", "7"]
    assert [r["example_id"] for r in rows] == [0, 1]
    with ModelServer(echo_answer).running() as server:
        out = env.evaluate_sync(server.sync_client(), "m")
    assert out.reward == [1.0, 1.0]


def test_missing_cells_of_a_frame_read_as_missing_not_as_nan_text() -> None:
    """A NaN answer became the answer "nan" (every reward 0, silently), a NaN task the
    task "nan", and a NaN info was refused as "not a float"."""
    frame = pd.DataFrame(
        [
            {"question": "say 4", "answer": "4", "task": "math", "info": '{"level": 2}'},
            {"question": "say 5"},
        ]
    )
    for data in (frame, frame.to_dict("records")):
        rows = vf.SingleTurnEnv(dataset=data).get_dataset()
        assert isinstance(rows[1]["info"], dict) and rows[1]["info"] == {}
        assert rows[1]["answer"] == "" and rows[1]["task"] == "default"
        assert rows[0]["info"] == {"level": 2} and rows[0]["task"] == "math"


def test_a_nan_question_is_refused_not_sent_as_the_text_nan() -> None:
    """A row whose question cell was empty sent the model the question "nan"."""
    frame = pd.DataFrame([{"question": "say 4"}, {"question": math.nan}])
    with pytest.raises(ValueError, match="dataset row 1 has no question"):
        vf.SingleTurnEnv(dataset=frame)


def test_a_frame_mixing_prompts_and_questions_reads_each_row_by_what_it_has() -> None:
    """The question rows' empty 'prompt' cells (NaN) were read as a prompt of type float."""
    frame = pd.DataFrame(
        [
            {"prompt": [{"role": "user", "content": "say 1"}], "question": None},
            {"prompt": math.nan, "question": "say 2"},
        ]
    )
    rows = vf.SingleTurnEnv(dataset=frame).get_dataset()
    assert rows[0]["prompt"] == [{"role": "user", "content": "say 1"}]
    assert rows[1]["prompt"] == [{"role": "user", "content": "say 2"}]


def test_an_example_id_column_with_a_gap_is_refused_like_a_missing_one() -> None:
    """pandas turns an int column with an empty cell into floats with NaN: the NaN row kept
    example_id NaN, which no resume or summary can match."""
    frame = pd.DataFrame([{"question": "a", "example_id": 10}, {"question": "b"}])
    with pytest.raises(ValueError, match="row 0 has an example_id and row 1 has none"):
        vf.SingleTurnEnv(dataset=frame)


def test_two_rows_with_the_same_example_id_are_refused_naming_them() -> None:
    """Accepted silently, the two examples were merged in results, pass@k and resumes."""
    rows = [
        {"question": "a", "answer": "1", "example_id": 7},
        {"question": "b", "answer": "2", "example_id": 8},
        {"question": "c", "answer": "3", "example_id": 7},
    ]
    with pytest.raises(ValueError, match=r"rows 0 and 2 have the same example_id 7"):
        vf.SingleTurnEnv(dataset=rows)
