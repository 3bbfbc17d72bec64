"""A ToolEnv subclass with a plain-function tool and a ToolRubric."""

import verifiers as vf
from datasets import Dataset
from verifiers.envs.tool_env import ToolEnv
from verifiers.rubrics.tool_rubric import ToolRubric

CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Peru": "Lima", "Kenya": "Nairobi"}


def capital_of(country: str) -> str:
    """Look up the capital city of a country.

    Args:
        country: The country's English name.
    """
    return CAPITALS.get(country, "unknown")


class LookupEnv(ToolEnv):
    def __init__(self, **kwargs):
        super().__init__(tools=[capital_of], **kwargs)


def load_environment(**kwargs) -> vf.Environment:
    rows = [
        {"question": f"What is the capital of {c}?", "answer": city} for c, city in CAPITALS.items()
    ]

    def correct_city(completion, answer, **kwargs) -> float:
        text = str(completion[-1].get("content") or "")
        return 1.0 if answer.lower() in text.lower() else 0.0

    rubric = ToolRubric(tools=[capital_of])
    rubric.add_reward_func(correct_city)
    return LookupEnv(
        dataset=Dataset.from_list(rows),
        system_prompt="Use the capital_of tool, then answer.",
        rubric=rubric,
        max_turns=4,
        **kwargs,
    )
