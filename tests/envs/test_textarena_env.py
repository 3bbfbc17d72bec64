"""`TextArenaEnv`: textarena's games, played offline on NLTK's word data or on the
stand-in vfgym builds when that data is absent (`vfgym.envs.textarena_words`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("textarena", reason="needs the extra: pip install 'vfgym[textarena]'")

import nltk
from openai import AsyncOpenAI

import vfgym as vf
from vfgym.envs.textarena_env import TextArenaEnv
from vfgym.envs.textarena_words import BASIC_NOUNS, build_word_data, ensure_word_data
from vfgym.inference.server import ModelServer


def test_the_stand_in_word_data_is_what_nltk_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = build_word_data(tmp_path / "nltk_data")
    monkeypatch.setattr(nltk.data, "path", [*nltk.data.path, str(root)])  # NLTK reads only there
    reader = nltk.corpus.reader.WordListCorpusReader(
        str(root / "corpora" / "words"), ["en", "en-basic"]
    )
    assert sorted(BASIC_NOUNS) == reader.words("en-basic")
    english = set(reader.words("en"))
    assert len(english) > 40_000 and {"apple", "house", "river"} <= english
    tagger = nltk.tag.PerceptronTagger(load=False)
    tagger.load_from_json(loc=str(root / "taggers" / "averaged_perceptron_tagger_eng"))
    assert tagger.tag(["crane"]) == [("crane", "NN")]
    classes = root / "taggers/averaged_perceptron_tagger_eng"
    assert json.loads((classes / "averaged_perceptron_tagger_eng.classes.json").read_text()) == [
        "NN"
    ]


def test_word_data_is_found_after_ensuring_it() -> None:
    ensure_word_data()
    assert nltk.data.find("corpora/words") and nltk.data.find(
        "taggers/averaged_perceptron_tagger_eng"
    )


def test_rows_are_seeded_secrets_of_the_games_word_list() -> None:
    env = TextArenaEnv(game="Wordle-v0", num_train_examples=3, num_eval_examples=1, seed=0)
    again = TextArenaEnv(game="Wordle-v0", num_train_examples=3, num_eval_examples=1, seed=0)
    answers = [row["answer"] for row in env.get_dataset()]
    assert answers == [row["answer"] for row in again.get_dataset()]
    assert all(answer in env.ta_env.word_list for answer in answers)
    assert len(env.get_eval_dataset()) == 1
    assert vf.TextArenaEnv is TextArenaEnv


async def test_a_guess_is_scored_by_the_game_and_the_right_one_ends_it() -> None:
    env = TextArenaEnv(game="Wordle-v0", num_train_examples=1)
    secret = env.get_dataset()[0]["answer"]
    wrong = next(word for word in env.ta_env.word_list if word != secret)
    state: dict = {"answer": secret}
    reply, state = await env.env_response(
        [{"role": "assistant", "content": f"<guess>[{wrong}]</guess>"}], state
    )
    feedback = reply[0]["content"]
    assert wrong.upper() in feedback.upper() and any(mark in feedback for mark in "GXY")
    assert state["is_completed"] is False
    _, state = await env.env_response(
        [{"role": "assistant", "content": f"<guess>[{secret}]</guess>"}], state
    )
    assert state["is_completed"] is True
    assert await env.is_completed([], state)


async def test_a_wordle_game_against_the_model_server() -> None:
    guesses = iter(["crane", "slate", "pious", "world", "fight", "mount", "extra"])

    def player(messages: list[dict]) -> str:
        return f"<think>\nguess\n</think>\n<guess>[{next(guesses)}]</guess>"

    env = TextArenaEnv(game="Wordle-v0", num_train_examples=1, max_turns=3)
    async with ModelServer(player) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="local", max_retries=0)
        results = await env.evaluate(client, "scripted", num_examples=1)
    completion = results.completion[0]
    roles = [m["role"] for m in completion]
    assert roles.count("assistant") == 3 and roles[:4] == ["assistant", "user"] * 2
    assert "CRANE" in completion[1]["content"].upper()
    assert "SLATE" in completion[3]["content"].upper()
