"""Every setting a message names exists: `SandboxConfig.<name>` and `config.<name>`.

An error that tells the user to raise a setting that does not exist (it once said
`SandboxConfig.max_file_bytes` for `max_read_bytes`) sends them looking for nothing.
The check reads every string literal of the package's source, f-strings included,
so messages built anywhere (the in-container runner too) are covered.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from vfgym.sandbox.config import SandboxConfig

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("vfgym", "sandboxes", "games")
#: The settings classes a message may name, by the name it uses.
CONFIG_CLASSES: dict[str, type] = {"SandboxConfig": SandboxConfig}
NAMED_CLASS = re.compile(r"\b([A-Z]\w*Config)\.([A-Za-z_]\w*)")
NAMED_INSTANCE = re.compile(r"(?<![\w.])(?:sandbox_)?config\.([A-Za-z_]\w*)")


def _settings(cls: type) -> set[str]:
    names = (
        {field.name for field in dataclasses.fields(cls)}
        if dataclasses.is_dataclass(cls)
        else set()
    )
    return names | {name for name in dir(cls) if not name.startswith("_")}


def unknown_settings(text: str) -> list[str]:
    """The settings `text` names that no settings class has."""
    unknown = []
    for class_name, name in NAMED_CLASS.findall(text):
        cls = CONFIG_CLASSES.get(class_name)
        if cls is None:
            unknown.append(f"{class_name} (not a settings class this test knows)")
        elif name not in _settings(cls):
            unknown.append(f"{class_name}.{name}")
    every_setting = set().union(*(_settings(cls) for cls in CONFIG_CLASSES.values()))
    unknown += [
        f"config.{name}" for name in NAMED_INSTANCE.findall(text) if name not in every_setting
    ]
    return unknown


def string_literals(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string constant in a module, docstrings and f-string parts too."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def test_every_setting_named_in_a_message_exists() -> None:
    files = [path for source in SOURCES for path in sorted((ROOT / source).rglob("*.py"))]
    assert len(files) > 20  # the package was found
    problems = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in files
        for line, text in string_literals(path)
        for name in unknown_settings(text)
    ]
    assert problems == [], "messages name settings that do not exist:\n" + "\n".join(problems)


def test_the_read_limit_error_names_max_read_bytes() -> None:
    files = (ROOT / "sandboxes" / "python" / "vfgym_runner" / "files.py").read_text()
    assert "raise SandboxConfig.max_read_bytes to read it" in files


@pytest.mark.parametrize(
    ("text", "flagged"),
    [
        ("raise SandboxConfig.max_file_bytes to read it", ["SandboxConfig.max_file_bytes"]),
        ("set config.max_read_byte higher", ["config.max_read_byte"]),
        ("see EnvConfig.turns", ["EnvConfig (not a settings class this test knows)"]),
        ("raise SandboxConfig.max_read_bytes or config.timeout", []),
        ("the sandbox_config.pids limit", []),
    ],
)
def test_the_check_flags_what_does_not_exist(text: str, flagged: list[str]) -> None:
    assert unknown_settings(text) == flagged
