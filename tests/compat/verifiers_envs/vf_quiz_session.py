"""A quiz of several questions, one per turn, asked by a MultiTurnEnv subclass from
each row's `info`; scored by a Rubric reading the parser's message helpers and a
JudgeRubric on a synchronous OpenAI client, grouped in a RubricGroup."""

import os

import verifiers as vf
from datasets import Dataset
from openai import OpenAI
from verifiers.types import Messages, State

QUIZZES = [
    {
        "topic": "sky",
        "questions": ["Colour of the sky?", "Colour of grass?"],
        "answers": ["blue", "green"],
    },
    {
        "topic": "fruit",
        "questions": ["Colour of a banana?", "Colour of a plum?", "Colour of a lime?"],
        "answers": ["yellow", "purple", "green"],
    },
    {"topic": "snow", "questions": ["Colour of snow?"], "answers": ["white"]},
]


class QuizSession(vf.MultiTurnEnv):
    """Asks the row's questions in turn; passes 0.1.x-era keywords up as examples did."""

    def __init__(self, client=None, model=None, few_shot=None, **kwargs):
        super().__init__(client=client, model=model, few_shot=few_shot or [], **kwargs)

    async def is_completed(self, messages: Messages, state: State, **kwargs) -> bool:
        at_limit = await super().is_completed(messages, state, **kwargs)
        return state["turn"] >= len(state["info"]["questions"]) or at_limit

    async def env_response(self, messages: Messages, state: State, **kwargs):
        assert len(state["responses"]) == state["turn"]
        question = state["info"]["questions"][state["turn"]]
        return [{"role": "user", "content": f"Next: {question}"}], state


def load_environment(judge_base_url: str | None = None, max_turns: int = 10) -> vf.Environment:
    rows = [
        {
            "prompt": [{"role": "user", "content": f"Quiz on {q['topic']}. {q['questions'][0]}"}],
            "answer": q["answers"][-1],
            "info": {"questions": q["questions"], "answers": q["answers"]},
            "task": "quiz",
        }
        for q in QUIZZES
    ]
    parser = vf.Parser()

    def share_correct(parser, completion, info, **kwargs) -> float:
        said = [m["content"].strip().lower() for m in parser.get_assistant_messages(completion)]
        right = sum(a == b for a, b in zip(said, info["answers"], strict=False))
        return right / len(info["answers"])

    def questions_asked(parser, completion, **kwargs) -> float:
        return float(len(parser.get_user_messages(completion)))

    rubric = vf.Rubric(parser=parser, funcs=[share_correct])
    rubric.add_reward_func(questions_asked, weight=0.0)
    judge = vf.JudgeRubric(
        judge_client=OpenAI(
            base_url=judge_base_url or os.environ.get("OPENAI_BASE_URL"),
            api_key=os.environ.get("OPENAI_API_KEY", "local"),
        ),
        judge_model="judge",
    )

    async def judged_last_answer(judge, prompt, completion, answer, state, **kwargs) -> float:
        verdict = await judge(prompt, completion, answer, state, **kwargs)
        return 0.5 if "yes" in verdict.lower() else 0.0

    judge.add_reward_func(judged_last_answer)
    return QuizSession(
        dataset=Dataset.from_list(rows),
        parser=parser,
        rubric=vf.RubricGroup([rubric, judge]),
        max_turns=max_turns,
    )
