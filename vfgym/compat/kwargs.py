"""Telling an environment written for verifiers 0.1.x, and keeping the keyword
arguments it passes the way 0.1.x kept them.

verifiers 0.1.x let any unknown keyword through an environment's constructor and
stored it as an attribute (examples pass `max_concurrent=`, or `client=`/`model=`),
so code written for it reads them back later. For such code vfgym does the same, and
logs one warning naming them, with the closest known parameter when it looks like a
typo; code written for vfgym keeps getting a TypeError for a misspelt keyword.

"Written for verifiers" means: the first caller outside vfgym (the loader or the
subclass constructing the environment) lives in a module whose source imports
`verifiers`. That is decided only when it matters (an unknown keyword, or a
multi-turn environment's construction), from the source file Python already has.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import linecache
import logging
import re
import sys
from collections.abc import Mapping
from typing import Any

logger = logging.getLogger("vfgym.envs")

_IMPORTS_VERIFIERS = re.compile(r"^\s*(?:import\s+verifiers\b|from\s+verifiers(?:\.|\s))", re.M)


@functools.lru_cache(maxsize=256)
def _source_imports_verifiers(filename: str) -> bool:
    return bool(_IMPORTS_VERIFIERS.search("".join(linecache.getlines(filename))))


def written_for_verifiers(depth: int = 1) -> bool:
    """Whether the code constructing an environment (the first caller outside vfgym,
    looking up from `depth` frames above this call) was written for verifiers 0.1.x."""
    frame = sys._getframe(depth + 1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module != "vfgym" and not module.startswith("vfgym."):
            return _source_imports_verifiers(frame.f_code.co_filename)
        frame = frame.f_back  # type: ignore[assignment]
    return False


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
