"""Datasets as authors give them: dicts of columns, Hugging Face datasets and splits,
ready prompts and questions, few-shot turns, messages a server would refuse, and the
rows `get_dataset`/`get_eval_dataset` hand out.

Every bad input is refused when the environment is built (or its rows are asked for),
naming the row and saying what to give instead, rather than reaching the model server
as a request it refuses, or being read as something else and lost.
"""

from __future__ import annotations

import math
import random
from typing import Any

import datasets
import pandas as pd
import pytest

import vfgym as vf
from vfgym.envs import SingleTurnEnv
from vfgym.inference.server import ModelServer
from vfgym.types import Messages

ROWS = [{"question": f"What is {i}+{i}?", "answer": str(2 * i)} for i in range(6)]


USER = {"role": "user", "content": "hi"}


FEW_SHOT = [
    {"role": "user", "content": "What is 1+1?"},
    {"role": "assistant", "content": "2"},
]


def say_ok(messages: Messages) -> str:
    return "ok"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        # one row given as a dict: each text column would be split into its characters
        ({"question": "abc"}, r"column 'question' is one str, not a list.*pass a list of rows"),
        ({"question": "What is 2+2?", "answer": "4"}, r"column 'question' is one str"),
        ({"question": ["a"], "answer": 3}, r"column 'answer' is one int.*one value per row"),
        ({"question": ["a", "b"], "answer": ["1"]}, r"different lengths.*one value per row"),
    ],
)
def test_a_dict_of_columns_needs_one_list_per_column(data: dict[str, Any], message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        SingleTurnEnv(dataset=data)


def test_a_dataset_dict_asks_for_one_split() -> None:
    """A `DatasetDict` is a dict of splits: read as columns, each split became one
    'column' and every row was refused as having neither prompt nor question."""
    splits = datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(ROWS), "test": datasets.Dataset.from_list(ROWS)}
    )
    with pytest.raises(TypeError, match=r"splits \['test', 'train'\].*dataset\['train'\]"):
        SingleTurnEnv(dataset=splits)


def test_the_rows_handed_out_are_a_list_of_the_callers_own() -> None:
    """Shuffling or trimming what `get_dataset()` returned reordered the environment's
    own dataset (only the seeded and the sliced calls made a new list)."""
    env = SingleTurnEnv(dataset=ROWS)
    rows = env.get_dataset()
    random.Random(0).shuffle(rows)
    rows.pop()
    evals = env.get_eval_dataset()
    evals.clear()
    assert [r["answer"] for r in env.get_dataset()] == [r["answer"] for r in ROWS]
    assert len(env.get_eval_dataset()) == len(ROWS)


@pytest.mark.parametrize("n", ["3", 2.5, True, [2]])
def test_a_row_count_that_is_not_a_whole_number_is_refused(n: Any) -> None:
    env = SingleTurnEnv(dataset=ROWS)
    with pytest.raises(TypeError, match=r"n must be a whole number of rows \(-1 or None for all"):
        env.get_dataset(n=n)
    with pytest.raises(TypeError, match=r"n must be a whole number of rows"):
        env.get_eval_inputs(num_examples=n)


async def test_an_empty_dataset_is_refused_when_its_rows_are_asked_for(model_server) -> None:
    """An empty dataset evaluated to a 'complete' run of no rollouts, and an empty
    eval_dataset shadowed the training rows with nothing. (It is refused when its rows
    are wanted, not when it is built: an environment driven by hand, rollout by rollout,
    is built with `dataset=[]`.)"""
    server = await model_server(say_ok)
    empty = SingleTurnEnv(dataset=datasets.Dataset.from_list([]))
    with pytest.raises(ValueError, match=r"SingleTurnEnv's dataset has no rows; give it"):
        empty.get_dataset()
    with pytest.raises(ValueError, match=r"dataset has no rows"):
        await empty.evaluate(server.client(), "m")
    no_evals = SingleTurnEnv(dataset=ROWS, eval_dataset=[])
    with pytest.raises(ValueError, match=r"eval_dataset has no rows.*eval_dataset=None"):
        no_evals.get_eval_dataset()
    assert server.requests == []


def test_task_is_text_and_task_zero_is_kept() -> None:
    """`task or "default"` read a task of 0 as none, while 1 stayed the int 1."""
    rows = [{"question": "q", "task": 0}, {"question": "q", "task": 1}, {"question": "q"}]
    assert [r["task"] for r in SingleTurnEnv(dataset=rows).get_dataset()] == [
        "0",
        "1",
        "default",
    ]


def test_a_container_answer_is_json_text() -> None:
    """A dict answer became its Python repr (single quotes), which no reward function
    can read back with `json.loads`."""
    rows = [{"question": "q", "answer": {"x": 1, "ok": True}}, {"question": "q", "answer": ["a"]}]
    answers = [r["answer"] for r in SingleTurnEnv(dataset=rows).get_dataset()]
    assert answers == ['{"x": 1, "ok": true}', '["a"]']


def test_example_ids_are_given_for_every_row_or_for_none() -> None:
    """Arrow pads a row without an example_id with None (kept as the id); in a list the
    row got its position, which can be another row's given id (summaries then merge
    the two examples)."""
    padded = datasets.Dataset.from_list([{"question": "a", "example_id": 5}, {"question": "b"}])
    for data in (padded, [{"question": "a", "example_id": 1}, {"question": "b"}]):
        with pytest.raises(ValueError, match=r"row 1 has none.*give every row an example_id"):
            SingleTurnEnv(dataset=data)
    unset = datasets.Dataset.from_list([{"question": "a", "example_id": None}, {"question": "b"}])
    assert [r["example_id"] for r in SingleTurnEnv(dataset=unset).get_dataset()] == [0, 1]


def test_info_that_is_not_a_dict_names_its_row() -> None:
    with pytest.raises(TypeError, match=r"dataset row 1: 'info' must be a dict or the JSON text"):
        SingleTurnEnv(dataset=[{"question": "q"}, {"question": "q", "info": [1, 2]}])
    with pytest.raises(ValueError, match=r"dataset row 0: 'info' .*not JSON"):
        SingleTurnEnv(dataset=[{"question": "q", "info": "{level: 2}"}])


@pytest.mark.parametrize(
    ("prompt", "message"),
    [
        (3, r"dataset row 0: 'prompt' is of type int; give a list of chat messages"),
        (USER, r"dataset row 0: 'prompt' is one message.*wrap it in a list"),
        ([], r"dataset row 0: 'prompt' has no messages"),
    ],
)
def test_a_prompt_that_is_no_message_list_says_what_to_give(prompt: Any, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        SingleTurnEnv(dataset=[{"prompt": prompt}], system_prompt="s")


@pytest.mark.parametrize("message_type", ["chat", "completion"])
@pytest.mark.parametrize("question", [[USER], {"text": "hi"}])
def test_a_question_that_is_not_text_is_refused(message_type: str, question: Any) -> None:
    """A list of messages given as the question was sent as its Python repr."""
    with pytest.raises(TypeError, match=r"dataset row 0: 'question' is a .*'prompt'"):
        SingleTurnEnv(dataset=[{"question": question}], message_type=message_type)


def test_a_completion_env_given_chat_messages_says_what_to_do() -> None:
    with pytest.raises(ValueError, match=r"give the prompt as one str, or use message_type='chat'"):
        SingleTurnEnv(dataset=[{"prompt": [USER]}], message_type="completion")


BAD_MESSAGES = [
    ({"content": "hi"}, ValueError, r"has no 'role'; give each message one"),
    ({"role": "bot", "content": "hi"}, ValueError, r"role 'bot'.*'user', 'assistant'"),
    ({"role": "user", "content": None}, ValueError, r"user message has no 'content'; give"),
    ({"role": "user"}, ValueError, r"user message has no 'content'"),
    ({"role": "user", "content": 3}, TypeError, r"'content' of type int; give the text as a str"),
    ({"role": "user", "content": {"type": "text", "text": "hi"}}, TypeError, r"list of content"),
    ({"role": "user", "content": [{"text": "hi"}]}, ValueError, r"content part 0 has no 'type'"),
    ({"role": "user", "content": [{"type": "text"}]}, ValueError, r"part 0 .*'text' as a str"),
    ({"role": "user", "content": []}, ValueError, r"empty list of content parts"),
    (
        {"role": "user", "content": [{"type": "image_url", "image_url": {}}]},
        ValueError,
        r"'image_url': \{'url': ",
    ),
    ({"role": "tool", "content": "3"}, ValueError, r"tool message has no 'tool_call_id'"),
    ({"role": "assistant", "content": None}, ValueError, r"neither 'content' nor 'tool_calls'"),
    (
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": {"a": 1}}}],
        },
        TypeError,
        r"tool call 0's arguments are a dict; give them as JSON text",
    ),
    (
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f"}}]},
        ValueError,
        r"tool call 0 has no 'id'",
    ),
    (
        {"role": "user", "content": "hi", "tool_calls": [{"id": "c1", "function": {"name": "f"}}]},
        ValueError,
        r"only an assistant message makes tool calls",
    ),
]


@pytest.mark.parametrize(("bad", "error", "message"), BAD_MESSAGES)
def test_a_prompt_message_a_server_would_refuse_is_refused_naming_it(
    bad: dict[str, Any], error: type[Exception], message: str
) -> None:
    """These reached the model server on every rollout of the row (a real one answers
    400), or a chat template that renders them."""
    with pytest.raises(error, match=rf"dataset row 1: 'prompt' item 0\b.*{message}"):
        SingleTurnEnv(dataset=[{"prompt": [USER]}, {"prompt": [bad, USER]}])


async def test_content_parts_and_tool_turns_pass_without_arrow_padding(model_server) -> None:
    """Arrow gives every content part every key some part has, set to None (a text part
    gets `"image_url": null`, which a strict server refuses); the padding is taken out,
    and images and answered tool calls pass the checks. (Arrow holds a column's content
    as all text or all parts, so every content here is parts; the image is in a row of
    its own, which is not played: the project's server tokenizes text alone.)"""
    text = [
        {"role": "system", "content": [{"type": "text", "text": "Look."}]},
        {"role": "user", "content": [{"type": "text", "text": "What is this?"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "content": [{"type": "text", "text": "a cat"}], "tool_call_id": "c1"},
    ]
    image = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "And this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        }
    ]
    server = await model_server(say_ok)
    data = datasets.Dataset.from_list([{"prompt": text}, {"prompt": image}])
    env = SingleTurnEnv(dataset=data)
    assert [row["prompt"] for row in env.get_dataset()] == [text, image]
    out = await env.evaluate(server.client(), "m", num_examples=1)
    assert out.state[0]["stop_reason"] == "completed"
    assert server.requests[0]["messages"] == text


def test_an_empty_tool_calls_list_is_dropped_from_a_prompt_message() -> None:
    """`"tool_calls": []` means no calls, and OpenAI refuses an empty list: it was sent."""
    prompt = [USER, {"role": "assistant", "content": "hello", "tool_calls": []}, USER]
    rows = SingleTurnEnv(dataset=[{"prompt": prompt}]).get_dataset()
    assert rows[0]["prompt"][1] == {"role": "assistant", "content": "hello"}


@pytest.mark.parametrize(
    ("few_shot", "message"),
    [
        (
            "Q: 1+1? A: 2",
            r"few_shot item 0 is 'Q', expected a chat message dict; few_shot is a list",
        ),
        (FEW_SHOT[0], r"few_shot item 0 is 'role', expected a chat message dict"),
        ([("What is 1+1?", "2")], r"few_shot item 0 is a tuple, expected a chat message dict"),
        ([FEW_SHOT], r"few_shot item 0 is a list"),
        ([{"content": "x"}], r"few_shot item 0 has no 'role'"),
        (
            [{"role": "user", "content": None}],
            r"few_shot item 0: the user message has no 'content'",
        ),
    ],
)
def test_few_shot_that_is_no_list_of_messages_is_refused(few_shot: Any, message: str) -> None:
    """A str or a dict was read one character or key at a time (an error about
    'dictionary update sequence'), a list of lists became `{'role': 'content'}`."""
    with pytest.raises((TypeError, ValueError), match=message):
        SingleTurnEnv(dataset=[{"question": "q"}], few_shot=few_shot)


@pytest.mark.parametrize("system_prompt", [3, [USER]])
def test_a_system_prompt_that_is_not_text_is_refused(system_prompt: Any) -> None:
    with pytest.raises(TypeError, match=r"system_prompt must be text \(a str\)"):
        SingleTurnEnv(dataset=[{"question": "q"}], system_prompt=system_prompt)


def test_few_shot_reaches_ready_message_prompts_once() -> None:
    """A row with ready messages got the environment's system prompt but silently lost
    its few-shot turns; they go after the system message, once (formatting the
    formatted rows again adds nothing)."""
    rows = [
        {"prompt": [USER]},
        {"prompt": [{"role": "system", "content": "own"}, USER]},
        {"prompt": "hi"},
    ]
    env = SingleTurnEnv(dataset=rows, system_prompt="sys", few_shot=FEW_SHOT)
    prompts = [r["prompt"] for r in env.get_dataset()]
    assert prompts == [
        [{"role": "system", "content": "sys"}, *FEW_SHOT, USER],
        [{"role": "system", "content": "own"}, *FEW_SHOT, USER],
        [{"role": "system", "content": "sys"}, *FEW_SHOT, USER],
    ]
    again = env.format_dataset([{"prompt": p} for p in prompts])
    assert [r["prompt"] for r in again] == prompts


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
