"""MathRubric over think-then-box answers."""

import verifiers as vf
from datasets import Dataset
from verifiers.utils.data_utils import THINK_BOXED_SYSTEM_PROMPT


def load_environment(**kwargs) -> vf.Environment:
    rows = [
        {"question": "Half of one?", "answer": "\\frac{1}{2}"},
        {"question": "Two squared?", "answer": "4"},
        {"question": "A third of nine?", "answer": "3"},
    ]
    parser = vf.ThinkParser(extract_fn=vf.extract_boxed_answer)
    return vf.SingleTurnEnv(
        dataset=Dataset.from_list(rows),
        system_prompt=THINK_BOXED_SYSTEM_PROMPT,
        parser=parser,
        rubric=vf.MathRubric(parser=parser),
        **kwargs,
    )
