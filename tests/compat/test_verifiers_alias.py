"""`vfgym.compat.install_verifiers_alias`: `import verifiers` and every module path of
verifiers 0.1.7.post0 resolve to vfgym, or say what to use instead.

The wheel's own source (unpacked into `.venv/verifiers-ref`, or at $VFREF) is the
list checked against; it is read as text, never imported.
"""

from __future__ import annotations

import ast
import importlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import vfgym as vf
from vfgym.compat import (
    install_verifiers_alias,
    real_verifiers_available,
    uninstall_verifiers_alias,
    verifiers_alias_active,
    with_verifiers_alias,
)
from vfgym.compat.table import MODULES
from vfgym.errors import VerifiersNameUnavailable

REPO = Path(__file__).resolve().parents[2]


def _reference_root() -> Path | None:
    for candidate in (os.environ.get("VFREF"), REPO / ".venv" / "verifiers-ref"):
        if candidate and (Path(candidate) / "verifiers" / "__init__.py").is_file():
            return Path(candidate) / "verifiers"
    return None


@pytest.fixture
def reference() -> Path:
    root = _reference_root()
    if root is None:
        if os.environ.get("VFGYM_REQUIRE_VFREF") == "1":
            pytest.fail("VFGYM_REQUIRE_VFREF=1 but no verifiers 0.1.7.post0 source was found")
        pytest.skip("no verifiers 0.1.7.post0 source in .venv/verifiers-ref or $VFREF")
    return root


@pytest.fixture(autouse=True)
def no_alias_left_behind() -> Iterator[None]:
    uninstall_verifiers_alias()
    try:
        yield
    finally:
        uninstall_verifiers_alias()


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _public_names(path: Path) -> set[str]:
    """What a module of the wheel defines at top level, plus, in a package's
    __init__, what it re-exports from verifiers itself (and its `__all__`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
                    if target.id == "__all__" and isinstance(node.value, ast.List):
                        names.update(str(elt.value) for elt in node.value.elts)  # type: ignore[attr-defined]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif (
            isinstance(node, ast.ImportFrom)
            and path.name == "__init__.py"
            and (node.level or (node.module or "").startswith("verifiers"))
        ):
            if any(alias.name == "*" for alias in node.names):
                star = path.parent / f"{node.module}.py"
                names.update(_public_names(star))
            names.update(alias.asname or alias.name for alias in node.names if alias.name != "*")
    return {name for name in names if not name.startswith("_")}


def _wheel(root: Path) -> dict[str, set[str]]:
    """Each module of the wheel and its public names; a folder without __init__.py
    (a namespace package such as verifiers.rl) is a module with no names."""
    found = {_module_name(root, path): _public_names(path) for path in sorted(root.rglob("*.py"))}
    for name in list(found):
        parts = name.split(".")
        for end in range(1, len(parts)):
            found.setdefault(".".join(parts[:end]), set())
    return found


def test_every_module_path_of_the_wheel_has_an_entry(reference: Path) -> None:
    assert set(_wheel(reference)) == set(MODULES)


def test_every_public_name_of_the_wheel_is_given_or_refused_with_advice(reference: Path) -> None:
    assert install_verifiers_alias(force=True)
    given, refused = 0, []
    for module_name, names in _wheel(reference).items():
        module = importlib.import_module(module_name)
        assert module.__name__ == module_name
        for name in sorted(names):
            try:
                value = getattr(module, name)
            except VerifiersNameUnavailable as exc:
                refused.append(f"{module_name}.{name}")
                message = str(exc)
                assert f"{module_name}.{name}" in message
                advice = message.partition("is not provided by vfgym:")[2]
                assert "vfgym" in advice or "openai" in advice, message
            else:
                given += 1
                assert value is not None or name == "logger"
    # what environments are built from is all given; only training, the scripts and
    # run plumbing are refused
    building_blocks = ("verifiers.envs", "verifiers.parsers", "verifiers.rubrics")
    assert [name for name in refused if name.startswith(building_blocks)] == []
    assert given > 70


def test_the_alias_serves_vfgyms_own_objects() -> None:
    assert install_verifiers_alias(force=True)
    import verifiers
    from verifiers.envs.multiturn_env import MultiTurnEnv
    from verifiers.parsers.maybe_think_parser import MaybeThinkParser
    from verifiers.rubrics.math_rubric import MathRubric
    from verifiers.types import Messages

    assert verifiers.MultiTurnEnv is MultiTurnEnv is vf.MultiTurnEnv
    assert MaybeThinkParser is vf.MaybeThinkParser
    assert MathRubric is vf.MathRubric
    assert Messages == vf.Messages
    assert verifiers.__version__ == "0.1.7.post0"
    assert "Environment" in dir(verifiers)
    assert verifiers.envs is sys.modules["verifiers.envs"]


def test_a_refused_name_raises_an_import_error_saying_what_to_use() -> None:
    assert install_verifiers_alias(force=True)
    with pytest.raises(VerifiersNameUnavailable, match="process_env_results") as caught:
        from verifiers.rl.trainer import GRPOTrainer  # noqa: F401
    assert isinstance(caught.value, ImportError) and isinstance(caught.value, vf.VFGymError)
    with pytest.raises(VerifiersNameUnavailable, match="vfgym eval"):
        from verifiers.scripts.eval import main  # noqa: F401
    import verifiers

    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        _ = verifiers.NoSuchThing
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("verifiers.no_such_module")


def test_the_alias_stands_aside_for_an_installed_verifiers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "verifiers").mkdir()
    (tmp_path / "verifiers" / "__init__.py").write_text("REAL = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert real_verifiers_available()
    assert install_verifiers_alias() is False
    assert not verifiers_alias_active()
    assert install_verifiers_alias(force=True) is True
    import verifiers

    assert not hasattr(verifiers, "REAL") and verifiers.Environment is vf.Environment


def test_forcing_the_alias_over_an_imported_verifiers_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "verifiers").mkdir()
    (tmp_path / "verifiers" / "__init__.py").write_text("REAL = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    import verifiers

    try:
        assert verifiers.REAL
        with pytest.raises(RuntimeError, match="before anything imports verifiers"):
            install_verifiers_alias(force=True)
        assert install_verifiers_alias() is False
    finally:
        del sys.modules["verifiers"]


def test_with_verifiers_alias_installs_it_only_for_a_missing_verifiers(tmp_path: Path) -> None:
    assert not real_verifiers_available() or pytest.skip("a real verifiers is installed")
    (tmp_path / "needs_verifiers_mod.py").write_text(
        "import verifiers\nNAME = verifiers.__name__\n"
    )
    (tmp_path / "needs_other_mod.py").write_text("import no_such_dependency_here\n")
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(ModuleNotFoundError, match="no_such_dependency_here"):
            with_verifiers_alias(lambda: importlib.import_module("needs_other_mod"))
        assert not verifiers_alias_active()
        module = with_verifiers_alias(lambda: importlib.import_module("needs_verifiers_mod"))
        assert module.NAME == "verifiers" and verifiers_alias_active()
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("needs_verifiers_mod", "needs_other_mod"):
            sys.modules.pop(name, None)


def test_uninstalling_forgets_the_alias_modules() -> None:
    assert install_verifiers_alias(force=True)
    importlib.import_module("verifiers.utils.data_utils")
    uninstall_verifiers_alias()
    assert not any(name.split(".")[0] == "verifiers" for name in sys.modules)
    assert not verifiers_alias_active()
