"""`TextArenaEnv`: textarena's games, and the NLTK data their word lists need."""

from __future__ import annotations

import pytest

pytest.importorskip("textarena", reason="needs the extra: pip install 'vfgym[textarena]'")

import nltk

import vfgym as vf
from vfgym.envs.textarena_env import NLTK_RESOURCES, TextArenaEnv


def _nltk_data_present() -> bool:
    try:
        for path in NLTK_RESOURCES.values():
            nltk.data.find(path)
    except LookupError:
        return False
    return True


@pytest.mark.skipif(_nltk_data_present(), reason="the NLTK data is installed here")
def test_missing_nltk_data_is_named_with_how_to_install_it() -> None:
    with pytest.raises(RuntimeError, match=r"nltk\.downloader") as caught:
        TextArenaEnv(game="Wordle-v0", num_train_examples=2)
    assert "words" in str(caught.value) and "NLTK_DATA" in str(caught.value)
    assert vf.TextArenaEnv is TextArenaEnv


@pytest.mark.skipif(not _nltk_data_present(), reason="needs the NLTK words corpus and tagger")
def test_rows_are_seeded_secrets_of_the_games_word_list() -> None:
    env = TextArenaEnv(game="Wordle-v0", num_train_examples=3, num_eval_examples=1, seed=0)
    again = TextArenaEnv(game="Wordle-v0", num_train_examples=3, num_eval_examples=1, seed=0)
    answers = [row["answer"] for row in env.get_dataset()]
    assert answers == [row["answer"] for row in again.get_dataset()]
    assert all(answer in env.ta_env.word_list for answer in answers)
    assert len(env.get_eval_dataset()) == 1
