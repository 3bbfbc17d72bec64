"""`vfgym.utils`: the helper modules environments written for verifiers 0.1.x import
(`verifiers.utils.data_utils` and friends), with 0.1.x's readings of answers."""

from __future__ import annotations

import asyncio

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


def test_hub_datasets_are_refused_with_a_way_forward() -> None:
    with pytest.raises(ExampleDatasetUnavailable, match=r"Dataset\.from_list"):
        load_example_dataset("gsm8k", n=10)
    with pytest.raises(ExampleDatasetUnavailable, match="not one of verifiers' names"):
        load_example_dataset("my_own")
    with pytest.raises(ExampleDatasetUnavailable, match=r"Dataset\.map"):
        get_preprocess_fn("gsm8k")


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
