"""`localllm chat --serve`: the HTTP API in the chat's own event loop, on the chat's engine."""

from __future__ import annotations

import socket
from typing import Any

from localllm.errors import LocalLLMError


def make_server(engine: Any, model_name: str, host: str, port: int) -> tuple[Any, socket.socket]:
    """A uvicorn.Server over localllm.server's app for this engine, and its bound socket.

    Run it with `await server.serve(sockets=[sock])`. The port is bound here, first, so that
    a busy port is one readable error before anything starts. (The app's lifespan shuts the
    engine down when the server stops, which happens only when the chat quits.)
    """
    try:
        from localllm.server import ServerSettings, create_app
    except ImportError as e:
        raise LocalLLMError(f"--serve needs the HTTP server (localllm.server): {e}") from None
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise LocalLLMError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    app = create_app(ServerSettings(model_name=model_name, host=host, port=port), lambda: engine)
    # log_config=None: uvicorn must not print into the terminal the chat is drawing on
    config = uvicorn.Config(
        app, log_config=None, access_log=False, log_level="warning", lifespan="on"
    )
    return uvicorn.Server(config), sock
