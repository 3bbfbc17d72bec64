"""Finding environments by name through the `vfgym.environments` entry points."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import vfgym
from vfgym.envs import MultiTurnEnv
from vfgym.envs.registry import describe, list_environments, registered_names
from vfgym.errors import UnknownEnvironmentError

TOY_MODULE = '''
"""A toy environment from a package that is not vfgym."""

from vfgym.envs import SingleTurnEnv

KIND = "tool"


def load_environment(size: int = 2, **kwargs):
    rows = [{"question": f"q{i}", "answer": str(i)} for i in range(size)]
    return SingleTurnEnv(dataset=rows, **kwargs)
'''


def install_plugin(root: Path, module: str, entry_name: str) -> None:
    """Lay out an installed distribution by hand: a module plus its dist-info."""
    (root / f"{module}.py").write_text(TOY_MODULE)
    dist = root / f"{module}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        textwrap.dedent(
            f"""\
            [vfgym.environments]
            {entry_name} = {module}:load_environment
            """
        )
    )


def test_load_a_builtin_environment_by_name() -> None:
    env = vfgym.load_environment("guess-the-number", num_examples=3)
    assert isinstance(env, MultiTurnEnv)
    assert len(env.get_eval_dataset()) == 3
    assert env.env_id == "guess-the-number"
    assert env.env_args == {"num_examples": 3}


@pytest.mark.parametrize("alias", ["guess_the_number", "Guess-The-Number", "vf-guess-the-number"])
def test_spelling_variants_find_the_same_environment(alias: str) -> None:
    env = vfgym.load_environment(alias, num_examples=1)
    assert type(env).__name__ == "GuessTheNumberEnv"


async def test_a_loaded_environment_runs_end_to_end(model_server) -> None:
    env = vfgym.load_environment("guess-the-number", num_examples=3, difficulty="easy")
    server = await model_server(env.reference_policy)
    out = await env.evaluate(server.client(), "m")
    assert out.reward == [1.0, 1.0, 1.0]
    assert all(s["stop_reason"] == "completed" for s in out.state)


def test_an_unknown_name_suggests_close_matches() -> None:
    with pytest.raises(UnknownEnvironmentError) as caught:
        vfgym.load_environment("guess-the-numbr")
    message = str(caught.value)
    assert "no environment named 'guess-the-numbr'" in message
    assert "Did you mean: guess-the-number" in message
    assert "vfgym list" in message
    assert isinstance(caught.value, LookupError)


def test_an_unknown_argument_names_the_accepted_ones() -> None:
    with pytest.raises(TypeError) as caught:
        vfgym.load_environment("guess-the-number", num_exmaples=3)
    message = str(caught.value)
    assert "does not take argument(s) ['num_exmaples']" in message
    assert "num_examples" in message and "difficulty" in message


def test_the_catalogue_describes_itself() -> None:
    assert "guess-the-number" in registered_names()
    info = describe("guess-the-number")
    assert info.gym_id == "vfgym/GuessTheNumber-v0"
    assert info.kind == "game"
    assert info.needs_sandbox is False
    assert info.summary.startswith("Guess the number")
    assert info.target == "vfgym.games.guess_the_number:load_environment"
    assert "guess-the-number" in {e.name for e in list_environments()}


def test_a_third_party_package_plugs_in_like_the_builtins(tmp_path, monkeypatch) -> None:
    install_plugin(tmp_path, "toy_games", "toy-task")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "toy-task" in registered_names()
    info = describe("toy-task")
    assert info.distribution == "toy_games"
    assert info.kind == "tool"
    assert info.gym_id == "vfgym/ToyTask-v0"
    env = vfgym.load_environment("toy-task", size=4, system_prompt="Be brief.")
    assert len(env.get_dataset()) == 4
    assert env.get_dataset()[0]["prompt"][0] == {"role": "system", "content": "Be brief."}
    assert env.env_args == {"size": 4, "system_prompt": "Be brief."}


def test_a_verifiers_style_module_is_found_by_its_name(tmp_path, monkeypatch) -> None:
    (tmp_path / "vf_toy_quiz.py").write_text(TOY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    env = vfgym.load_environment("vf-toy-quiz", size=1)
    assert env.env_id == "vf-toy-quiz"
    assert len(env.get_dataset()) == 1


def test_a_broken_package_does_not_hide_the_others(tmp_path, monkeypatch, caplog) -> None:
    install_plugin(tmp_path, "toy_broken", "broken-task")
    (tmp_path / "toy_broken.py").write_text("raise ImportError('missing dependency: frobnicate')")
    monkeypatch.syspath_prepend(str(tmp_path))
    names = {info.name for info in list_environments()}
    assert "guess-the-number" in names
    assert "broken-task" not in names
    assert "broken-task" in caplog.text and "frobnicate" in caplog.text
    with pytest.raises(ImportError, match="frobnicate"):
        vfgym.load_environment("broken-task")


@pytest.mark.parametrize(
    ("name", "args", "needed"),
    [
        ("wordle", {"max_turns": "5"}, "'max_turns' must be int or null, not '5'"),
        ("wordle", {"num_examples": True}, "'num_examples' must be int, not True"),
        ("guess-the-number", {"difficulty": 3}, "'difficulty' must be str, not 3"),
        ("python-math", {"families": "arithmetic"}, "'families' must be tuple or list"),
    ],
)
def test_an_argument_of_the_wrong_type_is_refused_before_the_loader_runs(
    name: str, args: dict, needed: str
) -> None:
    with pytest.raises(TypeError, match=needed.replace("(", r"\(")):
        vfgym.load_environment(name, **args)


def test_json_values_that_fit_the_hints_pass_as_they_are() -> None:
    env = vfgym.load_environment("python-math", families=["arithmetic"], max_turns=4)
    assert env.max_turns == 4
    env = vfgym.load_environment("wordle", max_turns=None, num_examples=3)
    assert len(env.get_eval_dataset()) == 3


def test_a_json_object_for_a_sandbox_config_is_built_into_one() -> None:
    from vfgym.sandbox import SandboxConfig

    env = vfgym.load_environment("python-math", sandbox_config={"cpus": 2, "timeout": 5})
    assert env.sandbox_config == SandboxConfig(cpus=2, timeout=5)
    with pytest.raises(TypeError, match=r"has no field\(s\) \['cpu'\]; its fields are: image"):
        vfgym.load_environment("python-math", sandbox_config={"cpu": 2})
