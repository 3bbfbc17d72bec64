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
from typing import Any

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


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A factory: `name = toy(source)` writes a module whose `load_environment` is the
    given source (verifiers-style, found by its name) and returns the name to load.

    The loader records what it received in `module.SEEN`.
    """
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(source: str) -> str:
        module = f"vf_loader_args_{next(_numbers)}_{tmp_path.name[-8:]}".replace("-", "_")
        header = textwrap.dedent(
            """\
            from __future__ import annotations

            import dataclasses
            from typing import Literal

            from vfgym.envs import SingleTurnEnv

            ROWS = [{"question": "q", "answer": "a"}]
            SEEN = {}
            """
        )
        (tmp_path / f"{module}.py").write_text(header + textwrap.dedent(source))
        return module.replace("_", "-")

    return make


def seen(name: str) -> dict[str, Any]:
    import importlib

    return importlib.import_module(name.replace("-", "_")).SEEN


DATACLASS_LOADER = """
    @dataclasses.dataclass
    class Judge:
        model: str
        temperature: float = 0.0

    def load_environment(judge: Judge | None = None):
        SEEN["judge"] = judge
        return SingleTurnEnv(dataset=ROWS)
    """


def test_null_for_a_parameter_whose_default_is_none_is_accepted(toy) -> None:
    """`seed: int = None` declares None its default; passing the default is no error."""
    name = toy(
        """
        def load_environment(seed: int = None, num_examples: int = 1):
            SEEN["seed"] = seed
            return SingleTurnEnv(dataset=ROWS * num_examples)
        """
    )
    vfgym.load_environment(name, seed=None)
    assert seen(name) == {"seed": None}
    with pytest.raises(TypeError, match="'num_examples' must be int, not None"):
        vfgym.load_environment(name, num_examples=None)  # its default is no None


def test_items_of_the_wrong_type_are_refused_with_where_they_are(toy) -> None:
    name = toy(
        """
        def load_environment(sizes: list[int] = (), weights: dict[str, float] = None):
            return SingleTurnEnv(dataset=ROWS)
        """
    )
    with pytest.raises(TypeError) as caught:
        vfgym.load_environment(name, sizes=[3, "5"])
    assert "argument 'sizes' must be list: sizes[1] must be int, not '5' (str)" in str(caught.value)
    with pytest.raises(TypeError, match=r"weights\['b'\] must be float, not 'x' \(str\)"):
        vfgym.load_environment(name, weights={"a": 1, "b": "x"})
    with pytest.raises(TypeError, match=r"sizes\[0\] must be int, not True"):
        vfgym.load_environment(name, sizes=[True])
    vfgym.load_environment(name, sizes=[1, 2], weights={"a": 1, "b": 0.5})


def test_a_json_list_for_a_tuple_or_set_parameter_arrives_as_one(toy) -> None:
    """JSON has no tuples or sets: a loader that compares, hashes or adds tuples got a list."""
    name = toy(
        """
        def load_environment(shape: tuple[int, int] = (3, 3), tags: frozenset[str] = frozenset()):
            SEEN.update(shape=shape, tags=tags)
            return SingleTurnEnv(dataset=ROWS)
        """
    )
    env = vfgym.load_environment(name, shape=[4, 5], tags=["a", "b", "a"])
    assert seen(name) == {"shape": (4, 5), "tags": frozenset({"a", "b"})}
    assert env.env_args == {"shape": [4, 5], "tags": ["a", "b", "a"]}  # recorded as given
    with pytest.raises(TypeError, match=r"'shape' must be tuple, not \[4\] \(list\): it needs 2"):
        vfgym.load_environment(name, shape=[4])


def test_a_literal_refuses_a_value_of_another_type(toy) -> None:
    name = toy(
        """
        def load_environment(level: Literal[1, 2] = 1):
            SEEN["level"] = level
            return SingleTurnEnv(dataset=ROWS)
        """
    )
    for wrong in (True, 1.0):
        with pytest.raises(TypeError, match=rf"'level' must be 1 or 2, not {wrong!r}"):
            vfgym.load_environment(name, level=wrong)
    vfgym.load_environment(name, level=2)
    assert seen(name) == {"level": 2}


def test_a_dataclass_parameter_refuses_what_is_not_a_json_object(toy) -> None:
    name = toy(DATACLASS_LOADER)
    with pytest.raises(TypeError) as caught:
        vfgym.load_environment(name, judge="gpt-4o")
    message = str(caught.value)
    assert "argument 'judge' must be Judge or null, not 'gpt-4o' (str)" in message
    assert "JSON object" in message and "model" in message  # what to write instead


def test_a_dataclass_built_from_json_has_its_fields_checked(toy) -> None:
    name = toy(DATACLASS_LOADER)
    with pytest.raises(TypeError, match=r"judge.temperature must be float, not 'hot' \(str\)"):
        vfgym.load_environment(name, judge={"model": "m", "temperature": "hot"})
    with pytest.raises(TypeError) as caught:
        vfgym.load_environment(name, judge={"temperature": 0.5})
    message = str(caught.value)
    assert "environment" in message and "'judge' (Judge) needs field(s) ['model']" in message
    vfgym.load_environment(name, judge={"model": "m"})
    assert seen(name)["judge"].model == "m"


def test_a_wrong_type_error_gives_an_example_to_write() -> None:
    with pytest.raises(TypeError) as caught:
        vfgym.load_environment("wordle", max_turns="5")
    assert 'e.g. {"max_turns": 5}' in str(caught.value)
    with pytest.raises(TypeError) as caught:
        vfgym.load_environment("guess-the-number", num_examples=2.0)
    assert 'e.g. {"num_examples": 2}' in str(caught.value)


def test_an_unknown_argument_suggests_the_close_name() -> None:
    with pytest.raises(TypeError) as caught:
        vfgym.load_environment("guess-the-number", num_exmaples=3)
    assert "did you mean 'num_examples'?" in str(caught.value)


def test_a_positional_only_parameter_is_not_swallowed_by_kwargs(toy) -> None:
    """`size` given by name went into **kwargs unseen, and `size` kept its default."""
    name = toy(
        """
        def load_environment(size=1, /, **kwargs):
            return SingleTurnEnv(dataset=ROWS * size, **kwargs)
        """
    )
    with pytest.raises(TypeError) as caught:
        vfgym.load_environment(name, size=2)
    message = str(caught.value)
    assert "'size'" in message and "positional-only" in message


def test_star_args_is_no_argument_name(toy) -> None:
    name = toy(
        """
        def load_environment(*args, max_turns: int = 3):
            return SingleTurnEnv(dataset=ROWS)
        """
    )
    with pytest.raises(TypeError) as caught:
        vfgym.load_environment(name, args=[1])
    message = str(caught.value)
    assert "does not take argument(s) ['args']; it takes: max_turns" in message


def test_a_loader_that_returns_no_environment_is_named(toy) -> None:
    name = toy(
        """
        def load_environment(size: int = 1):
            env = SingleTurnEnv(dataset=ROWS * size)
        """
    )
    with pytest.raises(TypeError) as caught:
        vfgym.load_environment(name)
    message = str(caught.value)
    assert "load_environment" in message and "returned None" in message
    assert "return" in message and "Environment" in message
