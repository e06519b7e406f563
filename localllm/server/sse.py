"""Server-sent events as OpenAI streams them: `data: {json}\n\n` ... `data: [DONE]\n\n`.

`EventStreamResponse` (also used for Ollama's NDJSON streams) watches for the client going away while it waits for tokens (not only
when a write fails) and always closes its body iterator, so the generation behind it is
aborted at once.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

DONE = b"data: [DONE]\n\n"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse_data(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


class EventStreamResponse(StreamingResponse):
    def __init__(self, body: AsyncIterator[bytes], media_type: str = "text/event-stream") -> None:
        super().__init__(body, media_type=media_type, headers=HEADERS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with anyio.create_task_group() as tg:

            async def stream() -> None:
                try:
                    await self.stream_response(send)
                except OSError:  # the client is gone
                    pass
                finally:
                    tg.cancel_scope.cancel()
                    with anyio.CancelScope(shield=True):
                        await self.body_iterator.aclose()  # type: ignore[attr-defined]

            tg.start_soon(stream)
            await self.listen_for_disconnect(receive)
            tg.cancel_scope.cancel()
