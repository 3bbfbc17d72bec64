"""A lean OpenAI-compatible stand-in server for the HTTP table, until stdin closes.

The HTTP table measures the clients, so the server must cost far less per request
than any client does: a bare asyncio protocol speaking HTTP/1.1 with keep-alive,
which decodes each request body (the decision rule reads the last message and the
tools) and answers with one of two prebuilt responses, the same JSON the scripted
model gives. It prints one JSON line with the base URL once listening; then each
"stats" line on stdin is answered with a JSON line of the requests served and the
process CPU time so far, so the benchmark can print the server's CPU per request.
Imports only the standard library and its neighbours in this folder.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from typing import Any

from scripted_model import _completion_payload, wants_tool_call


def _http_answer(payload: dict[str, Any]) -> bytes:
    body = json.dumps(payload, separators=(",", ":")).encode()
    head = (
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: keep-alive\r\n\r\n"
    )
    return head.encode() + body


ANSWERS = {flag: _http_answer(_completion_payload(flag)) for flag in (False, True)}
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: keep-alive\r\n\r\n"


class Counter:
    requests = 0


def content_length(head: bytes) -> int:
    """The Content-Length of a request head (lower-cased), 0 when it has none."""
    at = head.find(b"\r\ncontent-length:")
    if at < 0:
        return 0
    line_end = head.find(b"\r\n", at + 2)
    return int(head[at + 17 : line_end if line_end >= 0 else len(head)])


class ChatProtocol(asyncio.Protocol):
    """One keep-alive connection: requests are answered in the order they arrive."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end]).lower()
            length = content_length(head)
            total = end + 4 + length
            if len(self.buffer) < total:
                return
            body = bytes(self.buffer[end + 4 : total])
            del self.buffer[:total]
            self.answer(head, body)

    def answer(self, head: bytes, body: bytes) -> None:
        assert self.transport is not None
        Counter.requests += 1
        if not head.startswith(b"post ") or b"/chat/completions" not in head[: head.find(b"\r\n")]:
            self.transport.write(NOT_FOUND)
            return
        request = json.loads(body)
        self.transport.write(ANSWERS[wants_tool_call(request["messages"], request.get("tools"))])


def watch_stdin(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    """Answer "stats" lines; closing stdin stops the server."""
    for line in sys.stdin:
        if line.strip() == "stats":
            stats = {"requests": Counter.requests, "cpu_s": time.process_time()}
            print(json.dumps(stats), flush=True)
    loop.call_soon_threadsafe(stop.set)


async def main() -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(ChatProtocol, "127.0.0.1", 0, backlog=4096)
    port = server.sockets[0].getsockname()[1]
    stop = asyncio.Event()
    print(json.dumps({"base_url": f"http://127.0.0.1:{port}/v1"}), flush=True)
    threading.Thread(target=watch_stdin, args=(loop, stop), daemon=True).start()
    try:
        await stop.wait()
    finally:
        server.close()


if __name__ == "__main__":
    asyncio.run(main())
