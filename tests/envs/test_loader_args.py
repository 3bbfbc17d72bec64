"""An `-a` name that a loader taking `**kwargs` passes on, and what it builds refuses.

Such a loader cannot be checked before it runs: the name is refused deep inside the
environment's constructor, as a TypeError that names neither the `-a` argument nor
the loader's own parameters. These tests run the real `vfgym eval` / `vfgym play`
(in-process through `main`) and `vfgym.load_environment` on real loader modules.
"""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

import pytest
from cli_runs import no_configured_model, run  # noqa: F401  (an autouse fixture)

import vfgym
from vfgym.envs.registry import UnexpectedArgumentError

_numbers = itertools.count()

HEADER = """\
from __future__ import annotations

from vfgym.envs import SingleTurnEnv

ROWS = [{"question": "q", "answer": "a"}]
"""


@pytest.fixture
def loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A factory: `name = loader(source)` writes a verifiers-style module (found by its
    name) with `source` after `HEADER`, and returns the environment name to load."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(source: str) -> str:
        module = f"vf_kwargs_errors_{next(_numbers)}_{tmp_path.name[-8:]}".replace("-", "_")
        (tmp_path / f"{module}.py").write_text(HEADER + textwrap.dedent(source))
        return module.replace("_", "-")

    return make


PASSES_ON = """
def load_environment(size: int = 1, **kwargs):
    return SingleTurnEnv(dataset=ROWS * size, **kwargs)
"""

SUBCLASS = """
class PaintEnv(SingleTurnEnv):
    def __init__(self, colour: str = "red", **kwargs):
        self.colour = colour
        super().__init__(**kwargs)


def load_environment(size: int = 1, **kwargs):
    return PaintEnv(dataset=ROWS * size, **kwargs)
"""

PLAIN_CLASS = """
class Board:
    def __init__(self, width: int = 3, height: int = 3):
        self.width, self.height = width, height


def load_environment(**kwargs):
    Board(**kwargs)
    return SingleTurnEnv(dataset=ROWS)
"""

UNREADABLE = """
def load_environment(seed: int = 0, **kwargs):
    (lambda width=3: width)(**kwargs)
    return SingleTurnEnv(dataset=ROWS)
"""


def test_eval_names_the_a_argument_the_loader_and_environment_parameters(
    loader, capsys: pytest.CaptureFixture[str]
) -> None:
    name = loader(PASSES_ON)
    code, _, err = run(["eval", name, "-a", '{"sytem_prompt": "be brief"}'], capsys)
    assert code == 2, err
    assert "Traceback" not in err and "unexpected keyword argument" not in err
    assert "-a argument 'sytem_prompt'" in err
    assert ".load_environment takes: size" in err  # the loader's own parameters
    assert "SingleTurnEnv, which takes: max_turns, dataset, eval_dataset, system_prompt," in err
    assert "Did you mean 'system_prompt'?" in err
    assert len(err.strip().splitlines()) == 1


def test_play_says_the_same(loader, capsys: pytest.CaptureFixture[str]) -> None:
    name = loader(PASSES_ON)
    code, _, err = run(["play", name, "-a", '{"sytem_prompt": "be brief"}'], capsys)
    assert code == 2, err
    assert "-a argument 'sytem_prompt'" in err and "Did you mean 'system_prompt'?" in err


def test_a_subclass_lists_its_own_parameters_before_its_bases(
    loader, capsys: pytest.CaptureFixture[str]
) -> None:
    name = loader(SUBCLASS)
    code, _, err = run(["eval", name, "-a", '{"color": "blue", "size": 2}'], capsys)
    assert code == 2, err
    assert "-a argument 'color'" in err and "'size'" not in err.split("(")[0]
    assert "PaintEnv, which takes: colour, max_turns, dataset, eval_dataset" in err
    assert "Did you mean 'colour'?" in err


def test_pythons_own_refusal_is_read_from_the_class_it_names(
    loader, capsys: pytest.CaptureFixture[str]
) -> None:
    name = loader(PLAIN_CLASS)
    code, _, err = run(["eval", name, "-a", '{"widht": 4, "hieght": 4}'], capsys)
    assert code == 2, err
    assert "unexpected keyword argument" not in err
    assert "-a argument 'widht'" in err
    assert "Board, which takes: width, height" in err
    assert "Did you mean 'width'?" in err


def test_parameters_that_cannot_be_read_are_said_to_be_so(
    loader, capsys: pytest.CaptureFixture[str]
) -> None:
    name = loader(UNREADABLE)
    code, _, err = run(["eval", name, "-a", '{"widht": 4}'], capsys)
    assert code == 2, err
    assert "-a argument 'widht'" in err and ".load_environment takes: seed" in err
    assert "could not be read" in err


def test_the_library_error_names_both_without_the_command_line(loader) -> None:
    name = loader(PASSES_ON)
    with pytest.raises(UnexpectedArgumentError) as caught:
        vfgym.load_environment(name, size=2, rubic=None)
    error = caught.value
    assert isinstance(error, TypeError)
    assert error.names == ["rubic"] and error.suggestions == {"rubic": "rubric"}
    message = str(error)
    assert "does not take argument(s) ['rubic']" in message and "-a" not in message
    assert "takes: size" in message and "SingleTurnEnv, which takes: max_turns, dataset" in message
    assert isinstance(error.__cause__, TypeError)  # the constructor's own words, for -v


def test_a_loader_without_kwargs_names_the_a_argument_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(["eval", "guess-the-number", "-a", '{"dificulty": "easy"}'], capsys)
    assert code == 2, err
    assert "-a argument 'dificulty'" in err and "Did you mean 'difficulty'?" in err
    assert "num_examples" in err


def test_other_type_errors_of_the_loader_are_left_as_they_are(loader) -> None:
    name = loader(
        """
        def load_environment(**kwargs):
            return SingleTurnEnv(dataset=ROWS, max_turns=len(5))
        """
    )
    with pytest.raises(TypeError) as caught:
        vfgym.load_environment(name, anything=1)
    assert not isinstance(caught.value, UnexpectedArgumentError)
    assert "has no len()" in str(caught.value)


def test_a_name_the_loader_sets_itself_is_refused_saying_so(
    loader, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-a dataset=...` for a loader that passes its own `dataset`: Python's "got
    multiple values" named neither the loader nor that the loader sets it."""
    name = loader(PASSES_ON)
    code, _, err = run(["eval", name, "-a", '{"dataset": [], "size": 2}'], capsys)
    assert code == 2
    assert "sets 'dataset' itself" in err and "load_environment" in err
    assert "leave it out" in err and "Traceback" not in err
    with pytest.raises(TypeError, match="sets 'dataset' itself") as caught:
        vfgym.load_environment(name, dataset=[])
    assert not isinstance(caught.value, UnexpectedArgumentError)
