"""Sampling arguments: an environment's defaults, and the caller's merged over them.

Split from `environment.py`: what a model request is sent with is settled here,
once per batch (never per turn), including the checks a batch must pass before
it starts: one answer per turn (`n`) and no streaming.
"""

from __future__ import annotations

from typing import Any

from vfgym.inference.client import refuse_stream
from vfgym.types import SamplingArgs


def env_sampling_args(given: SamplingArgs | None) -> SamplingArgs:
    """An environment's own defaults: `n` 1, an `extra_body`, and `given` over them."""
    sampling_args: SamplingArgs = {"n": 1, "extra_body": {}}
    for key, value in (given or {}).items():
        if key == "extra_body":
            sampling_args["extra_body"].update(value or {})
        else:
            sampling_args[key] = value
    check_one_answer(sampling_args)
    return sampling_args


def merge_sampling_args(defaults: SamplingArgs, given: SamplingArgs | None) -> SamplingArgs:
    """`defaults` overlaid with the caller's `given` (extra_body merged), checked."""
    merged = dict(defaults)
    merged["extra_body"] = dict(defaults.get("extra_body") or {})
    for key, value in (given or {}).items():
        if key == "extra_body":
            merged["extra_body"].update(value or {})
        else:
            merged[key] = value
    if given:
        _drop_overridden_elsewhere(merged, given)
        _drop_default_alias(merged, given)
    check_one_answer(merged)
    # Refused here too, not only at each request: a batch must stop before it
    # starts (and writes results no resume could finish) rather than error every
    # rollout.
    refuse_stream(merged, merged["extra_body"])
    if merged.get("n", 1) == 1:
        merged.pop("n", None)
    if not merged["extra_body"]:
        merged.pop("extra_body")
    return merged


#: Names of one setting: the client sends one of them (the chat name when both are set).
_MAX_TOKENS_NAMES = ("max_tokens", "max_completion_tokens")


def _drop_overridden_elsewhere(merged: dict[str, Any], given: SamplingArgs) -> None:
    """Drop an environment default the caller set in the other place: `top_k` in the
    caller's `extra_body` overrides the environment's top-level `top_k`, and the other
    way round (the server would otherwise get both, and which wins is its choice)."""
    extra = merged["extra_body"]
    given_extra = given.get("extra_body") or {}
    for key in given_extra:
        if key not in given:
            merged.pop(key, None)
    for key in given:
        if key != "extra_body" and key not in given_extra:
            extra.pop(key, None)


def _drop_default_alias(merged: SamplingArgs, given: SamplingArgs) -> None:
    """Drop the environment's default max tokens under the other name than the
    caller's, which would otherwise win over the caller's value at the client."""
    for name, other in (_MAX_TOKENS_NAMES, _MAX_TOKENS_NAMES[::-1]):
        if name in given and other not in given:
            merged.pop(other, None)


def check_one_answer(sampling_args: SamplingArgs) -> None:
    """Refuse an `n` other than 1: a rollout plays one conversation, so of n answers
    it kept the first, and the token budget counted all n (the usage sums them)."""
    n = sampling_args.get("n")
    if n is None or (n == 1 and not isinstance(n, bool)):
        return
    raise ValueError(
        f"sampling_args 'n' is {n!r}, but a rollout plays one conversation and keeps a single "
        f"answer per model turn; drop 'n' (or set it to 1) and ask for several rollouts of "
        f"each example instead (rollouts_per_example={n!r}, or `vfgym eval -r {n!r}`)"
    )
