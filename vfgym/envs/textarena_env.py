"""`TextArenaEnv`: single-player games of the `textarena` package (Wordle-v0 and
friends) as a multi-turn environment, as verifiers 0.1.x offered them (extra
`vfgym[textarena]`).

Each row's `answer` is the secret the game is reset with; the model's parsed
answer is the move, and the game's observation is the reply. textarena's word
games read NLTK data (the `words` corpus, and the `averaged_perceptron_tagger_eng`
tagger to keep nouns) that NLTK downloads on first use; vfgym never downloads, so
when that data is absent it builds a stand-in offline (`vfgym.envs.textarena_words`,
which says what differs) and keeps textarena from reaching for the network.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from copy import deepcopy
from typing import Any

from datasets import Dataset

from vfgym.envs.multiturn_env import MultiTurnEnv
from vfgym.envs.textarena_words import ensure_word_data, offline_downloads
from vfgym.parsers.xml_parser import XMLParser
from vfgym.rubrics.rubric import Rubric
from vfgym.types import Messages, State


def _textarena() -> Any:
    """The textarena package, imported once NLTK can find the word data its games
    load (NLTK's own, or vfgym's stand-in) and with downloads kept local."""
    try:
        import nltk  # noqa: F401

        ensure_word_data()
        with offline_downloads():
            import textarena
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            "TextArenaEnv runs games of the textarena package: "
            "pip install 'vfgym[textarena]' (or pip install textarena nltk)",
            name=exc.name,
        ) from exc
    return textarena


def _identity(text: str) -> str:
    return text


class TextArenaEnv(MultiTurnEnv):
    """A textarena game (`game="Wordle-v0"`), one secret per row, drawn with `seed`
    from the game's own word list."""

    def __init__(
        self,
        game: str = "Wordle-v0",
        num_train_examples: int = 1000,
        num_eval_examples: int = 0,
        system_prompt: str | None = None,
        parser: XMLParser | None = None,
        rubric: Rubric | None = None,
        feedback_fn: Callable[[str], str] = _identity,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        ta = _textarena()
        parser = parser or XMLParser(fields=["think", "guess"], answer_field="guess")
        self.game = game
        with offline_downloads():
            self.ta_env = ta.make(env_id=game)
        self.num_train_examples = num_train_examples
        self.num_eval_examples = num_eval_examples
        self.seed = seed
        self.feedback_fn = feedback_fn
        dataset, eval_dataset = self.ta_to_hf()
        super().__init__(
            dataset=dataset,
            eval_dataset=eval_dataset,
            system_prompt=system_prompt,
            parser=parser,
            rubric=rubric,
            message_type="chat",
            **kwargs,
        )

    async def is_completed(self, messages: Messages, state: State, **kwargs: Any) -> bool:
        """Over when the game says so (or at the turn limit)."""
        if state.get("is_completed"):
            state.pop("ta_env", None)
            return True
        return await super().is_completed(messages, state, **kwargs)

    async def env_response(
        self, messages: Messages, state: State, **kwargs: Any
    ) -> tuple[Messages, State]:
        """Play the model's parsed move and answer with the game's observation."""
        ta_env = state.get("ta_env")
        if ta_env is None:
            ta_env = deepcopy(self.ta_env)
            ta_env.reset(num_players=1)
            ta_env.state.game_state["secret_word"] = state["answer"]
            state["ta_env"] = ta_env
        guess = self.parser.parse_answer(messages)
        done, _ = ta_env.step(str(guess))
        state["is_completed"] = done
        _, observation = ta_env.get_observation()
        return [{"role": "user", "content": str(self.feedback_fn(observation))}], state

    def ta_to_hf(self) -> tuple[Dataset, Dataset | None]:
        """Rows whose question is the game's opening prompt and answer a secret word."""
        ta = _textarena()
        with offline_downloads():
            ta_env = ta.make(env_id=self.game)
        ta_env.reset(num_players=1)
        _, user_prompt = ta_env.get_observation()
        words = ta_env.word_list
        rng = random.Random(self.seed)
        rows = [
            {"question": user_prompt, "answer": rng.choice(words)}
            for _ in range(self.num_train_examples + self.num_eval_examples)
        ]
        dataset = Dataset.from_list(rows[: self.num_train_examples])
        held_out = rows[self.num_train_examples :]
        return dataset, Dataset.from_list(held_out) if held_out else None
