"""What the ENV argument of `vfgym eval | play | check` takes besides a registered name
(`module:function`, a path to a .py file), and the checks made on it and on `-m`
before anything is written."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_runs import no_configured_model, run  # noqa: F401  (an autouse fixture)

from vfgym.cli.main import main

#: A whole game in one file, with a reference policy and no random one.
LETTER_GAME = '''
"""Say the hidden letter: one turn, one letter."""
from vfgym.games import InvalidMove, TextGame, move_message

KIND = "game"


class SayTheLetter(TextGame):
    def new_game(self, info):
        return {"letter": info["letter"], "said": False}

    def apply_move(self, game, move):
        if move != game["letter"]:
            raise InvalidMove(f"not {move!r}")
        game["said"] = True
        return "right"

    def is_over(self, game):
        return game["said"]

    def score(self, game):
        return 1.0

    def render(self, game):
        return "said" if game["said"] else "waiting"

    def reference_policy(self, messages):
        return move_message(messages[-1]["content"].split()[-1])

    def random_move(self, messages, rng):
        return "z"


def load_environment(num_examples: int = 3):
    rows = [{"question": f"Say {c}", "info": {"letter": c}} for c in "abcdefg"[:num_examples]]
    game = SayTheLetter(dataset=rows, max_turns=3)
    game.make_random_policy = None  # this game offers no random policy
    return game
'''


@pytest.fixture
def letter_game(tmp_path: Path) -> Iterator[Path]:
    """The game's file; the modules it is imported as are forgotten after the test, so
    the next test's file of the same name is imported afresh."""
    folder = tmp_path / "authors_games"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "say_the_letter.py").write_text(LETTER_GAME)
    try:
        yield folder / "say_the_letter.py"
    finally:
        for name in ("say_the_letter", "authors_games", "authors_games.say_the_letter"):
            sys.modules.pop(name, None)


def records(directory: Path) -> list[dict]:
    return [json.loads(line) for line in (directory / "results.jsonl").read_text().splitlines()]


def test_eval_takes_a_path_to_a_file(
    letter_game: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["eval", str(letter_game), "-n", "2", "-r", "1", "-o", "run"], capsys)
    assert code == 0, err
    assert [r["reward"] for r in records(tmp_path / "run")] == [1.0, 1.0]


def test_eval_takes_module_colon_function_from_the_current_directory(
    letter_game: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))  # the folder eval adds goes with the test
    argv = ["eval", "authors_games.say_the_letter:load_environment", "-n", "1", "-r", "1"]
    code, _, err = run([*argv, "-o", "run"], capsys)
    assert code == 0, err
    assert records(tmp_path / "run")[0]["reward"] == 1.0


def test_play_takes_a_path_to_a_file(
    letter_game: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("<move>b</move>\n"))
    code = main(["play", str(letter_game), "-i", "1"])
    out = capsys.readouterr().out
    assert code == 0 and "Say b" in out and "right" in out


def test_a_policy_the_environment_lacks_is_refused_before_anything_is_written(
    letter_game: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["eval", str(letter_game), "-m", "random", "-o", "run"], capsys)
    assert code == 2
    assert "has no random policy" in err and "make_random_policy" in err and "-m reference" in err
    assert "--resume" not in err and "playing" not in err
    assert not (tmp_path / "run").exists() and not (tmp_path / "outputs").exists()


def test_a_model_name_the_builtin_server_does_not_play_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["eval", "guess-the-number", "-m", "randon"], capsys)
    assert code == 2 and "only plays `-m reference` or `-m random`" in err
    assert not (tmp_path / "outputs").exists()


def test_a_module_that_fails_to_import_reads_the_same_in_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "cli_broken_letters.py"
    broken.write_text("import cli_frobnicate_missing\n")
    said = set()
    for command in ("eval", "play", "check"):
        code, _, err = run([command, str(broken)], capsys)
        assert code == 1, err
        (line,) = [line for line in err.splitlines() if line.startswith("error:")]
        said.add(line)
    (line,) = said
    assert "failed to import: ModuleNotFoundError" in line and "cli_frobnicate_missing" in line
    assert "unexpected" not in line and not (tmp_path / "outputs").exists()
