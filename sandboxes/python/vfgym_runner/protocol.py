"""The runner's side of the host protocol: signed, length-prefixed JSON frames.

Each message is a 4-byte big-endian length, then a 32-byte HMAC-SHA256 tag, then
UTF-8 JSON. The host's first request carries the key; every later frame in either
direction is signed with it (see runner.py's docstring for why).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import struct

HEADER = struct.Struct(">I")
TAG_SIZE = 32  # HMAC-SHA256
REQUEST_LABEL, REPLY_LABEL = b"vfgym request\0", b"vfgym reply\0"
MIN_KEY_BYTES = 16
MAX_REQUEST_BYTES = 512 * 1024 * 1024


class ProtocolError(Exception):
    """A request the runner must not act on: unsigned, replayed, or without the key."""


def sign(key: bytes, label: bytes, body: bytes) -> bytes:
    """The tag of one frame; the label keeps a request from passing as a reply."""
    mac = hmac.new(key, label, hashlib.sha256)
    mac.update(body)
    return mac.digest()


class Protocol:
    """Signed, length-prefixed JSON over two file descriptors user code never inherits.

    The first request carries the key (see the module docstring); after it, a request
    counts only with a valid tag and an id above every earlier one, so a request read
    off the stream by someone else cannot be replayed.
    """

    def __init__(self, in_fd: int, out_fd: int) -> None:
        self.in_fd = in_fd
        self.out_fd = out_fd
        self.key: bytes | None = None
        self.last_id = 0

    def _read_exact(self, size: int) -> bytes | None:
        chunks = []
        while size:
            chunk = os.read(self.in_fd, min(size, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def read(self) -> dict | None:
        header = self._read_exact(HEADER.size)
        if header is None:
            return None
        (size,) = HEADER.unpack(header)
        if size > MAX_REQUEST_BYTES or size < TAG_SIZE:
            raise ValueError(f"request of {size} bytes is outside the runner's limits")
        payload = self._read_exact(size)
        if payload is None:
            return None
        tag, body = payload[:TAG_SIZE], payload[TAG_SIZE:]
        if self.key is None:
            self.key = self._first_key(body)
        if not hmac.compare_digest(tag, sign(self.key, REQUEST_LABEL, body)):
            raise ProtocolError("a request not signed with the host's key")
        message = json.loads(body)
        request_id = message.get("id") if isinstance(message, dict) else None
        if not isinstance(request_id, int) or request_id <= self.last_id:
            raise ProtocolError(f"request id {request_id!r} does not follow {self.last_id}")
        self.last_id = request_id
        return message

    @staticmethod
    def _first_key(body: bytes) -> bytes:
        """The key from the host's first request; without one nothing can be trusted."""
        try:
            key = base64.b64decode(json.loads(body)["key"], validate=True)
        except (ValueError, KeyError, TypeError) as exc:
            raise ProtocolError("the first request carries no key") from exc
        if len(key) < MIN_KEY_BYTES:
            raise ProtocolError("the first request's key is too short")
        return key

    def write(self, message: dict) -> None:
        body = json.dumps(message, ensure_ascii=False).encode("utf-8", "replace")
        # Before a key arrived nothing the host could check can be sent: it will refuse
        # this frame, which is right, since the request that caused it was not its.
        tag = sign(self.key or b"", REPLY_LABEL, body)
        data = memoryview(HEADER.pack(len(tag) + len(body)) + tag + body)
        while data:
            written = os.write(self.out_fd, data)
            data = data[written:]
