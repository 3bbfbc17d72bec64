"""How a rubric calls one reward function: which arguments it gets and what it may return.

A reward function names the arguments it wants (`def f(completion, answer)`)
and gets only those; one with `**kwargs` gets everything. Reading a signature
is slow next to scoring a rollout, so it is read once, when the function joins
a rubric, and kept in a `RewardSpec`.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import operator
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from vfgym.engine._async import is_async_callable
from vfgym.engine.offload import function_key

STANDARD_ARGS = frozenset(
    {"prompt", "completion", "answer", "state", "task", "info", "example_id", "parser"}
)
"""Arguments every rubric offers to its reward functions."""


def reward_func_name(func: Callable[..., Any]) -> str:
    """The metric name of a reward function.

    A function's `__name__`; for a `functools.partial` without its own
    `__name__`, the name of the function it wraps; for a callable object
    without one, its class name.
    """
    name = getattr(func, "__name__", None)
    if isinstance(name, str) and name:
        return name
    if isinstance(func, functools.partial):
        return reward_func_name(func.func)
    return type(func).__name__


def bound_keywords(func: Callable[..., Any]) -> frozenset[str]:
    """The keywords a `functools.partial` (nested or not) fixed when it was made.

    They are the caller's choice, so the rubric must not pass its own argument of
    that name: `partial(f, parser=XMLParser(...))` keeps its parser.
    """
    names: set[str] = set()
    while isinstance(func, functools.partial):
        names.update(func.keywords)
        func = func.func
    return frozenset(names)


def _signature(func: Callable[..., Any], name: str) -> inspect.Signature:
    try:
        return inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"cannot read the parameters of reward function {name!r} ({exc}); wrap it in a "
            "def that names the arguments it needs, e.g. def f(completion, answer): ..."
        ) from exc


def _signature_is_its_code(func: Callable[..., Any]) -> bool:
    """True when `func`'s signature is that of the code it runs: a plain function or
    method, not a wrapper that reports another function's (`functools.wraps`) or a
    declared `__signature__`. Only such a function is safe to call by position."""
    target = func.__func__ if isinstance(func, types.MethodType) else func
    return (
        type(target) is types.FunctionType
        and not hasattr(target, "__wrapped__")
        and not hasattr(target, "__signature__")
    )


def verdict_key(func: Callable[..., Any]) -> Any:
    """The object the offloader keeps `func`'s inline-or-thread verdict under.

    `function_key(func)`, unless that cannot be hashed: a callable object whose class
    compares by value (a `@dataclass` with `__call__`, a pydantic model) is keyed by
    its class, so its instances share one verdict as a class's bound methods do.
    """
    key = function_key(func)
    try:
        hash(key)
    except TypeError:
        return type(key)
    return key


def _yields(func: Callable[..., Any]) -> bool:
    """True when calling `func` makes a generator (sync or async) instead of a value."""
    while isinstance(func, functools.partial):
        func = func.func
    call = getattr(type(func), "__call__", None)  # noqa: B004 - callable objects
    return any(
        inspect.isgeneratorfunction(t) or inspect.isasyncgenfunction(t) for t in (func, call)
    )


def _is_callable_class(func: Callable[..., Any]) -> bool:
    """True when `func` (or the function a partial wraps) is a class whose instances
    are callable: calling the class makes one of them, never a number."""
    while isinstance(func, functools.partial):
        func = func.func
    if not isinstance(func, type):
        return False
    return any("__call__" in vars(k) for k in func.__mro__ if k is not object)


@dataclass(frozen=True, slots=True)
class RewardSpec:
    """A reward function with its name and the arguments it accepts, read once."""

    func: Callable[..., Any]
    name: str
    is_async: bool
    accepts_all: bool
    params: tuple[str, ...]
    required: frozenset[str]
    #: Set when every parameter can be passed by position, in `params` order: then the
    #: function is called with its arguments picked by one `itemgetter`, no dict built.
    pick: operator.itemgetter | None = None
    #: Keywords a `functools.partial` fixed: never passed, even to a `**kwargs` function.
    bound: frozenset[str] = frozenset()
    #: What the offloader keeps this function's verdict under (see `verdict_key`).
    key: Any = None

    @classmethod
    def of(cls, func: Callable[..., Any]) -> RewardSpec:
        """Inspect `func`; raise TypeError when it cannot be called by keyword."""
        if not callable(func):
            raise TypeError(f"a reward function must be callable, got {type(func).__name__}")
        name = reward_func_name(func)
        if _is_callable_class(func):
            # (An async `__call__` would also make the class read as async, and its
            # instance be awaited: "object ... can't be used in 'await' expression".)
            raise TypeError(
                f"reward function {name!r} is a class whose instances are the reward "
                f"function: calling it makes a {name} object, not a number. Pass an "
                f"instance, {name}(), instead of the class"
            )
        if _yields(func):
            raise TypeError(
                f"reward function {name!r} is a generator function (it uses yield); a "
                "reward function must return its number, so use return instead of yield"
            )
        params: list[str] = []
        required: set[str] = set()
        accepts_all = False
        positional = True
        bound = bound_keywords(func)
        for param in _signature(func, name).parameters.values():
            if param.name in bound:  # (a keyword-only parameter with that default)
                continue
            positional = positional and param.kind is param.POSITIONAL_OR_KEYWORD
            if param.kind is param.VAR_KEYWORD:
                accepts_all = True
            elif param.kind is param.VAR_POSITIONAL:
                continue
            elif param.kind is param.POSITIONAL_ONLY:
                if param.default is param.empty:
                    raise TypeError(
                        f"reward function {name!r} has a positional-only parameter "
                        f"{param.name!r}; rubrics pass arguments by name, so make it a "
                        "normal parameter"
                    )
            else:
                params.append(param.name)
                if param.default is param.empty:
                    required.add(param.name)
        pick = None
        if positional and params and _signature_is_its_code(func):
            pick = operator.itemgetter(*params)
        return cls(
            func,
            name,
            is_async_callable(func),
            accepts_all,
            tuple(params),
            frozenset(required),
            pick,
            bound,
            verdict_key(func),
        )

    def call(self, available: Mapping[str, Any]) -> Any:
        """Call the function with its arguments out of `available` (see `select`)."""
        if self.pick is not None:
            try:
                picked = self.pick(available)  # (one name: the value, not a tuple)
            except KeyError:  # an argument not on offer: its default, or select's error
                pass
            else:
                return self.func(*picked) if len(self.params) > 1 else self.func(picked)
        return self.func(**self.select(available))

    def select(self, available: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments to call the function with, out of everything on offer."""
        if self.accepts_all:
            if self.bound:
                return {k: v for k, v in available.items() if k not in self.bound}
            return dict(available)
        chosen = {}
        for key in self.params:  # a plain loop: the cheapest way for a few names
            if key in available:
                chosen[key] = available[key]
        if len(chosen) < len(self.params) and not self.required.issubset(chosen):
            missing = self.required.difference(available)
            raise TypeError(
                f"reward function {self.name!r} needs argument(s) {sorted(missing)} that the "
                f"rubric does not provide; it offers {sorted(available)}. Give the parameter "
                "a default, or pass the object with Rubric(..., class_objects={name: value})"
            )
        return chosen


_PLAIN_NUMBERS = frozenset({float, int, bool})


def to_reward(name: str, value: Any) -> float:
    """A reward function's result as a float; TypeError for anything that is not a number,
    ValueError for NaN or infinity.

    A non-finite value is refused like a non-number: weighted by 0 it would still
    make the whole reward NaN, which reads as a failed model server, not as one
    broken reward function. A complex number (numpy's too, which `float()` would
    silently cut to its real part) is not a reward either.
    """
    if type(value) in _PLAIN_NUMBERS or isinstance(value, bool | int | float):
        number = _as_float(name, value)
    elif (
        value is None
        or isinstance(value, str | bytes | complex)
        or (isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real))
        or not hasattr(value, "__float__")
    ):
        raise TypeError(
            f"reward function {name!r} returned {value!r} ({type(value).__name__}); "
            "it must return a number (float, int or bool)"
        )
    else:
        number = _as_float(name, value)
    if not math.isfinite(number):
        raise ValueError(
            f"reward function {name!r} returned {number}; it must return a finite number "
            "(return 0.0, or raise, for a rollout it cannot score)"
        )
    return number


def _as_float(name: str, value: Any) -> float:
    """`float(value)`, with a failure (an array of several numbers, an int too large for a
    float, a signalling NaN) said to be the reward function's, and what it must return."""
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError) as exc:
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        kind = TypeError if isinstance(exc, TypeError) else ValueError
        raise kind(
            f"reward function {name!r} returned {shown} ({type(value).__name__}), which "
            f"is not one finite float ({exc}); it must return one number"
        ) from exc


def call_specs(specs: list[RewardSpec], available: Mapping[str, Any]) -> list[Any]:
    """Call several sync reward functions in turn, catching each one's exception.

    Meant to run in a worker thread: one hop for all of a rollout's sync
    functions. Each slot of the result is the return value or the exception.
    """
    outcomes: list[Any] = []
    for spec in specs:
        try:
            outcomes.append(spec.call(available))
        except Exception as exc:  # recorded by the rubric, never dropped
            outcomes.append(exc)
    return outcomes
