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
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import logging
from dataclasses import dataclass
from importlib import metadata
from types import ModuleType
from typing import TYPE_CHECKING, Any

from vfgym.compat.alias import with_verifiers_alias
from vfgym.envs._loader_args import checked_env_args
from vfgym.envs._loader_errors import by_name, call_loader, closest_names
from vfgym.errors import UnexpectedArgumentError, UnknownEnvironmentError

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


def camel_case(name: str) -> str:
    """`guess-the-number` -> `GuessTheNumber`: the name part of a Gym id."""
    return "".join(
        part[:1].upper() + part[1:] for part in name.replace("_", "-").split("-") if part
    )


def _entry_points() -> dict[str, metadata.EntryPoint]:
    found: dict[str, metadata.EntryPoint] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)  # the first installed distribution wins
    return found


def registered_names() -> list[str]:
    """Every environment name installed packages register, sorted."""
    return sorted(_entry_points())


def _module_of(ep: metadata.EntryPoint) -> ModuleType:
    # (an environment written for verifiers 0.1.x gets the `verifiers` alias)
    return with_verifiers_alias(lambda: importlib.import_module(ep.module))


def describe(name: str) -> EnvironmentInfo:
    """The registry's description of `name` (imports its module, builds nothing)."""
    ep = _lookup(name)
    module = _module_of(ep)
    doc = inspect.getdoc(module) or ""
    return EnvironmentInfo(
        name=name,
        target=ep.value,
        gym_id=getattr(module, "GYM_ID", f"vfgym/{camel_case(name)}-v0"),
        kind=getattr(module, "KIND", "game"),
        needs_sandbox=bool(getattr(module, "NEEDS_SANDBOX", False)),
        summary=doc.splitlines()[0] if doc else "",
        distribution=ep.dist.name if ep.dist is not None else None,
    )


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
        f"Run `vfgym list` to see them all (registered: {', '.join(sorted(eps)) or 'none'})."
    )


def _load_function(name: str) -> Any:
    try:
        entry_point = _lookup(name)
        return with_verifiers_alias(entry_point.load)
    except UnknownEnvironmentError:
        # verifiers-style: an installed module named after the environment that has
        # a load_environment function ("vf-wordle" -> module vf_wordle).
        module_name = name.replace("-", "_")
        if module_name.isidentifier() and importlib.util.find_spec(module_name) is not None:
            module = with_verifiers_alias(lambda: importlib.import_module(module_name))
            if hasattr(module, "load_environment"):
                return module.load_environment
        raise


def load_environment(env_id: str, **env_args: Any) -> Environment:
    """Build a registered environment by name; keyword arguments go to its loader.

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
    "EnvironmentInfo",
    "UnexpectedArgumentError",
    "UnknownEnvironmentError",
    "camel_case",
    "describe",
    "find_entry_point",
    "list_environments",
    "load_environment",
    "registered_names",
]
