"""The one exception the runner answers a request with instead of a result.

Its own module because the file operations and the request dispatch both raise
it, and the dispatch turns it into the reply's "error" and "message".
"""

from __future__ import annotations


class RunnerError(Exception):
    """A request the runner refuses; `kind` tells the host which exception to raise."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
