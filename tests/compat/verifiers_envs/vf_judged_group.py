"""An EnvGroup of a task scored by a JudgeRubric and one scored by a plain Rubric."""

import os

import verifiers as vf
from datasets import Dataset
from openai import AsyncOpenAI
from verifiers.rubrics.judge_rubric import JudgeRubric


def _judged_env(judge_base_url: str | None) -> vf.Environment:
    rows = [{"question": f"Name a colour number {i}.", "answer": "blue"} for i in range(3)]
    judge_client = AsyncOpenAI(
        base_url=judge_base_url or os.environ.get("OPENAI_BASE_URL"),
        api_key=os.environ.get("OPENAI_API_KEY", "local"),
    )
    rubric = JudgeRubric(judge_client=judge_client, judge_model="judge")

    async def judged_correct(judge, prompt, completion, answer, state, **kwargs) -> float:
        verdict = await judge(prompt, completion, answer, state, **kwargs)
        return 1.0 if "yes" in verdict.lower() else 0.0

    rubric.add_reward_func(judged_correct)
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), rubric=rubric)


def _plain_env() -> vf.Environment:
    rows = [{"question": f"Say the colour number {i}.", "answer": "red"} for i in range(2)]

    def says_answer(completion, answer, **kwargs) -> float:
        return 1.0 if completion[-1]["content"].strip() == answer else 0.0

    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), rubric=vf.Rubric(funcs=[says_answer]))


def load_environment(judge_base_url: str | None = None) -> vf.Environment:
    return vf.EnvGroup(
        envs=[_judged_env(judge_base_url), _plain_env()],
        env_names=["judged", "plain"],
    )
