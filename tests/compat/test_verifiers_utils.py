"""`vfgym.utils`: the helper modules environments written for verifiers 0.1.x import
(`verifiers.utils.data_utils` and friends), with 0.1.x's readings of answers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from vfgym.errors import ExampleDatasetUnavailable
from vfgym.utils.async_utils import NullAsyncContext, maybe_await, maybe_semaphore
from vfgym.utils.data_utils import (
    BOXED_SYSTEM_PROMPT,
    THINK_BOXED_SYSTEM_PROMPT,
    extract_boxed_answer,
    extract_hash_answer,
    get_preprocess_fn,
    load_example_dataset,
    strip_non_numeric,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("so \\boxed{42}.", "42"),
        ("\\boxed{1} then \\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("no box here", "no box here"),
        ("\\boxed{1} and \\boxed{2", "\\boxed{1} and \\boxed{2"),  # last box unclosed: text
        ("is \\boxed 5", "is \\boxed 5"),  # 0.1.x reads only the braced form
        ("\\fbox{3}", "\\fbox{3}"),
    ],
)
def test_extract_boxed_answer_reads_the_last_braced_box_as_0_1_x_did(
    text: str, expected: str
) -> None:
    assert extract_boxed_answer(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("40 + 2 = 42\n#### 42", "42"),
        ("no marker", "no marker"),
        ("#### 7\nbecause\n#### 8", "7\nbecause"),  # between the first two markers
    ],
)
def test_extract_hash_answer_takes_what_follows_the_first_marker(text: str, expected: str) -> None:
    assert extract_hash_answer(text) == expected


def test_prompts_and_numeric_stripping() -> None:
    assert "\\boxed{}" in BOXED_SYSTEM_PROMPT and "<think>" in THINK_BOXED_SYSTEM_PROMPT
    assert strip_non_numeric("$1,200.50") == "1200.50"


def _hub_rows(monkeypatch: pytest.MonkeyPatch, splits: dict[str, list[dict[str, Any]]]) -> list:
    """Serve `splits` for every hub data set `load_example_dataset` asks `datasets` for,
    recording what it asked: the hub is out of reach here."""
    import datasets

    asked: list[tuple[str, str | None]] = []

    def load_dataset(path: str, name: str | None = None, **_: Any) -> datasets.DatasetDict:
        asked.append((path, name))
        return datasets.DatasetDict(
            {split: datasets.Dataset.from_list(rows) for split, rows in splits.items()}
        )

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return asked


def test_example_dataset_rows_become_question_and_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    solutions = [{"question": f"q{i}", "answer": f"work\n#### {i}"} for i in range(10)]
    asked = _hub_rows(monkeypatch, {"train": solutions, "test": solutions[:3]})
    rows = load_example_dataset("gsm8k")  # 0.1.x's default split for gsm8k is test
    assert asked == [("openai/gsm8k", "main")]
    assert rows.column_names == ["question", "answer"]
    assert list(rows) == [{"question": f"q{i}", "answer": str(i)} for i in range(3)]
    sampled = load_example_dataset("gsm8k", split="train", n=4, seed=3)
    import datasets

    expected = datasets.Dataset.from_list(solutions).shuffle(seed=3).select(range(4))
    assert sampled["question"] == expected["question"]


def test_example_datasets_of_several_configs_are_joined(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _hub_rows(monkeypatch, {"test": [{"question": "Find x.", "answer": "x = 12"}]})
    rows = load_example_dataset("aime2025")
    assert asked == [
        ("opencompass/AIME2025", "AIME2025-I"),
        ("opencompass/AIME2025", "AIME2025-II"),
    ]
    assert list(rows) == [{"question": "Find x.", "answer": "12"}] * 2


def test_gpqa_rows_put_the_correct_choice_under_the_answer_letter() -> None:
    row = {
        "Question": "Which?",
        "Correct Answer": "right",
        "Incorrect Answer 1": "w1",
        "Incorrect Answer 2": "w2",
        "Incorrect Answer 3": "w3",
    }
    converted = get_preprocess_fn("gpqa_diamond")(row)
    assert f"{converted['answer']}: right" in converted["question"]
    assert converted["question"].startswith("Question: Which?\n\nA: ")


def test_filtered_example_datasets_keep_only_their_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    levels = [{"problem": f"p{i}", "answer": i, "level": ["Easy", "Hard"][i % 2]} for i in range(4)]
    _hub_rows(monkeypatch, {"train": levels})
    assert load_example_dataset("openrs_hard")["question"] == ["p1", "p3"]
    mmlu = get_preprocess_fn("mmlu")({"question": "2+2?", "choices": ["3", "4"], "answer": 1})
    assert mmlu == {"question": "Question: 2+2?\n\nA: 3\nB: 4", "answer": "B"}


def test_unknown_example_datasets_and_unreachable_hub_are_refused_with_a_way_forward(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ExampleDatasetUnavailable, match=r"not one of .*Dataset\.from_list"):
        load_example_dataset("my_own")
    with pytest.raises(ExampleDatasetUnavailable, match="not one of"):
        get_preprocess_fn("my_own")
    import datasets

    def unreachable(path: str, *args: Any, **kwargs: Any) -> Any:
        raise ConnectionError(f"Couldn't reach '{path}' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", unreachable)
    with pytest.raises(ExampleDatasetUnavailable, match=r"openai/gsm8k.*Hugging Face cache"):
        load_example_dataset("gsm8k")


async def test_maybe_await_and_maybe_semaphore() -> None:
    async def double(x: int) -> int:
        return 2 * x

    assert await maybe_await(double, 2) == 4
    assert await maybe_await(lambda x: x + 1, 2) == 3
    limited = await maybe_semaphore(2)
    assert isinstance(limited, asyncio.Semaphore)
    unlimited = await maybe_semaphore(None)
    assert isinstance(unlimited, NullAsyncContext)
    async with unlimited:
        pass
