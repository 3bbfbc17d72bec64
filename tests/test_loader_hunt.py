"""Loading environments by name with keyword arguments (`vfgym eval ENV -a '{json}'`):
edges found by probing, through the registry with real loader modules."""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path
from typing import Any

import pytest

import vfgym

_numbers = itertools.count()


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A factory: `name = toy(source)` writes a module whose `load_environment` is the
    given source (verifiers-style, found by its name) and returns the name to load.

    The loader records what it received in `module.SEEN`.
    """
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(source: str) -> str:
        module = f"vf_loader_hunt_{next(_numbers)}_{tmp_path.name[-8:]}".replace("-", "_")
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


DATACLASS_LOADER = """
    @dataclasses.dataclass
    class Judge:
        model: str
        temperature: float = 0.0

    def load_environment(judge: Judge | None = None):
        SEEN["judge"] = judge
        return SingleTurnEnv(dataset=ROWS)
    """


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
