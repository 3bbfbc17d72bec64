"""Keyword arguments an environment does not know, kept the way verifiers 0.1.x kept them.

verifiers 0.1.x let any unknown keyword through an environment's constructor and
stored it as an attribute (examples pass `max_concurrent=`, or `client=`/`model=`),
so code written for it reads them back later. vfgym does the same, and logs one
warning naming them, with the closest known parameter when it looks like a typo.
"""

from __future__ import annotations

import difflib
import inspect
import logging
from collections.abc import Mapping
from typing import Any

logger = logging.getLogger("vfgym.envs")


def _known_parameters(cls: type) -> list[str]:
    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        try:
            parameters = inspect.signature(init).parameters.values()
        except (TypeError, ValueError):
            continue
        names.update(p.name for p in parameters if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL))
    names.discard("self")
    return sorted(names)


def keep_unknown_kwargs(obj: object, kwargs: Mapping[str, Any]) -> None:
    """Store each of `kwargs` as an attribute of `obj`, and warn once naming them all."""
    if not kwargs:
        return
    known = _known_parameters(type(obj))
    hints = []
    for name in sorted(kwargs):
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
        hints.append(f"{name} (did you mean {close[0]}?)" if close else name)
    logger.warning(
        "%s does not use the keyword argument(s) %s; they are kept as attributes, as "
        "verifiers 0.1.x kept them. A subclass that needs its own settings should take "
        "them in its __init__.",
        type(obj).__name__,
        ", ".join(hints),
    )
    for name, value in kwargs.items():
        setattr(obj, name, value)
