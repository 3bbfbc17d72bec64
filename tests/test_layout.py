"""The package's shape: layers that import downwards only, the module paths users
import, and one exception tree."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import vfgym
from vfgym.errors import VFGymError

PACKAGE = Path(vfgym.__file__).parent


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _under_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The vfgym modules `name` imports anywhere (functions included, `TYPE_CHECKING`
    blocks not), with the packages each import loads on the way."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _under_type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names if alias.name in modules)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                for alias in child.names:
                    target = f"{base}.{alias.name}"
                    found.add(target if target in modules else base)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    with_parents = set()
    for target in found & modules.keys():
        with_parents.add(target)
        parts = target.split(".")
        for end in range(2, len(parts)):
            parent = ".".join(parts[:end])
            if not name.startswith(parent + ".") and parent != name:
                with_parents.add(parent)
    with_parents.discard(name)
    return with_parents


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in graph:
        if node not in index:
            visit(node)
    return groups


def test_no_module_imports_one_that_imports_it_back() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert _cycles(graph) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


#: Module paths an environment written for verifiers 0.1.x (or a vfgym user) imports,
#: with a name each must provide.
PUBLIC_PATHS = {
    "vfgym": "MultiTurnEnv",
    "vfgym.types": "State",
    "vfgym.errors": "VFGymError",
    "vfgym.parsers": "XMLParser",
    "vfgym.parsers.parser": "Parser",
    "vfgym.parsers.think_parser": "ThinkParser",
    "vfgym.parsers.xml_parser": "XMLParser",
    "vfgym.rubrics": "Rubric",
    "vfgym.rubrics.rubric": "Rubric",
    "vfgym.rubrics.judge_rubric": "JudgeRubric",
    "vfgym.rubrics.rubric_group": "RubricGroup",
    "vfgym.rubrics.tool_rubric": "ToolRubric",
    "vfgym.envs": "Environment",
    "vfgym.envs.environment": "Environment",
    "vfgym.envs.multiturn_env": "MultiTurnEnv",
    "vfgym.envs.singleturn_env": "SingleTurnEnv",
    "vfgym.envs.tool_env": "ToolEnv",
    "vfgym.envs.stateful_tool_env": "StatefulToolEnv",
    "vfgym.envs.env_group": "EnvGroup",
    "vfgym.tools": "convert_func_to_oai_tool",
    "vfgym.gym": "GymEnv",
    "vfgym.sandbox": "SandboxPool",
    "vfgym.sandbox.env": "SandboxEnv",
    "vfgym.inference.server": "ModelServer",
    "vfgym.training.processing": "process_env_results",
    "vfgym.games": "TextGame",
}


@pytest.mark.parametrize("path", sorted(PUBLIC_PATHS))
def test_public_module_paths_keep_their_names(path: str) -> None:
    assert hasattr(importlib.import_module(path), PUBLIC_PATHS[path])


#: Exceptions that never leave vfgym: each is caught where it is raised and turned into
#: a result, a retry or one of the tree's errors.
INTERNAL_SIGNALS = {
    "vfgym.inference.client.EmptyModelResponse",  # retried, then a ModelCallError
    "vfgym.sandbox.channel.ForgedReplyError",  # ends the sandbox: SandboxLostError
    "vfgym.envs.tool_env.ToolCallError",  # its message is the model's tool result
    "vfgym.engine._async.SuspendedError",  # an inline call fell back to a task
    "vfgym.inference.server.protocol.HTTPFailure",  # becomes an HTTP error response
    "vfgym.remote.protocol.FrameError",  # becomes an env server's error frame
    "vfgym.cli._support.Terminated",  # SIGTERM, ended as exit code 143
}


def _exception_classes() -> dict[str, type[BaseException]]:
    found = {}
    for info in pkgutil.walk_packages(vfgym.__path__, "vfgym."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == info.name
                and not name.startswith("_")
            ):
                found[f"{info.name}.{name}"] = value
    return found


def test_every_public_exception_derives_from_vfgym_error() -> None:
    classes = _exception_classes()
    assert INTERNAL_SIGNALS <= classes.keys(), "an internal signal was renamed or removed"
    outside = {
        name for name, cls in classes.items() if not issubclass(cls, VFGymError)
    } - INTERNAL_SIGNALS
    assert outside == set()


def test_the_errors_docstring_draws_every_class_of_the_tree() -> None:
    import vfgym.errors as errors

    drawn = errors.__doc__ or ""
    for name, cls in _exception_classes().items():
        if issubclass(cls, VFGymError):
            assert f" {cls.__name__}" in drawn, name
