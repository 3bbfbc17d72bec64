"""Answer extraction and prompts as verifiers 0.1.x's `verifiers.utils.data_utils` gave them.

These follow 0.1.x exactly, because rewards are computed from what they return:
`extract_boxed_answer` reads only the last `\\boxed{...}` and returns the text
unchanged when that box is missing or unclosed, and `extract_hash_answer` returns
everything between the first `####` and the next one. vfgym's own
`vfgym.parsers.extract_boxed_answer` is more lenient (`\\fbox`, `\\boxed 5`); an
environment that imports from `verifiers` gets the 0.1.x reading here, so its
rewards do not move.

`load_example_dataset` reads the same Hugging Face hub data sets 0.1.x read, through
`datasets.load_dataset` (so its cache, `HF_DATASETS_OFFLINE` and mirrors apply), and
turns their rows into the same `question`/`answer` rows, so an environment written
for verifiers gets the prompts and answers it was written against. vfgym's own
environments never call it; it is here for code that imports it from `verifiers`.
One difference: the GPQA rows shuffle their choice letters with the `random`
module in this process, where 0.1.x did it in ten worker processes, so the letter
of a given question differs between the two (each is random anyway).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vfgym.errors import ExampleDatasetUnavailable

THINK_BOXED_SYSTEM_PROMPT = (
    "Think step-by-step inside <think>...</think> tags.     "
    "Then, give your final answer inside \\boxed{}."
)
BOXED_SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."

_BOX = "\\boxed{"


def _closing_brace(text: str, start: int) -> int:
    """Index of the `}` closing the brace opened just before `start`, or -1."""
    depth = 1
    for index in range(start, len(text)):
        char = text[index]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
    return -1


def extract_boxed_answer(text: str) -> str:
    """The content of the last `\\boxed{...}` (nested braces kept), or `text` itself
    when there is none or its braces never close."""
    opening = text.rfind(_BOX)
    if opening == -1:
        return text
    start = opening + len(_BOX)
    end = _closing_brace(text, start)
    return text if end == -1 else text[start:end]


def extract_hash_answer(text: str) -> str:
    """What follows the first `####` of a GSM8K solution (up to any next `####`),
    stripped; `text` itself when it has no `####`."""
    if "####" not in text:
        return text
    return text.split("####")[1].strip()


def strip_non_numeric(text: str) -> str:
    """Only the digits and dots of `text` (`"$1,200.50"` gives `"1200.50"`)."""
    return "".join(char for char in text if char.isdigit() or char == ".")


Row = dict[str, Any]


def _question_answer(question: str, answer: str) -> Callable[[Row], Row]:
    """A converter copying two columns into `question` and `answer` (as text)."""

    def convert(row: Row) -> Row:
        return {"question": row[question], "answer": str(row[answer])}

    return convert


def _aime2024(row: Row) -> Row:
    return {"question": row["problem"], "answer": str(int(row["answer"]))}


def _aime2025(row: Row) -> Row:
    return {"question": row["question"], "answer": strip_non_numeric(row["answer"])}


def _gsm8k(row: Row) -> Row:
    return {"question": row["question"], "answer": extract_hash_answer(row["answer"])}


def _competition_math(row: Row) -> Row:
    return {"question": row["problem"], "answer": extract_boxed_answer(row["solution"])}


def _gpqa(row: Row) -> Row:
    """The four choices under letters drawn at random; the answer is the correct one's."""
    letters = ["A", "B", "C", "D"]
    random.shuffle(letters)
    texts = [
        row["Correct Answer"],
        row["Incorrect Answer 1"],
        row["Incorrect Answer 2"],
        row["Incorrect Answer 3"],
    ]
    by_letter = dict(zip(letters, texts, strict=True))
    lines = [f"{letter}: {by_letter[letter]}" for letter in "ABCD"]
    return {"question": f"Question: {row['Question']}\n\n" + "\n".join(lines), "answer": letters[0]}


def _lettered(question: str, options: list[Any]) -> str:
    """`Question: ...` followed by one `X: option` line per option."""
    lines = [f"\n{chr(ord('A') + index)}: {option}" for index, option in enumerate(options)]
    return f"Question: {question}\n" + "".join(lines)


def _mmlu(row: Row) -> Row:
    return {
        "question": _lettered(row["question"], row["choices"]),
        "answer": "ABCD"[row["answer"]],
    }


def _mmlu_pro(row: Row) -> Row:
    return {"question": _lettered(row["question"], row["options"]), "answer": row["answer"]}


def _openbookqa(row: Row) -> Row:
    choices = row["choices"]
    listed = "\n".join(
        f"{label}. {text}" for label, text in zip(choices["label"], choices["text"], strict=True)
    )
    return {
        "question": f"Question: {row['question_stem']}\n\nChoices:\n{listed}",
        "answer": row["answerKey"],
    }


def _prime_code(row: Row) -> Row:
    return {"question": row["prompt"], "answer": row["verification_info"]}


_PYTHON_PROBLEM = "Solve the following coding problem using the programming language python:"


@dataclass(frozen=True)
class ExampleDataset:
    """Where one of 0.1.x's example data sets lives on the hub and how its rows convert."""

    hub_path: str
    configs: tuple[str | None, ...]
    default_split: str
    convert: Callable[[Row], Row]
    keep: Callable[[Row], bool] | None = None


#: The data sets `load_example_dataset` knew in verifiers 0.1.7 (name -> where and how).
EXAMPLE_DATASETS: dict[str, ExampleDataset] = {
    "aime2024": ExampleDataset("HuggingFaceH4/aime_2024", (None,), "train", _aime2024),
    "aime2025": ExampleDataset(
        "opencompass/AIME2025", ("AIME2025-I", "AIME2025-II"), "test", _aime2025
    ),
    "amc2023": ExampleDataset(
        "knoveleng/AMC-23", (None,), "train", _question_answer("problem", "answer")
    ),
    "gpqa_diamond": ExampleDataset("Idavidrein/gpqa", ("gpqa_diamond",), "train", _gpqa),
    "gpqa_main": ExampleDataset("Idavidrein/gpqa", ("gpqa_main",), "train", _gpqa),
    "gsm8k": ExampleDataset("openai/gsm8k", ("main",), "test", _gsm8k),
    "math": ExampleDataset("chiayewken/competition_math", (None,), "train", _competition_math),
    "math500": ExampleDataset(
        "HuggingFaceH4/MATH-500", (None,), "test", _question_answer("problem", "answer")
    ),
    "mmlu": ExampleDataset("cais/mmlu", ("all",), "dev", _mmlu),
    "mmlu_pro": ExampleDataset("TIGER-Lab/MMLU-Pro", (None,), "validation", _mmlu_pro),
    "openbookqa": ExampleDataset("allenai/openbookqa", ("main",), "train", _openbookqa),
    "openrs": ExampleDataset(
        "knoveleng/open-rs", (None,), "train", _question_answer("problem", "answer")
    ),
    "openrs_easy": ExampleDataset(
        "knoveleng/open-rs",
        (None,),
        "train",
        _question_answer("problem", "answer"),
        keep=lambda row: row["level"] == "Easy",
    ),
    "openrs_hard": ExampleDataset(
        "knoveleng/open-rs",
        (None,),
        "train",
        _question_answer("problem", "answer"),
        keep=lambda row: row["level"] == "Hard",
    ),
    "prime_code": ExampleDataset(
        "PrimeIntellect/verifiable-coding-problems",
        (None,),
        "train",
        _prime_code,
        keep=lambda row: row["prompt"].startswith(_PYTHON_PROBLEM),
    ),
}


def _example(name: str) -> ExampleDataset:
    try:
        return EXAMPLE_DATASETS[name]
    except KeyError:
        raise ExampleDatasetUnavailable(
            f"{name!r} is not one of the example data sets verifiers 0.1.x knew "
            f"({', '.join(EXAMPLE_DATASETS)}). Build the rows yourself, e.g. "
            "datasets.Dataset.from_list([{'question': ..., 'answer': ...}, ...]), and pass "
            "them to the environment."
        ) from None


def get_preprocess_fn(name: str) -> Callable[[Row], Row]:
    """The function turning one hub row of example data set `name` into a
    `{"question", "answer"}` row, as 0.1.x's was."""
    return _example(name).convert


def load_example_dataset(
    name: str = "gsm8k", split: str | None = None, n: int | None = None, seed: int = 0
) -> Any:
    """One of verifiers 0.1.x's example data sets as `question`/`answer` rows: read from
    the hub through `datasets.load_dataset` (its cache and offline mode apply), cut to
    `n` rows drawn with `seed` when `n` is positive, exactly as 0.1.x did."""
    import datasets

    example = _example(name)
    split = split or example.default_split
    parts = []
    for config in example.configs:
        try:
            loaded = datasets.load_dataset(example.hub_path, config)
        except (OSError, ValueError) as exc:
            raise ExampleDatasetUnavailable(
                f"load_example_dataset({name!r}) reads the hub data set {example.hub_path!r}, "
                f"which could not be loaded ({type(exc).__name__}: {exc}). Without network "
                "access, put a copy in the Hugging Face cache, or build the rows yourself "
                "(datasets.Dataset.from_list([{'question': ..., 'answer': ...}, ...])) and "
                "pass them to the environment."
            ) from exc
        if split not in loaded:
            raise ExampleDatasetUnavailable(
                f"{example.hub_path!r} has no split {split!r} (it has {', '.join(loaded)})"
            )
        parts.append(loaded[split])
    dataset = parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)
    if example.keep is not None:
        dataset = dataset.filter(example.keep)
    if n is not None and n > 0:
        dataset = dataset.shuffle(seed=seed).select(range(n))
    return dataset.map(example.convert, remove_columns=dataset.column_names)
