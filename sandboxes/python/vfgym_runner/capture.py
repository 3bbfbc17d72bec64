"""Output capture: the head and tail of a stream, cut at character boundaries."""

from __future__ import annotations


class Capture:
    """Keeps the head and tail of a stream and counts what falls in between."""

    def __init__(self, limit: int) -> None:
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.tail_limit:
                del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        if not self.truncated:  # head and tail meet: one stream, decoded as one
            return bytes(self.head + self.tail).decode("utf-8", "replace")
        # Cut at character boundaries, so the cuts add no replacement characters.
        head = bytes(self.head[: complete_utf8_prefix(self.head)])
        tail = bytes(self.tail[utf8_continuation_prefix(self.tail) :])
        omitted = self.total - len(head) - len(tail)
        head_text, tail_text = head.decode("utf-8", "replace"), tail.decode("utf-8", "replace")
        return f"{head_text}\n[... {omitted} bytes omitted ...]\n{tail_text}"


def complete_utf8_prefix(data: bytearray) -> int:
    """Length of `data` without a multibyte UTF-8 character cut off at its end."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return len(data)
        if byte >= 0xC0:  # the lead byte of the last character
            needed = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return len(data) - back if back < needed else len(data)
    return len(data)


def utf8_continuation_prefix(data: bytearray) -> int:
    """How many bytes at the start of `data` finish a character cut off before it."""
    count = 0
    while count < min(3, len(data)) and 0x80 <= data[count] < 0xC0:
        count += 1
    return count
