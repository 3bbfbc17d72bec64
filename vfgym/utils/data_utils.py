"""Answer extraction and prompts as verifiers 0.1.x's `verifiers.utils.data_utils` gave them.

These follow 0.1.x exactly, because rewards are computed from what they return:
`extract_boxed_answer` reads only the last `\\boxed{...}` and returns the text
unchanged when that box is missing or unclosed, and `extract_hash_answer` returns
everything between the first `####` and the next one. vfgym's own
`vfgym.parsers.extract_boxed_answer` is more lenient (`\\fbox`, `\\boxed 5`); an
environment that imports from `verifiers` gets the 0.1.x reading here, so its
rewards do not move.

`load_example_dataset` downloads hub data sets, which vfgym never does: it raises
`ExampleDatasetUnavailable` saying how to pass rows instead.
"""

from __future__ import annotations

from typing import Any

from vfgym.errors import ExampleDatasetUnavailable

THINK_BOXED_SYSTEM_PROMPT = (
    "Think step-by-step inside <think>...</think> tags.     "
    "Then, give your final answer inside \\boxed{}."
)
BOXED_SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."

#: The names `load_example_dataset` knew in verifiers 0.1.7, for its error message.
EXAMPLE_DATASETS = (
    "aime2024",
    "aime2025",
    "amc2023",
    "gpqa_diamond",
    "gpqa_main",
    "gsm8k",
    "math",
    "math500",
    "mmlu",
    "mmlu_pro",
    "openbookqa",
    "openrs",
    "openrs_easy",
    "openrs_hard",
    "prime_code",
)

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


def load_example_dataset(
    name: str = "gsm8k", split: str | None = None, n: int | None = None, seed: int = 0
) -> Any:
    """Refuses: verifiers 0.1.x downloaded this from the Hugging Face hub, and vfgym
    runs offline, so an environment must be handed its rows."""
    known = "" if name in EXAMPLE_DATASETS else f" ({name!r} was not one of verifiers' names)"
    raise ExampleDatasetUnavailable(
        f"load_example_dataset({name!r}) downloads a data set from the Hugging Face hub, "
        f"which vfgym does not reach{known}. Build the rows yourself, e.g. "
        "datasets.Dataset.from_list([{'question': ..., 'answer': ...}, ...]) or "
        "datasets.load_dataset('json', data_files=...) on a local copy, and pass them "
        "to the environment (its `dataset=`/`eval_dataset=`, or a loader argument that "
        "takes them)."
    )


def get_preprocess_fn(name: str) -> Any:
    """Refuses, as `load_example_dataset` does: the row formats it converted come from
    hub data sets vfgym does not download."""
    raise ExampleDatasetUnavailable(
        f"get_preprocess_fn({name!r}) converts rows of a hub data set, which vfgym does "
        "not download; map your own rows to {'question': ..., 'answer': ...} with "
        "datasets.Dataset.map."
    )
