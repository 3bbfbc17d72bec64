"""A MultiTurnEnv subclass: the model counts down, the environment says the next number.

The rubric reads the last message of the completion and scores the XML format of
every assistant turn, so both the turn limit and XMLParser's format reward show in
the rewards.
"""

import verifiers as vf
from datasets import Dataset
from verifiers.envs.multiturn_env import MultiTurnEnv
from verifiers.parsers.xml_parser import XMLParser
from verifiers.types import Messages, State


class CountdownEnv(MultiTurnEnv):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)

    async def is_completed(self, messages: Messages, state: State, **kwargs) -> bool:
        if await super().is_completed(messages, state, **kwargs):
            return True
        return state.get("reached_zero", False)

    async def env_response(self, messages: Messages, state: State, **kwargs):
        said = self.parser.parse_answer(messages) or ""
        if said.strip() == "0":
            state["reached_zero"] = True
            return [{"role": "user", "content": "Done."}], state
        return [{"role": "user", "content": "Next number?"}], state


def load_environment(max_turns: int = 3, **kwargs) -> vf.Environment:
    rows = [
        {"question": f"Count down from {n}, one number per turn.", "answer": str(n)}
        for n in (2, 5, 1, 4)
    ]
    parser = XMLParser(["think", "answer"], answer_field="answer")

    def last_message_is_assistant(completion, **kwargs) -> float:
        return 1.0 if completion[-1]["role"] == "assistant" else 0.0

    def reached_zero(state, **kwargs) -> float:
        return 1.0 if state.get("reached_zero") else 0.0

    rubric = vf.Rubric(
        funcs=[reached_zero, last_message_is_assistant, parser.get_format_reward_func()],
        weights=[1.0, 0.5, 0.2],
        parser=parser,
    )
    return CountdownEnv(
        dataset=Dataset.from_list(rows),
        system_prompt="Count down.\n" + parser.get_format_str(),
        parser=parser,
        rubric=rubric,
        max_turns=max_turns,
        **kwargs,
    )
