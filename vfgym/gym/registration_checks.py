"""Checking what `register` and `gym.make` are given, before an id is registered or
an environment built.

A bad id, environment reference, default or adapter setting is refused when
`register` is called — not on every later `gym.make` of the id, deep inside the
environment's loader — with what to pass instead.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import operator
from collections.abc import Callable
from typing import Any, SupportsIndex, TypeGuard, get_args

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import get_env_id, parse_env_id

from vfgym.envs.references import is_file_reference
from vfgym.envs.registry import find_entry_point, find_loader
from vfgym.errors import UnknownEnvironmentError
from vfgym.gym.env import GymEnv, ObservationMode

logger = logging.getLogger("vfgym.gym")


#: Keyword arguments of `gym.make_vec` that configure the `GymVectorEnv`.
VECTOR_ARGS = ("mode", "autoreset_mode", "max_episode_steps")


#: Keyword arguments that Gymnasium's `make_vec` itself takes from a spec's kwargs.
MAKE_VEC_ARGS = ("num_envs", "vectorization_mode", "vector_kwargs", "wrappers")


#: Fields of the `EnvSpec` that `register` sets itself (or takes as its own keywords),
#: and what to do instead of passing them as an environment's default.
SPEC_FIELDS = {
    "entry_point": "pass the function that builds the environment as `environment`",
    "vector_entry_point": "every id gets GymVectorEnv's; make_vec(vectorization_mode=...) "
    "picks Gymnasium's",
    "kwargs": "pass the loader's keywords to register itself: register(id, loader, num_examples=3)",
    "order_enforce": "GymEnv refuses step() before reset() itself",
    "disable_env_checker": "gym.make(id, disable_env_checker=False) adds the passive checker",
    "additional_wrappers": "wrap the env gym.make returns",
}


def is_reference(environment: object) -> TypeGuard[str]:
    """True for a 'module:function' string, as Gymnasium writes entry points.

    Registry names never hold a ':' (`register` refuses ids that do for the same
    reason: `gym.make` reads what precedes one as a module). A path to a .py file
    (`games.py:make_game` too) is not one: the registry's `load_environment` builds
    it, as it does a name."""
    return (
        isinstance(environment, str) and ":" in environment and not is_file_reference(environment)
    )


def resolve_reference(reference: str) -> Callable[..., Any]:
    """The callable that a 'module:qualified.name' string names, imported.

    Errors say which part failed, since the string may come from a saved spec
    (`EnvSpec.from_json`) long after it was written."""
    module_name, _, qualname = reference.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(
            f"environment {reference!r}: cannot import module {module_name!r} ({exc}); "
            "install or put on sys.path the package that defines the environment"
        ) from exc
    for part in qualname.split("."):
        if not hasattr(target, part):
            raise ValueError(
                f"environment {reference!r}: {getattr(target, '__name__', target)!r} has no "
                f"attribute {part!r}; give 'module:function' of a function that builds the "
                "environment"
            )
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(
            f"environment {reference!r} is not callable ({type(target).__name__}); give "
            "'module:function' of a function that builds the environment"
        )
    return target


def as_reference(environment: Callable[..., Any]) -> str | None:
    """`environment` as a 'module:qualified.name' string that imports back to the same
    object, or None when there is none (a lambda, a nested or `__main__` function).

    Why: a spec's kwargs hold the environment; as a string, `EnvSpec.to_json()` can
    save the spec and `EnvSpec.from_json` + `gym.make` rebuild it, as for Gymnasium's
    own ids. A function with no importable name stays the object itself: Gymnasium's
    async vector env ships it by value (cloudpickle), which a `__main__` name would
    break in a spawned worker."""
    module = getattr(environment, "__module__", None)
    qualname = getattr(environment, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        return None
    if module == "__main__" or "<" in qualname:  # <lambda>, <locals>
        return None
    reference = f"{module}:{qualname}"
    try:
        resolved = resolve_reference(reference)
    except (TypeError, ValueError):
        return None
    return reference if resolved is environment else None


def is_bool(value: object) -> bool:
    return isinstance(value, bool | np.bool_)


def checked_per_step_reward(value: object) -> bool:
    """`per_step_reward` as a bool; anything else is refused.

    Why: a string such as "no" or "False" is truthy, and taken as it is it would turn
    per-step rewards on, silently changing every reward of the episode."""
    if not is_bool(value):
        raise TypeError(
            f"per_step_reward must be True or False, not {value!r}: "
            "gym.make(id, per_step_reward=True) rewards every step"
        )
    return bool(value)


def checked_num_envs(num_envs: object) -> int:
    """`num_envs` as an int >= 1; numpy ints too, as Gymnasium's own vector envs take."""
    try:  # int and numpy ints; not True, 2.0 or "3"
        count = None if isinstance(num_envs, bool) else operator.index(num_envs)  # type: ignore[arg-type]
    except TypeError:
        count = None
    if count is None:
        raise TypeError(
            f"num_envs must be an int >= 1, not {num_envs!r} ({type(num_envs).__name__})"
        )
    if count < 1:
        raise ValueError(f"num_envs must be an int >= 1, not {count}")
    return count


def check_id(id: object) -> None:
    """Refuse an id that is not `namespace/Name-vN`.

    Gymnasium accepts ids with no namespace or version, but a vfgym id needs both:
    the namespace keeps it apart from Gymnasium's own ids and vfgym's, and the
    version is what lets `gym.make` suggest the right one when asked for another.
    """
    if not isinstance(id, str):
        raise TypeError(f"id must be a str like 'my-ns/MyGame-v0', not {type(id).__name__}")
    try:
        namespace, name, version = parse_env_id(id)
    except gym.error.Error as exc:
        raise ValueError(f"{id!r} is not a valid Gymnasium id ({exc})") from None
    if namespace is None or version is None:
        missing = " and ".join(
            part
            for part, value in (("a namespace", namespace), ("a version", version))
            if value is None
        )
        raise ValueError(
            f"{id!r} lacks {missing}: vfgym ids have the form 'namespace/Name-vN', "
            "e.g. 'my-games/Wordle-v0'"
        )
    check_makeable(id, namespace, name, version)


def check_makeable(id: str, namespace: str, name: str, version: int) -> None:
    """Refuse an id that Gymnasium registers but `gym.make(id)` reads as another.

    `gym.make` takes what comes before a ':' for a module to import, and looks an id up
    by its parsed version: 'Name-v00' is registered under that key, but asked for as
    'Name-v0'. Either way every `gym.make(id)` would fail."""
    if ":" in id:
        raise ValueError(
            f"{id!r} holds a ':', which gym.make reads as 'module:id' and imports the "
            "module before it; register the id without it (gym.make('module:' + id) "
            "still works once registered)"
        )
    canonical = get_env_id(namespace, name, version)
    if canonical != id:
        raise ValueError(
            f"{id!r} would be registered as it is written, but gym.make looks it up "
            f"as {canonical!r}; register {canonical!r} instead"
        )


def checked_max_episode_steps(max_episode_steps: object) -> int | None:
    """`max_episode_steps` as an int >= 1 or None; `gym.make` would refuse others later."""
    if max_episode_steps is None:
        return None
    try:  # int and numpy ints; not True, 2.5 or "5"
        steps = (
            operator.index(max_episode_steps)
            if isinstance(max_episode_steps, SupportsIndex)
            and not isinstance(max_episode_steps, bool)
            else None
        )
    except TypeError:
        steps = None
    if steps is None:
        raise TypeError(
            "max_episode_steps must be an int >= 1 or None (no limit), not "
            f"{max_episode_steps!r} ({type(max_episode_steps).__name__})"
        )
    if steps < 1:
        raise ValueError(f"max_episode_steps must be an int >= 1 or None (no limit), not {steps}")
    return steps


def check_environment(environment: object) -> None:
    """Refuse what `make_env` could never build: neither a known name nor a function.

    A name is looked up among the entry points only, so no environment module is
    imported (nor any broken one's error raised) until the id is made. A
    'module:function' string is imported now: it names one function, whose module the
    caller means to use.
    """
    if not isinstance(environment, str):
        if not callable(environment):
            raise TypeError(
                "environment must be a registered name or a function that builds a vfgym "
                f"environment (e.g. a load_environment), not {type(environment).__name__}"
            )
        return
    if is_reference(environment):
        resolve_reference(environment)
        return
    if is_file_reference(environment):
        find_loader(environment)  # imported now, as a 'module:function' is
        return
    try:
        find_entry_point(environment)  # the registry's own name rules (aliases, suggestions)
    except UnknownEnvironmentError as exc:
        # load_environment's verifiers-style fallback: a module named after it.
        module = environment.replace("-", "_")
        if module.isidentifier() and importlib.util.find_spec(module) is not None:
            return
        raise UnknownEnvironmentError(
            f"{exc} To register an environment of your own, pass the function that "
            "builds it instead of a name."
        ) from None


def check_defaults(defaults: dict[str, Any]) -> None:
    """Refuse defaults that would reach every `gym.make`, whose envs do not take them.

    A spec's kwargs go to both `gym.make` and `gym.make_vec`; vector-env options
    among them make `make_vec` work and every `gym.make` fail. They are refused
    rather than kept for `make_vec` alone: `make_env` cannot tell a default from
    `gym.make(id, mode=...)`, a mistake it should report, not drop.
    """
    refused = [name for name in (*VECTOR_ARGS, *MAKE_VEC_ARGS) if name in defaults]
    if refused:
        raise TypeError(
            f"{refused} are options of gym.make_vec, not of the environment: as defaults "
            "of an id every gym.make would get them too, and fail. Pass them when making "
            "the vector env: gym.make_vec(id, num_envs, mode=..., autoreset_mode=...)"
        )
    fields = [name for name in SPEC_FIELDS if name in defaults]
    if fields:
        instead = "; ".join(f"{name}: {SPEC_FIELDS[name]}" for name in fields)
        raise TypeError(
            f"{fields} are fields of the EnvSpec that register makes, not keywords of the "
            f"environment: as defaults every gym.make would pass them to its loader, and "
            f"fail. Instead — {instead}"
        )


#: The adapter keywords whose values `register` can check without building the
#: environment, each with the values `GymEnv` takes (a test of one) and their words.
_ADAPTER_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "per_step_reward": (is_bool, "True or False"),
    "observation_mode": (
        lambda v: v in get_args(ObservationMode),
        " or ".join(map(repr, get_args(ObservationMode))),
    ),
    "render_mode": (
        lambda v: v is None or v in GymEnv.metadata["render_modes"],
        "None, 'ansi' or 'human'",
    ),
    "dataset": (lambda v: v in ("eval", "train"), "'eval' or 'train'"),
    "max_text_length": (
        lambda v: not isinstance(v, bool) and isinstance(v, int) and v >= 1,
        "an int >= 1",
    ),
    "count_tokens": (lambda v: v is None or callable(v), "None or a function of a turn's text"),
}


def check_adapter_defaults(defaults: dict[str, Any]) -> None:
    """Refuse adapter defaults that `GymEnv` would refuse on every `gym.make` of the id."""
    for name, (valid, expected) in _ADAPTER_CHECKS.items():
        if name in defaults and not valid(defaults[name]):
            raise ValueError(
                f"{name} must be {expected}, not {defaults[name]!r}: as a default of the "
                "id, every gym.make would fail on it"
            )
