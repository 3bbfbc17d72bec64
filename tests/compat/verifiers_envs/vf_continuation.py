"""A completion-mode (plain text, no chat) SingleTurnEnv."""

import verifiers as vf
from datasets import Dataset


def load_environment(**kwargs) -> vf.Environment:
    pairs = (("one", "two"), ("red", "green"), ("one", "two"))
    rows = [{"prompt": f"The word after {word} is", "answer": nxt} for word, nxt in pairs]

    def continues_right(completion, answer, **kwargs) -> float:
        return 1.0 if completion.strip().startswith(answer) else 0.0

    return vf.SingleTurnEnv(
        dataset=Dataset.from_list(rows),
        message_type="completion",
        rubric=vf.Rubric(funcs=[continues_right]),
        **kwargs,
    )
