"""Reading a run's files back: every readable result line, and the metadata.

Kept apart from the writer so that reports and tools read results without the
writer's locking and file handling, and so the reading rule lives in one place:
a line no JSON parser takes (a kill cut it, a hand edit broke it) costs that line,
never the whole file.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RESULTS_FILE = "results.jsonl"
METADATA_FILE = "metadata.json"


def read_results(directory: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The metadata and every result line of a run, for reports and tools."""
    directory = Path(directory)
    meta_path = directory / METADATA_FILE
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.exists() else {}
    path = directory / RESULTS_FILE
    records = []
    if path.exists():
        records = [record for _, record in result_lines(path) if record is not None]
    return meta, records


def result_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed line) for each non-blank line; None for a line the JSON
    parser refuses, such as the last line of a run killed mid-write.

    Lines are decoded one by one: a kill can cut a line inside a multi-byte
    character, and that must cost the one line, not make the whole file unreadable.
    Any refusal counts so (not UTF-8, not JSON, an integer past Python's digit limit,
    nesting past its recursion limit): a hand-edited line must not crash a resume.
    A byte-order mark opening the file (an editor that saved it as "UTF-8 with BOM")
    is not part of the first line.
    """
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            if number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]
            if not raw.strip():
                continue
            try:
                yield number, json.loads(raw.decode("utf-8"))
            except (ValueError, RecursionError):  # UnicodeDecodeError, JSONDecodeError too
                yield number, None
