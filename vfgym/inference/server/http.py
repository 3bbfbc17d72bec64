"""Writing answers: a JSON body, or a stream of server-sent events.

Shared by the routes (`app`) and the fault injection in `core` (a "malformed" fault
is an event stream whose event is no JSON).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from vfgym.inference.server.protocol import (
    JSONWriter,
)
from vfgym.inference.server.streaming import (
    EventStream,
)


def json_response(
    writer: JSONWriter, payload: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """A JSON answer, encoded in one pass (with any pre-encoded fragments spliced in)."""
    return web.Response(
        body=writer.encode(payload),
        status=status,
        headers=headers,
        content_type="application/json",
    )


#: The `object` of a chunk of a streamed answer of each kind (a text completion's
#: chunks are "text_completion" too, on OpenAI and vLLM).
CHUNK_OBJECT = {"chat.completion": "chat.completion.chunk"}

#: Headers of a server-sent-event stream; no-cache keeps proxies from buffering it.
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


async def send_events(
    request: web.Request, writer: JSONWriter, stream: EventStream
) -> web.StreamResponse:
    """Send `stream` as server-sent events, `data: <json>` each, then `data: [DONE]`.

    One write per event, so a client reads the chunks as they come, as from a
    server that samples token by token. A client that hangs up mid-stream only
    ends the stream: there is nobody left to answer.
    """
    response = web.StreamResponse(status=200, headers=SSE_HEADERS)
    await response.prepare(request)
    try:
        for chunk in stream.chunks:
            await response.write(b"data: " + writer.encode(chunk) + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
    except ConnectionError:
        pass
    return response
