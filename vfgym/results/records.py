"""One result line's JSON form: strict JSON values, and credentials kept off the disk.

What a rollout becomes on disk is decided here, apart from how lines are written
(`jsonl`) and read back (`reader`): a line must be strict JSON any reader takes
(NaN and infinity as null, values JSON cannot hold turned into ones it can), the
same in every process (a resume compares and fingerprints them), and must never
carry an API key from the run's settings.
"""

from __future__ import annotations

import json
import math
import platform
import re
from importlib import metadata as importlib_metadata
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

#: State keys every result line carries; more can be asked for with `state_columns`.
RECORD_STATE_KEYS = (
    "stop_reason",
    "is_truncated",
    "turn",
    "completion_tokens",
    "timing",
    "tools_called",
    "reward_errors",
    "error",
)


#: A default repr's memory address, which differs from process to process.
_ADDRESS = re.compile(r" at 0x[0-9A-Fa-f]+")


def json_default(value: Any) -> Any:
    """A JSON form of `value`; the same in every process, so a resume (a new process)
    compares and fingerprints the same inputs as the run it continues."""
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if isinstance(value, set | frozenset):
        return plain_json(value, finite=False)  # sorted: a set's order differs per process
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy scalars and arrays
        try:
            return value.tolist()
        except (TypeError, ValueError):
            pass
    return _ADDRESS.sub("", repr(value))


def plain_json(value: Any, finite: bool) -> Any:
    """`value` as plain JSON data: dict keys as text (as JSON writes them), sets as
    sorted lists, tuples as lists, other values as `json_default` gives them, and,
    when `finite`, NaN and infinity as None (strict JSON has no such numbers)."""
    if isinstance(value, float):
        return value if not finite or math.isfinite(value) else None
    if value is None or isinstance(value, str | int):
        return value
    if isinstance(value, dict):
        return {_json_key(k): plain_json(v, finite) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_json(v, finite) for v in value]
    if isinstance(value, set | frozenset):
        items = [plain_json(v, finite) for v in value]
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    return plain_json(json_default(value), finite)


def _json_key(key: Any) -> str:
    """A dict key as JSON writes it: text as is, numbers, booleans and None as JSON
    would (`1`, `true`, `null`); a key JSON refuses (a tuple: a board's `(row, col)`)
    as the JSON text of its value, rather than failing the whole line."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)
    return json.dumps(plain_json(key, finite=False), sort_keys=True)


def _strict(value: Any) -> Any:
    """`value` with every NaN or infinity replaced by None (JSON has no such numbers),
    and values JSON cannot hold turned into ones it can, as `json_default` does."""
    return plain_json(value, finite=True)


def json_line(record: dict[str, Any]) -> bytes:
    """One result line as UTF-8 bytes: strict JSON (NaN and infinity are written as null,
    so any JSON reader can load the file) ending in a newline.

    Text is kept as it is when it can be; text UTF-8 cannot encode (a lone surrogate
    from a model's output) is written with JSON's \\u escapes instead, which read
    back to the same string, rather than stopping the run.
    """
    try:
        text = json.dumps(record, default=json_default, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        # NaN or infinity (ValueError), or a key JSON refuses (TypeError); a circular
        # reference is a bug of the caller's and stays an error.
        if isinstance(exc, ValueError) and "float" not in str(exc):
            raise
        text = json.dumps(_strict(record), ensure_ascii=False, allow_nan=False)
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(json.loads(text), ensure_ascii=True) + "\n").encode("ascii")


def as_json(value: Any) -> Any:
    """`value` as it reads back from disk (tuples become lists, NaN becomes None, and so on),
    for comparisons."""
    return json.loads(json.dumps(_strict(value), default=json_default))


def _finite(value: Any) -> float | None:
    """A reward or metric as a JSON number, or None when it is not a finite number.

    numpy scalars (`np.float32`, `np.int64`) are numbers too, though not Python floats.
    """
    if isinstance(value, bool) or not hasattr(value, "__float__"):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


#: Names of arguments, headers and query parameters whose values are credentials.
_SECRET_NAME = re.compile(
    r"(^|_)(api_?key|access_?key|secret(_?key)?|private_?key|token|access_token|auth_token|"
    r"refresh_token|password|passwd|authorization|credentials?|cookie|bearer)($|_)"
)
REDACTED = "<redacted>"


def _is_secret_name(name: Any, in_url: bool = False) -> bool:
    key = re.sub(r"[^a-z0-9]+", "_", str(name).lower())
    return bool(_SECRET_NAME.search(key)) or (in_url and key in ("key", "sig", "signature"))


def _redact_url(text: str) -> str:
    try:
        parts = urlsplit(text)
    except ValueError:
        return text
    if parts.scheme not in ("http", "https", "ws", "wss") or not parts.netloc:
        return text
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        name = user.split(":", 1)[0]
        netloc = f"{name}:{REDACTED}@{host}" if ":" in user else f"{REDACTED}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(_is_secret_name(k, in_url=True) for k, _ in pairs):
            query = urlencode(
                [(k, REDACTED if _is_secret_name(k, in_url=True) else v) for k, v in pairs],
                safe="<>",
            )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _redact_item(name: Any, value: Any) -> Any:
    # Credentials are text (or hold text); a number under such a name (`token_budget`)
    # is a setting, and stays comparable for resume.
    if _is_secret_name(name) and isinstance(value, str | dict | list) and value:
        return REDACTED
    return redact_secrets(value)


def redact_secrets(value: Any) -> Any:
    """`value` with credentials replaced by a placeholder, for anything written to disk.

    A run's metadata records how it was run (base URL, sampling and environment
    arguments), and those can carry an API key: `http://user:key@host/v1`, an
    `extra_headers` `Authorization`, an environment's `api_key` argument. The file
    outlives the key's secrecy (it is shared, archived, put in reports), so the key
    must never reach it. Values under a credential's name are replaced, and so are
    the password and credential query parameters of URLs.
    """
    if isinstance(value, dict):
        return {k: _redact_item(k, v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_secrets(v) for v in value]
    if isinstance(value, str) and "://" in value:
        return _redact_url(value)
    return value


def library_versions() -> dict[str, str]:
    """Versions of vfgym and the libraries whose behaviour shapes a result."""
    versions = {"python": platform.python_version()}
    for name in ("vfgym", "openai", "pydantic", "gymnasium", "docker", "datasets"):
        try:
            versions[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            continue
    return versions


def make_record(
    index: int,
    row: dict[str, Any],
    completion: Any,
    state: dict[str, Any],
    reward: float,
    metrics: dict[str, float],
    state_columns: list[str] | None = None,
) -> dict[str, Any]:
    """The JSON line of one finished rollout.

    The prompt and info are the State's, as the episode was played: a
    `setup_state` may have added to the prompt the model saw, or drawn a board
    into the info.
    """
    record: dict[str, Any] = {
        "index": index,
        "example_id": row.get("example_id", index),
        "task": row.get("task", "default"),
        "prompt": state.get("prompt", row.get("prompt")),
        "completion": completion,
        "answer": row.get("answer", ""),
        "info": state.get("info", row.get("info", {})),
        "reward": _finite(reward),
        "metrics": {k: _finite(v) for k, v in metrics.items()},
    }
    for key in RECORD_STATE_KEYS:
        if key in state:
            record[key] = state[key]
    for key in state_columns or ():
        if key in state:
            record.setdefault("state", {})[key] = state[key]
    return record
