"""Plain ASGI middleware: API-key check, request-body size limit, per-route request counts
(Host/Origin/content-type checks: `safety.py`).

They answer before routing, so a missing key or an oversized body never reaches a handler
(and never has its body parsed).
"""

from __future__ import annotations

import hmac

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from localllm.server.errors import APIError
from localllm.server.metrics import ServerMetrics
from localllm.server.safety import send_error

OPEN_PATHS = frozenset({"/health"})  # reachable without the API key


class AuthMiddleware:
    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self.expected = f"Bearer {api_key}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or scope["method"] == "OPTIONS":
            return await self.app(scope, receive, send)
        given = dict(scope["headers"]).get(b"authorization", b"")
        if hmac.compare_digest(given.strip(), self.expected):
            return await self.app(scope, receive, send)
        msg = (
            "You didn't provide an API key: send 'Authorization: Bearer YOUR_KEY'"
            if not given
            else "Incorrect API key provided"
        )
        await send_error(scope, send, APIError(401, msg, code="invalid_api_key"))


class BodyLimitMiddleware:
    """413 for bodies over the limit, by Content-Length or while they stream in."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self) -> APIError:
        return APIError(
            413, f"request body larger than {self.max_bytes} bytes", code="request_too_large"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            return await send_error(scope, send, self._too_large())
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.max_bytes:
                    raise _BodyTooLarge()
            return msg

        await self.app(scope, limited, send)


class _BodyTooLarge(StarletteHTTPException):
    """Raised from `receive`; FastAPI passes HTTP exceptions through to the error handlers."""

    def __init__(self) -> None:
        super().__init__(413, "request body too large")


class RequestCountMiddleware:
    """Counts responses by route template and status (unknown paths as "other")."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics, routes: frozenset[str]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"] if scope["path"] in self.routes else "other"

        async def counting_send(msg: Message) -> None:
            if msg["type"] == "http.response.start":
                self.metrics.http_requests.labels(path, str(msg["status"])).inc()
            await send(msg)

        await self.app(scope, receive, counting_send)
