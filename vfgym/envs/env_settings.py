"""An environment's constructor arguments, checked before anything is built.

Split from `environment.py`: each mistake (an unknown keyword, a message type
that does not exist, a system prompt for a completion task, no data at all, a
token budget that is not a whole number) is refused with what to pass instead.
"""

from __future__ import annotations

from typing import Any

from vfgym.compat.kwargs import written_for_verifiers

# Keyword arguments verifiers 0.1.x environments accepted that vfgym has no use for.
# They are accepted (so such environments run unchanged) and ignored.
IGNORED_COMPAT_KWARGS = frozenset({"max_workers", "map_kwargs"})


def check_env_settings(
    env_name: str,
    kwargs: dict[str, Any],
    message_type: Any,
    system_prompt: str | None,
    few_shot: list[Any] | None,
    dataset: Any,
    eval_dataset: Any,
) -> None:
    """Refuse constructor arguments `Environment` cannot work with, saying what to pass."""
    unknown = set(kwargs) - IGNORED_COMPAT_KWARGS
    if unknown and not written_for_verifiers():
        raise TypeError(
            f"{env_name} got unexpected keyword argument(s) {sorted(unknown)}; "
            "a subclass that needs its own settings should take them in its __init__"
        )
    if message_type not in ("chat", "completion"):
        raise ValueError(f"message_type must be 'chat' or 'completion', not {message_type!r}")
    if message_type == "completion" and (system_prompt or few_shot):
        raise ValueError(
            "system_prompt and few_shot need message_type='chat'; for completion "
            "tasks put the full text in each row's 'prompt'"
        )
    if dataset is None and eval_dataset is None:
        raise ValueError(
            "give a dataset or an eval_dataset (a datasets.Dataset or a list of dicts)"
        )


def checked_token_budget(budget: Any) -> int | None:
    """`rollout_token_budget` as an int (or None), checked once, not at every turn."""
    if budget is None:
        return None
    if isinstance(budget, float) and budget.is_integer():
        budget = int(budget)
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise TypeError(
            f"rollout_token_budget must be a whole number of tokens or None, not {budget!r}"
        )
    if budget <= 0:
        raise ValueError("rollout_token_budget must be a positive number of tokens or None")
    return budget
