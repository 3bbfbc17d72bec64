"""The data plane: one hijacked attach stream per container, spoken to asynchronously.

The host writes requests to the container's stdin and reads responses from its
stdout. Docker multiplexes stdout in 8-byte-header frames (no TTY); inside them
the runner's own framing is a 4-byte big-endian length, a 32-byte HMAC-SHA256 tag
and a JSON body. The stream is opened directly on the event loop, so a call costs
no thread hop and no `docker exec`.

The tags exist because code in the sandbox can reach the stream: under gVisor any
process of the runner's uid can open the runner's descriptors through /proc and
write frames of its own (or read the host's requests). A random key goes to the
runner with the first request, before any user code exists; every later frame is
signed with it, and a reply without a valid tag breaks the channel, so forged
replies never count and the sandbox is given up instead of handed on.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import secrets
import struct
from typing import Any

from vfgym.errors import SandboxLostError
from vfgym.sandbox.docker_client import StreamEndpoint

_DOCKER_HEADER = struct.Struct(">BxxxL")
_FRAME_HEADER = struct.Struct(">I")
_TAG_SIZE = 32  # HMAC-SHA256
_REQUEST_LABEL, _REPLY_LABEL = b"vfgym request\0", b"vfgym reply\0"
_STDOUT = 1
_STREAM_LIMIT = 1 << 20


def _sign(key: bytes, label: bytes, body: bytes) -> bytes:
    """The tag of one frame; the label keeps a request from passing as a reply."""
    mac = hmac.new(key, label, hashlib.sha256)
    mac.update(body)
    return mac.digest()


class ForgedReplyError(ValueError):
    """A reply on the stream that the runner did not sign: code in the sandbox wrote it."""


class RunnerChannel:
    """Request/response over one container's stdio; unusable after any failure.

    Calls are serialised with a lock. Any broken invariant (EOF, a malformed or
    oversized frame, a mismatched reply, a cancelled wait) marks the channel
    broken, because the next reply could no longer be matched to its request.
    """

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_frame: int
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._max_frame = max_frame
        self._pending = bytearray()
        self._lock = asyncio.Lock()
        self._next_id = 0
        self._key = secrets.token_bytes(32)
        self._key_sent = False
        self.broken: str | None = None

    @classmethod
    async def attach(
        cls, endpoint: StreamEndpoint, container_id: str, max_frame: int, timeout: float
    ) -> RunnerChannel:
        """Open the attach stream of a (created or running) container."""
        try:
            async with asyncio.timeout(timeout):
                if endpoint.unix_path is not None:
                    reader, writer = await asyncio.open_unix_connection(
                        endpoint.unix_path, limit=_STREAM_LIMIT
                    )
                else:
                    reader, writer = await asyncio.open_connection(
                        endpoint.host, endpoint.port, limit=_STREAM_LIMIT
                    )
                try:
                    await _upgrade(reader, writer, endpoint.api_version, container_id)
                except BaseException:
                    writer.close()
                    raise
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            raise SandboxLostError(
                f"could not attach to container {container_id[:12]}: {exc!r}"
            ) from exc
        return cls(reader, writer, max_frame)

    @property
    def peer_closed(self) -> bool:
        """True once the container closed its end of the stream (it exited or was killed),
        which is seen without a request: an idle sandbox killed from outside is known dead."""
        return self._reader.at_eof()

    async def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request and wait for its reply (at most `timeout` seconds)."""
        async with self._lock:
            if self.broken:
                raise SandboxLostError(f"the sandbox stream is broken: {self.broken}")
            self._next_id += 1
            request_id = self._next_id
            message = {**message, "id": request_id}
            if not self._key_sent:  # the first request: no user code runs yet to see it
                message["key"] = base64.b64encode(self._key).decode("ascii")
                self._key_sent = True
            body = json.dumps(message).encode()
            tag = _sign(self._key, _REQUEST_LABEL, body)
            try:
                # The send counts against the timeout too: a runner that reads nothing
                # (a frozen container) must not hang a large request forever.
                async with asyncio.timeout(timeout):
                    self._writer.write(_FRAME_HEADER.pack(len(tag) + len(body)) + tag + body)
                    await self._writer.drain()
                    reply = await self._read_frame()
            except TimeoutError as exc:
                self._break(f"no reply within {timeout:.1f}s")
                raise SandboxLostError(
                    f"the sandbox runner did not answer within {timeout:.1f}s"
                ) from exc
            except asyncio.CancelledError:
                self._break("a call was cancelled while waiting for its reply")
                raise
            except ForgedReplyError as exc:
                self._break(str(exc))
                raise SandboxLostError(
                    "the sandbox's stream carried a reply its runner did not sign (code in "
                    "the sandbox wrote to the runner's stream); the sandbox is given up"
                ) from exc
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                self._break(f"stream failed: {exc!r}")
                raise SandboxLostError(
                    "the sandbox runner stopped answering (the container or its runner died)"
                ) from exc
            if reply.get("id") != request_id:
                self._break(f"reply id {reply.get('id')!r} != request id {request_id}")
                raise SandboxLostError("the sandbox runner sent a reply out of order")
            return reply

    async def _read_frame(self) -> dict[str, Any]:
        header = await self._read_payload(_FRAME_HEADER.size)
        (size,) = _FRAME_HEADER.unpack(header)
        if size > self._max_frame + _TAG_SIZE:
            raise ValueError(f"reply of {size} bytes exceeds the limit of {self._max_frame}")
        if size < _TAG_SIZE:
            raise ForgedReplyError(f"a reply of {size} bytes has no room for its tag")
        payload = await self._read_payload(size)
        body = payload[_TAG_SIZE:]
        if not hmac.compare_digest(payload[:_TAG_SIZE], _sign(self._key, _REPLY_LABEL, body)):
            raise ForgedReplyError("a reply with a wrong tag")
        reply = json.loads(body)
        if not isinstance(reply, dict):
            raise ValueError("reply is not a JSON object")
        return reply

    async def _read_payload(self, size: int) -> bytes:
        """`size` bytes of the container's stdout, unwrapped from Docker's frames."""
        while len(self._pending) < size:
            header = await self._reader.readexactly(_DOCKER_HEADER.size)
            stream, length = _DOCKER_HEADER.unpack(header)
            if length > self._max_frame + _FRAME_HEADER.size + _TAG_SIZE:
                raise ValueError(f"docker frame of {length} bytes exceeds the limit")
            chunk = await self._reader.readexactly(length)
            if stream == _STDOUT:
                self._pending += chunk
        data = bytes(self._pending[:size])
        del self._pending[:size]
        return data

    def _break(self, reason: str) -> None:
        if not self.broken:
            self.broken = reason
        self._writer.close()

    async def close(self) -> None:
        """Close the stream; the runner sees end of input and exits."""
        if not self.broken:
            self.broken = "closed"
        self._writer.close()
        # asyncio.timeout, not wait_for: wait_for of Python 3.11 loses a cancellation
        # that arrives as the stream finishes closing. TimeoutError is an OSError.
        with contextlib.suppress(OSError, RuntimeError):
            async with asyncio.timeout(1.0):
                await self._writer.wait_closed()


async def _upgrade(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    api_version: str,
    container_id: str,
) -> None:
    """Turn the HTTP connection into the container's raw stdio stream."""
    path = f"/v{api_version}/containers/{container_id}/attach?stream=1&stdin=1&stdout=1&stderr=0"
    writer.write(
        (
            f"POST {path} HTTP/1.1\r\nHost: docker\r\nContent-Length: 0\r\n"
            "Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n"
        ).encode()
    )
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = status_line.split(" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    if status not in (101, 200):
        body = b""
        with contextlib.suppress(asyncio.IncompleteReadError, TimeoutError, OSError):
            body = await asyncio.wait_for(reader.read(4096), 2.0)
        raise OSError(f"attach refused: {status_line} {body.decode('utf-8', 'replace').strip()}")
