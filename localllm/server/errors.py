"""OpenAI-shaped errors: `{"error": {"message", "type", "param", "code"}}` for every failure.

One handler per exception kind is installed on the app, so a route raises and never builds
an error response itself. Unexpected exceptions become a 500 in the same shape and are
logged; the process keeps serving.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from localllm.errors import LocalLLMError, RequestError
from localllm.server.fields import FieldError

log = logging.getLogger("localllm.server")

# HTTP status -> OpenAI error type
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "invalid_request_error",
    403: "permission_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    422: "invalid_request_error",
    500: "server_error",
    503: "service_unavailable",
}


class APIError(Exception):
    """An error with its HTTP status, raised anywhere below a route."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        type_: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.type = type_ or ERROR_TYPES.get(status, "invalid_request_error")

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def body_for(self, path: str) -> dict[str, Any]:
        """Ollama's routes (/api/...) answer `{"error": "message"}`, as Ollama does."""
        return {"error": self.message} if is_ollama_path(path) else self.body()

    def encoded(self, path: str = "") -> bytes:
        # ASCII-escaped: a message can never fail to encode (lone surrogates in echoed input)
        return json.dumps(self.body_for(path), ensure_ascii=True).encode()

    def headers(self) -> dict[str, str]:
        return {"WWW-Authenticate": "Bearer"} if self.status == 401 else {}

    def response(self, path: str = "") -> Response:
        return Response(
            self.encoded(path), self.status, self.headers(), media_type="application/json"
        )


def is_ollama_path(path: str) -> bool:
    return path.startswith("/api/")


def from_request_error(e: RequestError) -> APIError:
    return APIError(400, str(e), code=e.code, param=e.param)


def _loc_param(loc: tuple[Any, ...]) -> str | None:
    parts = [str(p) for p in loc if p != "body"]
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out += f"[{p}]" if p.isdigit() else f".{p}"
    return out


def from_validation_error(e: RequestValidationError) -> APIError:
    errors = e.errors()
    first: dict[str, Any] = dict(errors[0]) if errors else {"type": "invalid", "msg": "invalid"}
    if first.get("type") == "json_invalid":
        detail = (first.get("ctx") or {}).get("error", "invalid JSON")
        return APIError(
            400, f"We could not parse the JSON body of your request: {detail}", code="invalid_json"
        )
    param = _loc_param(tuple(first.get("loc", ())))
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, FieldError):
        param = f"{param}.{cause.param}" if param else cause.param
        return APIError(400, cause.message, code=cause.code, param=param)
    msg = f"Invalid '{param}': {first.get('msg')}" if param else str(first.get("msg"))
    if len(errors) > 1:
        msg += f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})"
    code = "missing_required_parameter" if first.get("type") == "missing" else "invalid_value"
    if str(first.get("type", "")).endswith("_type"):
        code = "invalid_type"
    return APIError(400, msg, code=code, param=param)


def error_body(e: Exception) -> dict[str, Any]:
    """The OpenAI error body for any exception (used in-band once a stream has started)."""
    if isinstance(e, APIError):
        return e.body()
    if isinstance(e, RequestError):
        return from_request_error(e).body()
    return APIError(500, f"internal error: {type(e).__name__}: {e}", code="internal_error").body()


async def _api_error(request: Request, e: Exception) -> Response:
    assert isinstance(e, APIError)
    return e.response(request.url.path)


async def _request_error(request: Request, e: Exception) -> Response:
    if isinstance(e, RequestError):
        return from_request_error(e).response(request.url.path)
    return APIError(400, str(e)).response(request.url.path)


async def _validation_error(request: Request, e: Exception) -> Response:
    assert isinstance(e, RequestValidationError)
    return from_validation_error(e).response(request.url.path)


async def _http_error(request: Request, e: Exception) -> Response:
    assert isinstance(e, StarletteHTTPException)
    if e.status_code == 404:
        msg = f"Unknown route {request.method} {request.url.path}"
        return APIError(404, msg, code="unknown_url").response(request.url.path)
    if e.status_code == 405:
        msg = f"Method {request.method} is not allowed on {request.url.path}"
        return APIError(405, msg, code="method_not_allowed").response(request.url.path)
    code = "request_too_large" if e.status_code == 413 else None
    return APIError(e.status_code, str(e.detail), code=code).response(request.url.path)


async def _internal_error(request: Request, e: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return APIError(
        500, f"internal error: {type(e).__name__}: {e}", code="internal_error"
    ).response(request.url.path)


async def _client_gone(request: Request, e: Exception) -> Response:
    log.info("client left before the answer of %s %s", request.method, request.url.path)
    return Response(status_code=499)  # nginx's "client closed request"; nobody reads it


def install_error_handlers(app: FastAPI) -> None:
    from localllm.server.generation import ClientGone

    app.add_exception_handler(ClientGone, _client_gone)
    app.add_exception_handler(APIError, _api_error)
    app.add_exception_handler(LocalLLMError, _request_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _internal_error)
