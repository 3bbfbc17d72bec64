"""Sums answered in \\boxed{}: a SingleTurnEnv with helpers from verifiers.utils.data_utils."""

import verifiers as vf
from datasets import Dataset
from verifiers.utils.data_utils import BOXED_SYSTEM_PROMPT, extract_boxed_answer


def load_environment(num_examples: int = 6, **kwargs) -> vf.Environment:
    rows = [
        {"question": f"Add {a} and {a + 3}.", "answer": str(2 * a + 3)} for a in range(num_examples)
    ]
    parser = vf.Parser(extract_fn=extract_boxed_answer)

    def exact_answer(completion, answer, **kwargs) -> float:
        return 1.0 if (parser.parse_answer(completion) or "").strip() == answer else 0.0

    rubric = vf.Rubric(funcs=[exact_answer], weights=[1.0], parser=parser)
    return vf.SingleTurnEnv(
        dataset=Dataset.from_list(rows),
        system_prompt=BOXED_SYSTEM_PROMPT,
        parser=parser,
        rubric=rubric,
        **kwargs,
    )
