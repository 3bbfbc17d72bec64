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

The checks of what `register` and `gym.make` are given live in
`vfgym.gym.registration_checks`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec
from gymnasium.vector import AutoresetMode

from vfgym.envs.env_group import EnvGroup
from vfgym.envs.environment import Environment
from vfgym.envs.multiturn_env import MultiTurnEnv
from vfgym.envs.registry import (
    EnvironmentImportError,
    default_gym_id,
    describe,
    load_environment,
    registered_names,
)
from vfgym.gym.env import GymEnv, ObservationMode
from vfgym.gym.registration_checks import (
    MAKE_VEC_ARGS,
    SPEC_FIELDS,
    VECTOR_ARGS,
    as_reference,
    check_adapter_defaults,
    check_defaults,
    check_environment,
    check_id,
    checked_max_episode_steps,
    checked_num_envs,
    checked_per_step_reward,
    is_reference,
    resolve_reference,
)
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
        per_step_reward=checked_per_step_reward(per_step_reward),
        render_mode=render_mode,
        dataset=dataset,  # type: ignore[arg-type]
        max_text_length=max_text_length,
        count_tokens=count_tokens,
        owns_environment=True,
    )


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
    num_envs = checked_num_envs(num_envs)
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
    check_id(id)
    max_episode_steps = checked_max_episode_steps(max_episode_steps)
    check_environment(environment)
    check_defaults(defaults)
    check_adapter_defaults(defaults)
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
        except EnvironmentImportError as exc:
            # Its module cannot say its GYM_ID, but the default id still gets made, so
            # that gym.make of it raises this error rather than NameNotFound.
            skipped[name] = str(exc)
            logger.debug("no Gym id of its own for %s: %s", name, skipped[name])
            gym_id = default_gym_id(name)
            if gym.registry.get(gym_id) is None:
                register(gym_id, name)  # looks the name up only: imports nothing
            continue
        try:
            if (
                gym.registry.get(gym_id) is None
                or gym.registry[gym_id].kwargs.get("environment") != name
            ):
                register(gym_id, name)
        except Exception as exc:  # one bad GYM_ID must not hide the others
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
