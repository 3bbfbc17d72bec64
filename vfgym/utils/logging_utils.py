"""Logging set-up and a sample printer, as verifiers 0.1.x's `verifiers.utils.logging_utils`
offered them; both are called explicitly, never at import."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any

_DEFAULT_FORMAT = "%(asctime)s - %(name)s - %(levelname)s - %(message)s"
_DEFAULT_DATE_FORMAT = "%Y-%m-%d %H:%M:%S"


def setup_logging(
    level: str = "INFO", log_format: str | None = None, date_format: str | None = None
) -> None:
    """Send the `vfgym` loggers (and `verifiers`, the name old environments log under)
    to stderr at `level`, replacing handlers an earlier call installed."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter(log_format or _DEFAULT_FORMAT, date_format or _DEFAULT_DATE_FORMAT)
    )
    for name in ("vfgym", "verifiers"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.setLevel(level.upper())
        logger.addHandler(handler)
        logger.propagate = False


def _as_text(messages: Any) -> str:
    if isinstance(messages, str):
        return messages
    if isinstance(messages, Sequence):
        return "\n".join(
            f"{message.get('role', '?')}: {message.get('content') or ''}"
            for message in messages
            if isinstance(message, dict)
        )
    return str(messages)


def print_prompt_completions_sample(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    rewards: Sequence[float],
    step: int = 0,
    num_samples: int = 1,
) -> None:
    """Print the first `num_samples` prompt/completion/reward triples of a batch: a quick
    look at what a run produces."""
    print(f"step {step}")
    for prompt, completion, reward in list(zip(prompts, completions, rewards, strict=False))[
        :num_samples
    ]:
        print(f"--- prompt\n{_as_text(prompt)}\n--- completion\n{_as_text(completion)}")
        print(f"--- reward {reward}")
