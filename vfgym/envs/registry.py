"""Finding environments by name: the `vfgym.environments` entry-point group.

The built-in catalogue registers through the same entry-point group a
third-party package uses, so a user's own package of games plugs in exactly like
the built-in ones:

    [project.entry-points."vfgym.environments"]
    my-game = "my_package.my_game:load_environment"

A module may describe itself with module-level constants, read without
building the environment: `GYM_ID` (default: `vfgym/<CamelCaseName>-v0`), `KIND`
("game" or "tool"), `NEEDS_SANDBOX` (bool); its docstring's first line is the
summary.

Wherever a name is taken, so is `module:function` or a path to a `.py` file (see
`vfgym.envs.references`): `load_environment` is the one function that turns any of
the three into an environment, and every command builds its environment with it. A
module that fails to import raises `EnvironmentImportError` with its own error,
whichever way it was named.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import logging
import math
from dataclasses import dataclass
from importlib import metadata
from types import ModuleType
from typing import TYPE_CHECKING, Any

from vfgym.compat.alias import with_verifiers_alias
from vfgym.envs._loader_args import checked_env_args
from vfgym.envs._loader_errors import by_name, call_loader, closest_names
from vfgym.envs.references import (
    check_vfgym_package,
    hollow_package_hint,
    is_reference,
    resolve_reference,
)
from vfgym.errors import EnvironmentImportError, UnexpectedArgumentError, UnknownEnvironmentError

if TYPE_CHECKING:
    from vfgym.envs.environment import Environment

ENTRY_POINT_GROUP = "vfgym.environments"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EnvironmentInfo:
    """What `vfgym list` shows about one registered environment."""

    name: str
    target: str
    gym_id: str
    kind: str
    needs_sandbox: bool
    summary: str
    distribution: str | None
    #: The rewards it promises, from the module's `REWARD_RANGE` (default 0 to 1);
    #: `vfgym check` holds it to them.
    reward_range: tuple[float, float] = (0.0, 1.0)
    #: The least reward its reference policy earns on every example, from the module's
    #: `REFERENCE_REWARD` (default: the top of `reward_range`, i.e. it solves them);
    #: None when the reference plays well but promises no result (it can lose).
    reference_reward: float | None = 1.0


def camel_case(name: str) -> str:
    """`guess-the-number` -> `GuessTheNumber`: the name part of a Gym id."""
    return "".join(
        part[:1].upper() + part[1:] for part in name.replace("_", "-").split("-") if part
    )


def _entry_points() -> dict[str, metadata.EntryPoint]:
    check_vfgym_package()  # a hollow `vfgym` would make entries fail far from the cause
    found: dict[str, metadata.EntryPoint] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)  # the first installed distribution wins
    return found


def registered_names() -> list[str]:
    """Every environment name installed packages register, sorted."""
    return sorted(_entry_points())


def _module_of(name: str, ep: metadata.EntryPoint) -> ModuleType:
    """The module of entry point `ep`, or `EnvironmentImportError` with its error."""
    try:
        # (an environment written for verifiers 0.1.x gets the `verifiers` alias)
        return with_verifiers_alias(lambda: importlib.import_module(ep.module))
    except Exception as exc:
        raise EnvironmentImportError(name, ep.value, exc, hollow_package_hint(exc)) from exc


def describe(name: str) -> EnvironmentInfo:
    """The registry's description of `name` (imports its module, builds nothing).

    `name` may also be `module:function` or a path to a `.py` file; its Gym id then
    defaults to one made from the module's name."""
    if is_reference(name):
        reference = resolve_reference(name)
        module = reference.module
        target, default_name, distribution = reference.target, module.__name__, None
    else:
        ep = _lookup(name)
        module = _module_of(name, ep)
        target, default_name = ep.value, name
        distribution = ep.dist.name if ep.dist is not None else None
    doc = inspect.getdoc(module) or ""
    return EnvironmentInfo(
        name=name,
        target=target,
        gym_id=getattr(module, "GYM_ID", default_gym_id(default_name.rpartition(".")[2])),
        kind=getattr(module, "KIND", "game"),
        needs_sandbox=bool(getattr(module, "NEEDS_SANDBOX", False)),
        summary=doc.splitlines()[0] if doc else "",
        distribution=distribution,
        reward_range=(reward_range := _reward_range(getattr(module, "REWARD_RANGE", (0.0, 1.0)))),
        reference_reward=_reference_reward(module, reward_range),
    )


def _reference_reward(module: ModuleType, reward_range: tuple[float, float]) -> float | None:
    declared = getattr(module, "REFERENCE_REWARD", reward_range[1])
    if declared is None:
        return None
    try:
        return float(declared)
    except (TypeError, ValueError):
        return math.nan


def _reward_range(declared: Any) -> tuple[float, float]:
    """A module's `REWARD_RANGE` as two floats; a malformed one as NaNs, which
    `vfgym check` reports (describing must not fail on it: `vfgym list` shows it)."""
    try:
        low, high = declared
        return float(low), float(high)
    except (TypeError, ValueError):
        return math.nan, math.nan


def default_gym_id(name: str) -> str:
    """The Gym id of an environment whose module declares no `GYM_ID`."""
    return f"vfgym/{camel_case(name)}-v0"


def list_environments() -> list[EnvironmentInfo]:
    """Descriptions of every registered environment (built-in and third-party).

    An entry whose module cannot be imported is left out with a logged warning:
    one broken package must not hide every other environment.
    """
    found = []
    for name in registered_names():
        try:
            found.append(describe(name))
        except Exception as exc:
            logger.warning("environment %r is registered but cannot be imported: %s", name, exc)
    return found


def find_entry_point(name: str) -> metadata.EntryPoint:
    """The entry point registered as `name` (or an alias of it), found without
    importing the environment; `UnknownEnvironmentError` lists the known names."""
    return _lookup(name)


def _lookup(name: str) -> metadata.EntryPoint:
    eps = _entry_points()
    if name in eps:
        return eps[name]
    alias = name.replace("_", "-").lower()
    for candidate in (alias, alias.removeprefix("vf-")):
        if candidate in eps:
            return eps[candidate]
    close = difflib.get_close_matches(alias, list(eps), n=3, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise UnknownEnvironmentError(
        f"no environment named {name!r} is registered.{hint} "
        f"Run `vfgym list` to see them all (registered: {', '.join(sorted(eps)) or 'none'}). "
        "An environment that is not installed can be given as 'module:function' (e.g. "
        "my_games.word_ladder:load_environment) or as the path of its .py file."
    )


def _load_function(name: str) -> Any:
    if is_reference(name):
        return resolve_reference(name).loader
    try:
        entry_point = _lookup(name)
    except UnknownEnvironmentError:
        # verifiers-style: an installed module named after the environment that has
        # a load_environment function ("vf-wordle" -> module vf_wordle).
        module_name = name.replace("-", "_")
        if module_name.isidentifier() and importlib.util.find_spec(module_name) is not None:
            module = with_verifiers_alias(lambda: importlib.import_module(module_name))
            if hasattr(module, "load_environment"):
                return module.load_environment
        raise
    loader: Any = _module_of(name, entry_point)
    try:
        for part in entry_point.attr.split("."):
            loader = getattr(loader, part)
        return loader
    except AttributeError as exc:
        raise EnvironmentImportError(name, entry_point.value, exc) from exc


def find_loader(env_id: str) -> Any:
    """The function that builds `env_id` (a registered name, `module:function` or a
    path to a .py file), imported but not called: to read its parameters."""
    return _load_function(env_id)


def load_environment(env_id: str, **env_args: Any) -> Environment:
    """Build an environment named by `env_id`; keyword arguments go to its loader.

    `env_id` is a registered name, `module:function` or a path to a `.py` file (its
    `load_environment`, or `path.py:function`): the one place every command resolves
    its ENV argument, so each accepts all three. A module that fails to import raises
    `EnvironmentImportError` with its own error.

    Raises `UnknownEnvironmentError` with the closest names when there is none,
    and `TypeError` naming the accepted arguments (and the closest one) when the
    loader refuses one, or the type an argument needs when its value does not fit
    the loader's type hints (see `vfgym.envs._loader_args`; a JSON object for a dataclass
    parameter is built into it), or when the loader returns no `Environment` (a
    forgotten `return` would otherwise surface as an AttributeError on None).
    """
    from vfgym.envs.environment import Environment  # here: vfgym.envs imports this module

    loader = _load_function(env_id)
    try:
        signature = inspect.signature(loader)
    except (TypeError, ValueError):
        signature = None
    if signature is not None:
        _check_names(env_id, signature, env_args)
    env = call_loader(env_id, loader, signature, checked_env_args(loader, env_id, env_args))
    if not isinstance(env, Environment):
        where = getattr(loader, "__module__", None)
        name = f"{where}.{loader.__qualname__}" if where else repr(loader)
        raise TypeError(
            f"the loader of environment {env_id!r} ({name}) returned "
            f"{env!r} ({type(env).__name__}), not a vfgym Environment; make it `return` "
            "the environment it builds"
        )
    env.env_id = env.env_id or env_id
    env.env_args = {**env.env_args, **env_args}
    return env


def _check_names(env_id: str, signature: inspect.Signature, env_args: dict[str, Any]) -> None:
    """Refuse argument names the loader cannot take by name, naming those it can.

    A positional-only parameter cannot be given by keyword: with `**kwargs` the value
    would land there unseen while the parameter kept its default, so it is refused
    even then. `*args` is no name a keyword can have.
    """
    parameters = signature.parameters.values()
    named = by_name(parameters)
    takes = ", ".join(named) or "none"
    positional = sorted(set(env_args) & {p.name for p in parameters if p.kind is p.POSITIONAL_ONLY})
    if positional:
        raise TypeError(
            f"environment {env_id!r} takes {positional} as positional-only parameter(s), "
            "which cannot be given by name: leave them out, or drop the `/` from the "
            f"loader's signature to make them settable (it takes by name: {takes})"
        )
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return
    unknown = sorted(set(env_args) - set(named))
    if unknown:
        raise UnexpectedArgumentError(
            env_id, unknown, f"it takes: {takes}", closest_names(unknown, named)
        )


__all__ = [
    "ENTRY_POINT_GROUP",
    "EnvironmentImportError",
    "EnvironmentInfo",
    "UnexpectedArgumentError",
    "UnknownEnvironmentError",
    "camel_case",
    "default_gym_id",
    "describe",
    "find_entry_point",
    "find_loader",
    "list_environments",
    "load_environment",
    "registered_names",
]
