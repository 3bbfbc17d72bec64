"""`import vfgym` loads nothing heavy; every public name still resolves, from its module."""

from __future__ import annotations

import importlib
import subprocess
import sys

import vfgym


def test_every_public_name_resolves_to_its_modules_object() -> None:
    for name, module in vfgym._EXPORTS.items():
        assert getattr(vfgym, name) is getattr(importlib.import_module(module), name), name


def test_the_seeds_vocabulary_is_exported_whole() -> None:
    """The types' names are listed in `vfgym/__init__.py` (importing `vfgym.types` to
    read them would load openai): the list must follow `vfgym.types.__all__`."""
    types = importlib.import_module("vfgym.types")
    exported = {name for name, module in vfgym._EXPORTS.items() if module == "vfgym.types"}
    assert exported == set(types.__all__)


def test_star_import_and_dir_show_the_public_names() -> None:
    namespace: dict[str, object] = {}
    exec("from vfgym import *", namespace)
    assert set(vfgym.__all__) <= set(namespace)
    assert set(vfgym.__all__) <= set(dir(vfgym))


def test_an_unknown_name_says_so() -> None:
    try:
        vfgym.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "no attribute 'NoSuchThing'" in str(exc)
    else:
        raise AssertionError("vfgym.NoSuchThing resolved")


def test_import_vfgym_loads_neither_openai_nor_docker_nor_gymnasium() -> None:
    heavy = ("openai", "docker", "gymnasium", "pydantic")
    code = f"import sys, vfgym; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
