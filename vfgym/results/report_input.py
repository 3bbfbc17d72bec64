"""Reading a results directory for `vfgym view`, whatever the files hold.

A report is opened when something went wrong, so its input is whatever a crash, a
hand edit or another tool left: integers too large for a float (valid JSON), objects
nested thousands of levels deep, a missing metadata.json. None of that may stop the
page. This module reads the files and tames every value before the page builder sees
it: each part the page cannot show is replaced by a marker that says what was there,
and counted, so the page can say how much it left out.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vfgym.cli._support import CommandError
from vfgym.results.jsonl import METADATA_FILE, RESULTS_FILE, result_lines

#: Deeper parts of a value are replaced by a marker: no result vfgym writes nests this
#: deep, and rendering (JSON text, escaping) recurses once per level.
MAX_DEPTH = 40
#: Integers with more bits than this do not fit a float (the largest is about 2**1024).
_FLOAT_BITS = sys.float_info.max_exp


_TOO_LARGE = "[a number too large to show"
_TOO_DEEP = "[nested deeper than"


def is_marker(value: Any) -> bool:
    """True for the text that stands in for a value the page cannot show."""
    return isinstance(value, str) and value.startswith((_TOO_LARGE, _TOO_DEEP))


@dataclass
class RunInput:
    """What the report shows of a run: metadata, records, and what could not be shown."""

    metadata: dict[str, Any]
    records: list[dict[str, Any]]
    damaged_lines: list[int] = field(default_factory=list)
    #: Values replaced by a marker (a number too large, nesting too deep).
    tamed_values: int = 0
    #: Why there is no metadata (missing, or not a JSON object), or "" when there is.
    metadata_problem: str = ""


class Tamer:
    """Replaces the parts of a JSON value the page cannot show, counting them."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, value: Any, depth: int = 0) -> Any:
        if isinstance(value, bool) or value is None or isinstance(value, str | float):
            return value
        if isinstance(value, int):
            if value.bit_length() <= _FLOAT_BITS:
                return value
            self.count += 1
            digits = int(value.bit_length() * 0.30103) + 1
            return f"{_TOO_LARGE}: about {digits} digits]"
        if depth >= MAX_DEPTH and isinstance(value, dict | list) and value:
            self.count += 1
            return f"{_TOO_DEEP} {MAX_DEPTH} levels: not shown]"
        if isinstance(value, dict):
            return {str(k): self(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list):
            return [self(v, depth + 1) for v in value]
        return str(value)


def read_run(directory: Path) -> RunInput:
    """The run in `directory`, tamed; CommandError only when nothing in it can be read."""
    tame = Tamer()
    metadata, problem = _read_metadata(directory)
    path = directory / RESULTS_FILE
    records: list[dict[str, Any]] = []
    damaged: list[int] = []
    if path.exists():
        try:
            for number, record in result_lines(path):
                if isinstance(record, Mapping):
                    records.append(tame(dict(record)))
                else:  # unreadable, or JSON that is no result record (a list, a number)
                    damaged.append(number)
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc}") from None
    if not records and problem:
        lines = f"it holds no result lines in {RESULTS_FILE}"
        if damaged:
            lines = (
                f"its {len(damaged)} line(s) in {RESULTS_FILE} are no readable result records "
                f"(the first being record {damaged[0]}; damaged, or not JSON objects)"
            )
        raise CommandError(
            f"nothing in {directory} can be read: {problem}, and {lines}; is it a "
            "directory written by `vfgym eval`?"
        )
    return RunInput(tame(metadata), records, damaged, tame.count, problem)


def _read_metadata(directory: Path) -> tuple[dict[str, Any], str]:
    """metadata.json as a dict, or ({}, why there is none to show).

    Whatever is wrong with it (missing, cut short, not JSON, nested too deep, another
    shape) is said on the page, which still shows every rollout; a cut or unreadable
    file is named with what to do, since it is the one file that says how the run was
    made and is worth restoring.
    """
    path = directory / METADATA_FILE
    if not path.exists():
        return {}, f"{METADATA_FILE} is missing"
    try:
        metadata = json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        return {}, f"{METADATA_FILE} nests too deep to read"
    except (OSError, ValueError) as exc:  # UnicodeDecodeError: a ValueError
        return {}, (
            f"{METADATA_FILE} cannot be read ({str(exc)[:300]}); restore it from a copy "
            "to see the run's settings here"
        )
    if not isinstance(metadata, dict):
        return {}, f"{METADATA_FILE} is not a JSON object"
    return metadata, ""


__all__ = ["MAX_DEPTH", "RunInput", "Tamer", "is_marker", "read_run"]
