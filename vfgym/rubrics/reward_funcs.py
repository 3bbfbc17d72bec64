"""The weighted reward functions of a rubric, and the arguments offered to them.

`RewardFuncs` is the part of `Rubric` that holds the functions and their weights
(checked once, cached while the lists stay the same) and builds the arguments a
function may ask for. It is split from the calling machinery (`rubric.py` for the
event loop, `sync_scoring.py` for callers without one), which both build on it.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from typing import Any

from vfgym.engine._async import run_sync
from vfgym.engine.offload import Offloader, OffloadMode
from vfgym.parsers.parser import Parser
from vfgym.rubrics.reward_call import STANDARD_ARGS, RewardSpec, to_reward
from vfgym.rubrics.scores import (
    REWARD_ERRORS,
    as_func_list,
    as_weight_list,
    checked_weight,
    error_entry,
)
from vfgym.types import Info, Messages, RewardFunc, State


class RewardFuncs:
    """A rubric's reward functions and weights, their specs, and the arguments they are offered.

    Reward functions receive only the arguments they declare, out of `prompt`,
    `completion`, `answer`, `state`, `task`, `info`, `example_id`, `parser`,
    the rubric's `class_objects` and any extra keyword given to `score_rollout`;
    one with `**kwargs` receives them all.
    """

    def __init__(
        self,
        funcs: list[RewardFunc] | None = None,
        weights: list[float] | None = None,
        parser: Parser | None = None,
        parallelize_scoring: bool = True,
        *,
        class_objects: Mapping[str, Any] | None = None,
        offload_sync: OffloadMode = "auto",
        **kwargs: Any,
    ) -> None:
        """`offload_sync` says where sync reward functions run (see `vfgym.engine.offload`):
        "auto" inline while they stay quick and in a worker thread once calls turn
        slow, "always" in a thread, "never" inline."""
        if kwargs:
            raise TypeError(
                f"{type(self).__name__} got unexpected keyword argument(s) {sorted(kwargs)}. "
                "To offer extra objects to reward functions pass "
                "class_objects={'name': value}; a subclass keeps its own attributes itself."
            )
        self.logger = logging.getLogger(f"vfgym.rubrics.{type(self).__name__}")
        self.parser: Parser = parser if parser is not None else Parser()
        self.parallelize_scoring = parallelize_scoring
        self.offloader = Offloader(offload_sync)
        self.reward_funcs: list[RewardFunc] = []
        self.reward_weights: list[float] = []
        self._specs: dict[int, RewardSpec] = {}
        self._spec_list: tuple[list[RewardFunc], list[RewardSpec]] = ([], [])
        # The offloader key of the reward functions when all are sync, None when one is
        # async (kept by _specs_of; no functions: all sync).
        self._sync_key: tuple[Any, ...] | None = ()
        # The last weights `_checked_weights` saw, and their checked floats.
        self._weights_seen: tuple[list[Any], list[float]] = ([], [])
        # `_sync_plan` reads the lists themselves unless a subclass says what they are.
        self._own_lists = (
            type(self).get_reward_funcs is RewardFuncs.get_reward_funcs
            and type(self).get_reward_weights is RewardFuncs.get_reward_weights
        )
        self._warned: set[str] = set()
        self.class_objects: dict[str, Any] = {"parser": self.parser}
        for name, value in (class_objects or {}).items():
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"class_objects keys must be parameter names, got {name!r}")
            if name in STANDARD_ARGS:
                raise ValueError(
                    f"class_objects may not replace the standard argument {name!r}"
                    + ("; pass parser=... instead" if name == "parser" else "")
                )
            self.class_objects[name] = value
        funcs = as_func_list(funcs)
        if weights is None:
            weights = [1.0] * len(funcs)
        weights = as_weight_list(weights)
        if len(weights) != len(funcs):
            raise ValueError(
                f"{len(funcs)} reward function(s) but {len(weights)} weight(s): give one weight "
                "per function, or none for 1.0 each"
            )
        for func, weight in zip(funcs, weights, strict=True):
            self.add_reward_func(func, weight)

    # -- the functions -------------------------------------------------------

    def _spec_for(self, func: RewardFunc) -> RewardSpec:
        """The cached spec of `func`, inspecting it if it reached the list another way."""
        spec = self._specs.get(id(func))
        if spec is None or spec.func is not func:
            spec = self._specs[id(func)] = RewardSpec.of(func)
        return spec

    def get_reward_func_names(self) -> list[str]:
        """Metric names of the reward functions, in order."""
        return [self._spec_for(f).name for f in self.get_reward_funcs()]

    def get_reward_funcs(self) -> list[RewardFunc]:
        """The reward functions, in order."""
        return self.reward_funcs

    def get_reward_weights(self) -> list[float]:
        """The weights, one per reward function."""
        return self.reward_weights

    def add_reward_func(self, func: RewardFunc, weight: float = 1.0) -> None:
        """Add a reward function; its parameters are read now, once."""
        spec = RewardSpec.of(func)
        weight = checked_weight(spec.name, weight)
        if spec.name == REWARD_ERRORS or spec.name in self.get_reward_func_names():
            raise ValueError(
                f"a reward function named {spec.name!r} is already in this rubric (or the name "
                "is reserved); metrics are keyed by name, so give it a distinct __name__"
            )
        self._specs[id(func)] = spec
        self.reward_funcs.append(func)
        self.reward_weights.append(weight)

    # -- calling them --------------------------------------------------------

    def _offer(
        self,
        prompt: Messages,
        completion: Messages,
        answer: Any,
        state: State,
        task: str,
        info: Info | None,
        example_id: int | None,
        kwargs: Mapping[str, Any],
    ) -> dict[str, Any]:
        available: dict[str, Any] = {
            "prompt": prompt,
            "completion": completion,
            "answer": answer,
            "state": state,
            "task": task,
            "info": info if info is not None else {},
            "example_id": example_id,
            **self.class_objects,
        }
        if kwargs:
            available.update(kwargs)
        return available

    async def _settle(self, outcome: Any) -> Any:
        """Await a sync function's awaitable result; return the value or the exception."""
        if not inspect.isawaitable(outcome):
            return outcome
        try:
            return await outcome
        except Exception as exc:
            return exc

    def _record_error(self, state: State, name: str, exc: BaseException) -> None:
        errors = state.get(REWARD_ERRORS)
        if not isinstance(errors, list):
            errors = state[REWARD_ERRORS] = []
        errors.append(error_entry(name, exc))
        # One warning per function; the rest at debug level, or a broken function
        # would print ten thousand lines in a large run.
        level = logging.DEBUG if name in self._warned else logging.WARNING
        self._warned.add(name)
        self.logger.log(level, "reward function %r failed: %s: %s", name, type(exc).__name__, exc)

    def _as_reward(self, name: str, value: Any) -> float:
        """A function's result (or the exception it raised) other than a float, as a
        reward: an exception is raised, a number made a float, anything else refused.
        Only the sync path meets an awaitable (the loop's path settles them first):
        it is awaited here."""
        if hasattr(value, "__await__"):  # a sync function that returned an awaitable
            value = run_sync(self._settle(value))
        if isinstance(value, Exception):
            raise value
        return to_reward(name, value)

    def _specs_and_weights(self) -> tuple[list[RewardSpec], list[float]]:
        funcs = self.get_reward_funcs()
        weights = self.get_reward_weights()
        if len(weights) != len(funcs):
            raise ValueError(
                f"{type(self).__name__} has {len(funcs)} reward function(s) but {len(weights)} "
                "weight(s); add functions with add_reward_func(func, weight)"
            )
        specs = self._specs_of(funcs)
        return specs, self._checked_weights(specs, weights)

    def _checked_weights(self, specs: list[RewardSpec], weights: list[Any]) -> list[float]:
        """`weights` as floats, checked as `add_reward_func` checks them.

        `reward_weights` is a public list that may be changed after construction; a
        weight set there that is NaN would make every reward NaN (read as a failed
        model server), and a str would fail deep in the sum. Checked once per change.
        """
        seen, checked = self._weights_seen
        if seen == weights:
            return checked
        checked = [checked_weight(s.name, w) for s, w in zip(specs, weights, strict=True)]
        self._weights_seen = (list(weights), checked)
        return checked

    def _specs_of(self, funcs: list[RewardFunc]) -> list[RewardSpec]:
        """The specs of `funcs` in order, kept while the list holds the same functions."""
        known, specs = self._spec_list
        if known != funcs:  # list equality compares the functions by identity first
            specs = [self._spec_for(f) for f in funcs]
            self._spec_list = (list(funcs), specs)
            self._sync_key = None if any(s.is_async for s in specs) else tuple(s.key for s in specs)
        return specs
