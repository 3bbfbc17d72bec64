"""Gymnasium ids for vfgym environments: `gym.make("vfgym/Wordle-v0", num_examples=50)`.

Every environment in the `vfgym.environments` entry-point group (the built-in
catalogue and any installed third-party package) gets the id its module declares
(`GYM_ID`, default `vfgym/<CamelCaseName>-v0`). Gymnasium 1.x has no plugin
discovery: ids exist once the package that registers them is imported, so the ids
are registered when `vfgym.gym` is imported (or use `gym.make("vfgym.gym:vfgym/
Wordle-v0")`, which imports it for you).

Keyword arguments of `gym.make` go to the environment's loader, except the
adapter's own (`observation_mode`, `per_step_reward`, `render_mode`, `dataset`,
`max_text_length`, `count_tokens`), which go to `GymEnv`. A SandboxEnv made here,
alone or as a member of an `EnvGroup`, gets a pool of one sandbox (one episode at a
time needs no more) unless `gym.make` is given a `pool_size`.

Every id also has a `vector_entry_point`, so `gym.make_vec(id, num_envs=8)` gives a
`GymVectorEnv` (Gymnasium uses a spec's vector entry point unless
`vectorization_mode="sync"` or `"async"` asks for its own vector envs); there the
vector env's own options (`mode`, `autoreset_mode`) are keyword arguments too, of
`make_vec` only: `register` refuses them as an id's defaults, which `gym.make` also gets.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import operator
from collections.abc import Callable, Iterator
from typing import Any, get_args

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import EnvSpec, get_env_id, parse_env_id
from gymnasium.vector import AutoresetMode

from vfgym.envs.env_group import EnvGroup
from vfgym.envs.environment import Environment
from vfgym.envs.multiturn_env import MultiTurnEnv
from vfgym.envs.registry import describe, find_entry_point, load_environment, registered_names
from vfgym.errors import UnknownEnvironmentError
from vfgym.gym.env import GymEnv, ObservationMode
from vfgym.gym.spaces import DEFAULT_MAX_TEXT_LENGTH
from vfgym.gym.vector import GymVectorEnv, VectorMode
from vfgym.sandbox.env import SandboxEnv

logger = logging.getLogger("vfgym.gym")

#: Where `gym.make` finds the factory of every id registered here.
ENTRY_POINT = "vfgym.gym.registration:make_env"

#: Where `gym.make_vec` finds the vector env of every id registered here.
VECTOR_ENTRY_POINT = "vfgym.gym.registration:make_vector_env"

#: Keyword arguments that configure the adapter rather than the environment.
ADAPTER_ARGS = (
    "observation_mode",
    "per_step_reward",
    "render_mode",
    "dataset",
    "max_text_length",
    "count_tokens",
)

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


def make_env(
    environment: str | Callable[..., MultiTurnEnv],
    *,
    observation_mode: ObservationMode = "text",
    per_step_reward: bool = False,
    render_mode: str | None = None,
    dataset: str = "eval",
    max_text_length: int = DEFAULT_MAX_TEXT_LENGTH,
    count_tokens: Callable[[str], int] | None = None,
    **env_args: Any,
) -> GymEnv:
    """Build the environment (a registry name, a 'module:function' reference or a
    factory) and wrap it in a `GymEnv`.

    This is the entry point of every id registered through `vfgym.gym`; `env_args`
    go to the environment's loader.
    """
    if not isinstance(environment, str) and not callable(environment):
        raise TypeError(
            "environment must be a registered name or a function returning a vfgym "
            f"environment, not {type(environment).__name__}"
        )
    try:
        if is_reference(environment):
            env = resolve_reference(environment)(**env_args)
        elif isinstance(environment, str):
            env = load_environment(environment, **env_args)
        else:
            env = environment(**env_args)
    except TypeError as exc:
        if "argument" not in str(exc):  # a bug in the loader, not a misspelt keyword
            raise
        adapter = ", ".join(ADAPTER_ARGS)
        hint = _vector_spec_hint(env_args) or _vector_option_hint(env_args)
        raise TypeError(f"{exc} (the Gym adapter's own keywords are: {adapter}){hint}") from exc
    if not isinstance(env, MultiTurnEnv):
        raise TypeError(
            f"{environment!r} built a {type(env).__name__}, not a vfgym MultiTurnEnv; "
            "a Gym environment needs a turn loop to step through"
        )
    if "pool_size" not in env_args:
        _one_sandbox_each(env)
    return GymEnv(
        env,
        observation_mode=observation_mode,
        per_step_reward=_checked_per_step_reward(per_step_reward),
        render_mode=render_mode,
        dataset=dataset,  # type: ignore[arg-type]
        max_text_length=max_text_length,
        count_tokens=count_tokens,
        owns_environment=True,
    )


def _is_bool(value: object) -> bool:
    return isinstance(value, bool | np.bool_)


def _checked_per_step_reward(value: object) -> bool:
    """`per_step_reward` as a bool; anything else is refused.

    Why: a string such as "no" or "False" is truthy, and taken as it is it would turn
    per-step rewards on, silently changing every reward of the episode."""
    if not _is_bool(value):
        raise TypeError(
            f"per_step_reward must be True or False, not {value!r}: "
            "gym.make(id, per_step_reward=True) rewards every step"
        )
    return bool(value)


def _vector_spec_hint(env_args: dict[str, Any]) -> str:
    """What to do when `gym.make` got the spec of a vector env.

    Why: `gym.make_vec` records its own keywords (`num_envs`, `vectorization_mode`, ...)
    in the spec of the vector env it makes, so `gym.make(vec.spec)` hands them to the
    environment's loader, whose error would otherwise read as a misspelt keyword
    (`num_envs`: did you mean `num_examples`?)."""
    given = sorted(name for name in MAKE_VEC_ARGS if name in env_args)
    if not given:
        return ""
    return (
        f". {given} are keywords of gym.make_vec, which records them in the spec of the "
        "vector env it makes: this is the spec of a vector env. Make it again with "
        "gym.make_vec(spec), or make one env with gym.make(spec.id, **kwargs)"
    )


def _vector_option_hint(env_args: dict[str, Any]) -> str:
    """What to do with vector-env options that reached a single env's loader.

    Why: `gym.make(id, mode=...)`, or `gym.make_vec(id, vectorization_mode="sync",
    autoreset_mode=...)` (which makes each sub-env with `gym.make` and these keywords),
    would otherwise only say that the environment does not take them, as if they were
    misspelt, when they are the vector env's and belong elsewhere."""
    given = [name for name in ("mode", "autoreset_mode") if name in env_args]
    if not given:
        return ""
    one = len(given) == 1
    return (
        f". {given} {'is an option' if one else 'are options'} of the vector env, not of "
        f"the environment: pass {'it' if one else 'them'} to gym.make_vec(id, num_envs, mode=..., "
        "autoreset_mode=...) without vectorization_mode (vfgym's GymVectorEnv); with "
        "vectorization_mode='sync' or 'async', Gymnasium's vector envs take no `mode` and "
        "take the autoreset mode as vector_kwargs={'autoreset_mode': AutoresetMode...}"
    )


def is_reference(environment: object) -> bool:
    """True for a 'module:function' string, as Gymnasium writes entry points.

    Registry names never hold a ':' (`register` refuses ids that do for the same
    reason: `gym.make` reads what precedes one as a module)."""
    return isinstance(environment, str) and ":" in environment


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


def _one_sandbox_each(env: MultiTurnEnv) -> None:
    """Give every SandboxEnv in `env` (itself, or a member of an EnvGroup, nested or
    not) a pool of one sandbox.

    A Gym env plays one episode at a time, so it uses one sandbox, not the pool a batch
    of rollouts shares (a vector env of n sub-envs then runs n, not 4n). The pool is
    made on the first episode, so setting its size here is in time. Called only when
    `gym.make` was given no `pool_size`: one it was given is the loader's to pass on.
    """
    for sandbox_env in _sandbox_envs(env):
        sandbox_env.pool_size = 1


def _sandbox_envs(env: Environment) -> Iterator[SandboxEnv]:
    """`env` if it is a SandboxEnv, and every SandboxEnv among a group's members."""
    if isinstance(env, SandboxEnv):
        yield env
    elif isinstance(env, EnvGroup):
        for member in env.envs:
            yield from _sandbox_envs(member)


# gym.make reads `metadata` from the entry point to check `render_mode` up front.
make_env.metadata = GymEnv.metadata  # type: ignore[attr-defined]


def make_vector_env(
    num_envs: int = 1,
    *,
    environment: str | Callable[..., MultiTurnEnv],
    mode: VectorMode = "sync",
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    max_episode_steps: int | None = None,
    **env_args: Any,
) -> GymVectorEnv:
    """`num_envs` sub-envs from `make_env(environment, **env_args)` in a `GymVectorEnv`.

    This is the vector entry point of every id registered through `vfgym.gym`:
    `gym.make_vec(id, num_envs=8, mode="async")`.
    """
    num_envs = _checked_num_envs(num_envs)
    if not isinstance(environment, str) and not callable(environment):
        raise TypeError(
            "environment must be a registered name or a function returning a vfgym "
            f"environment, not {type(environment).__name__}"
        )
    return GymVectorEnv(
        [functools.partial(make_env, environment, **env_args)] * num_envs,
        mode=mode,
        autoreset_mode=autoreset_mode,
        max_episode_steps=max_episode_steps,
    )


def _checked_num_envs(num_envs: object) -> int:
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


def register(
    id: str,
    environment: str | Callable[..., MultiTurnEnv],
    *,
    max_episode_steps: int | None = None,
    reward_threshold: float | None = None,
    nondeterministic: bool = False,
    **defaults: Any,
) -> EnvSpec:
    """Register a Gymnasium id for a vfgym environment; returns its `EnvSpec`.

    `environment` is a registry name ("wordle"), a function that builds the
    environment, such as a module's `load_environment`, or such a function as a
    'module:function' string (Gymnasium's form of entry points). A function that can be
    imported by name is kept in the spec by that name, so `spec.to_json()` and
    `EnvSpec.from_json` work as for Gymnasium's own ids. `defaults` are keyword
    arguments for it (and for the adapter, see `make_env`); `gym.make(id, **kw)`
    overrides them. `max_episode_steps`, `reward_threshold` and `nondeterministic` are
    the `EnvSpec`'s, as in `gym.register`.

    Everything `gym.make` or `gym.make_vec` would refuse later is refused here, when
    the mistake is still next to its cause: a malformed id or one `gym.make` reads
    differently (a `module:` prefix, a version with a leading zero), a
    `max_episode_steps` that is not an int >= 1, a name the registry does not know,
    and, as defaults, vector-env options (`mode`, `autoreset_mode`) or other `EnvSpec`
    fields (`kwargs`, `disable_env_checker`, ...). Those would go to every `gym.make`
    too, whose environments do not take them; give vector options to
    `gym.make_vec(id, num_envs, mode=...)` instead.
    """
    _check_id(id)
    max_episode_steps = _checked_max_episode_steps(max_episode_steps)
    _check_environment(environment)
    _check_defaults(defaults)
    _check_adapter_defaults(defaults)
    if callable(environment):  # kept by name when it has one, so the spec saves as JSON
        environment = as_reference(environment) or environment
    gym.register(
        id=id,
        entry_point=ENTRY_POINT,
        vector_entry_point=VECTOR_ENTRY_POINT,
        kwargs={"environment": environment, **defaults},
        max_episode_steps=max_episode_steps,
        reward_threshold=reward_threshold,
        nondeterministic=nondeterministic,
        # GymEnv refuses step() before reset() itself (gymnasium.error.ResetNeeded, and
        # render() before reset() returns ""), so Gymnasium's OrderEnforcing wrapper
        # would only add two calls to every step.
        order_enforce=False,
        # PassiveEnvChecker only warns, and only on the first reset and step, about what
        # GymEnv guarantees by construction (spaces, observations cleaned and cut to fit
        # them, fresh infos; `check_env` passes for every id); after that it is one more
        # call on every step. `gym.make(id, disable_env_checker=False)` brings it back.
        disable_env_checker=True,
    )
    return gym.spec(id)


def _check_id(id: object) -> None:
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
    _check_makeable(id, namespace, name, version)


def _check_makeable(id: str, namespace: str, name: str, version: int) -> None:
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


def _checked_max_episode_steps(max_episode_steps: object) -> int | None:
    """`max_episode_steps` as an int >= 1 or None; `gym.make` would refuse others later."""
    if max_episode_steps is None:
        return None
    try:  # int and numpy ints; not True, 2.5 or "5"
        steps = None if isinstance(max_episode_steps, bool) else operator.index(max_episode_steps)
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


def _check_environment(environment: object) -> None:
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


def _check_defaults(defaults: dict[str, Any]) -> None:
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
    "per_step_reward": (_is_bool, "True or False"),
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


def _check_adapter_defaults(defaults: dict[str, Any]) -> None:
    """Refuse adapter defaults that `GymEnv` would refuse on every `gym.make` of the id."""
    for name, (valid, expected) in _ADAPTER_CHECKS.items():
        if name in defaults and not valid(defaults[name]):
            raise ValueError(
                f"{name} must be {expected}, not {defaults[name]!r}: as a default of the "
                "id, every gym.make would fail on it"
            )


def register_registry() -> tuple[dict[str, str], dict[str, str]]:
    """Give every entry-point environment its Gym id.

    Returns `(registered, skipped)`: name -> id for those registered, and
    name -> reason for those whose module cannot be imported (they stay usable
    once fixed, by calling this again).
    """
    registered: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for name in registered_names():
        try:
            gym_id = describe(name).gym_id
            if (
                gym.registry.get(gym_id) is None
                or gym.registry[gym_id].kwargs.get("environment") != name
            ):
                register(gym_id, name)
        except Exception as exc:  # one broken package (or GYM_ID) must not hide the others
            skipped[name] = f"{type(exc).__name__}: {exc}"
            logger.debug("no Gym id for %s: %s", name, skipped[name])
            continue
        registered[name] = gym_id
    return registered, skipped


__all__ = [
    "ADAPTER_ARGS",
    "ENTRY_POINT",
    "MAKE_VEC_ARGS",
    "SPEC_FIELDS",
    "VECTOR_ARGS",
    "VECTOR_ENTRY_POINT",
    "make_env",
    "make_vector_env",
    "register",
    "register_registry",
]
