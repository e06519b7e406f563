"""Local-server safety: the checks that keep web pages out of a server on this machine.

- `Host`: a DNS-rebinding page reaches 127.0.0.1 under its own domain name, so a request
  whose Host is a name other than localhost (`*.localhost`), the bound host, this machine's
  name (when bound beyond loopback) or an `--allowed-host` gets 403. IP literals are always
  fine: rebinding needs a name. No Host header (HTTP/1.0) is fine too.
- `Origin`: browsers send it on cross-site requests; one not in `--cors-origin` gets 403,
  except loopback origins (`http://localhost:3000`: a local app) and VS Code webviews.
  Editor plugins, the OpenAI/Ollama clients and curl send no Origin.
- Content type: a POST must say `application/json` (or `application/...+json`). Browsers
  send text/plain, form and multipart bodies cross-site without a CORS preflight; refusing
  them (415) means a page can never start a generation by a plain form or `fetch`.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from localllm.server.errors import APIError
from localllm.server.settings import ServerSettings

LOCAL_ORIGIN_SCHEMES = ("vscode-webview", "vscode-file")


def host_name(value: str) -> str:
    """`[::1]:8000` -> `::1`, `Example.COM.:80` -> `example.com`."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _is_loopback_name(name: str) -> bool:
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class SafetyPolicy:
    def __init__(self, settings: ServerSettings) -> None:
        self.any_host = "*" in settings.allowed_hosts
        names = {host_name(h) for h in (settings.host, *settings.allowed_hosts)}
        if not settings.loopback:
            names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
        self.names = frozenset(names)
        self.any_origin = "*" in settings.cors_origins
        self.origins = frozenset(o.rstrip("/").lower() for o in settings.cors_origins)

    def host_ok(self, host: str | None) -> bool:
        if host is None or self.any_host:
            return True
        name = host_name(host)
        return not name or _is_ip(name) or _is_loopback_name(name) or name in self.names

    def origin_ok(self, origin: str, host: str | None) -> bool:
        origin = origin.rstrip("/").lower()
        if self.any_origin or origin in self.origins:
            return True
        parts = urlsplit(origin)
        if parts.scheme in LOCAL_ORIGIN_SCHEMES:
            return True
        if parts.scheme in ("http", "https") and parts.hostname:
            if _is_loopback_name(parts.hostname.rstrip(".")):
                return True
            return host is not None and parts.netloc == host.lower()  # same origin
        return False


def _json_type(value: str) -> bool:
    media = value.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


async def send_error(scope: Scope, send: Send, err: APIError) -> None:
    body = err.encoded(scope.get("path", ""))
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in err.headers().items()]
    await send({"type": "http.response.start", "status": err.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class SafetyMiddleware:
    """403 for a foreign Host or Origin, 415 for a POST body that is not declared JSON."""

    def __init__(self, app: ASGIApp, settings: ServerSettings) -> None:
        self.app = app
        self.policy = SafetyPolicy(settings)

    def _refusal(self, scope: Scope) -> APIError | None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        host, origin = headers.get("host"), headers.get("origin")
        if not self.policy.host_ok(host):
            return APIError(
                403,
                f"Host {json.dumps(host)} is not allowed (DNS-rebinding protection); start the "
                "server with --allowed-host NAME to accept it",
                code="host_not_allowed",
            )
        if origin is not None and not self.policy.origin_ok(origin, host):
            return APIError(
                403,
                f"cross-origin requests from {json.dumps(origin)} are not allowed; start the "
                "server with --cors-origin ORIGIN to accept them",
                code="origin_not_allowed",
            )
        if scope["method"] == "POST" and not _json_type(headers.get("content-type", "")):
            given = headers.get("content-type")
            return APIError(
                415,
                f"Content-Type must be application/json (got {json.dumps(given)}); with curl, "
                "add -H 'Content-Type: application/json'",
                code="unsupported_media_type",
            )
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            err = self._refusal(scope)
            if err is not None:
                return await send_error(scope, send, err)
        await self.app(scope, receive, send)
