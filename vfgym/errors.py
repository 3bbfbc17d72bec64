"""Exceptions a user can meet, each saying what went wrong and what to do."""

from __future__ import annotations

from typing import Any


class VFGymError(Exception):
    """Base class of every error vfgym raises on purpose."""


class ModelCallError(VFGymError):
    """The model server could not answer, even after retries.

    The rollout that met it ends with `state["error"]` and is reported as errored,
    never scored as a wrong answer.
    """

    def __init__(self, message: str, *, attempts: int, cause: BaseException | None = None):
        super().__init__(message)
        self.attempts = attempts
        self.cause = cause


class ContextLengthExceeded(VFGymError):
    """The conversation no longer fits the model's context window.

    Not a failure of the server: the rollout ends as truncated.
    """


class TokenBudgetExhausted(VFGymError):
    """The rollout spent its budget of completion tokens across turns."""


class ResultCallbackError(VFGymError, RuntimeError):
    """The `on_result` callback raised for one or more results of a finished batch.

    The callback's failure is the caller's bug, not the rollouts': every rollout
    still ran, was scored and recorded (results.jsonl, when a `results_path` was
    given) and the callback was still offered every later result. `outputs` is
    what the batch would have returned; `errors` maps each rollout index the
    callback failed on to its exception, the first of which is also `__cause__`.
    """

    def __init__(
        self,
        message: str,
        *,
        errors: dict[int, BaseException] | None = None,
        outputs: Any = None,
    ):
        # (Defaults so that pickle and copy, which call the class with the message
        # alone and then restore the attributes, can rebuild it.)
        super().__init__(message)
        self.errors = {} if errors is None else errors
        self.outputs = outputs


class SubEnvError(VFGymError, RuntimeError):
    """`step()` or `reset()` of a vector env failed in one or more of its sub-envs.

    The other sub-envs did their part, and nothing they did is lost: `results` is
    the batch the call would have returned, in which each failed sub-env's slot
    carries `info["error"]` (after a step, its episode ended there: truncated, reward
    0.0). `errors` maps each failed sub-env's index to its exception; the first is
    also this error's `__cause__`. The failed sub-envs must be reset before the
    vector env steps again: `reset(options={"reset_mask": mask})` for them alone.
    """

    def __init__(
        self,
        message: str,
        *,
        errors: dict[int, BaseException] | None = None,
        results: tuple[Any, ...] = (),
    ):
        # (Defaults so that pickle and copy, which call the class with the message
        # alone and then restore the attributes, can rebuild it.)
        super().__init__(message)
        self.errors = {} if errors is None else errors
        self.results = results


def error_record(exc: BaseException) -> dict[str, Any]:
    """The JSON-friendly form of an exception stored in `state["error"]`."""
    record: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
    cause = getattr(exc, "cause", None) or exc.__cause__
    if cause is not None:
        record["cause"] = {"type": type(cause).__name__, "message": str(cause)}
    return record
