"""`localllm chat --serve`: the HTTP API in the chat's own event loop, on the chat's engine."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from localllm.errors import LocalLLMError

# names under which localllm.server may export "AsyncEngine -> ASGI app"
FACTORY_NAMES = ("create_app", "build_app", "make_app", "app_factory")


def find_app_factory(module: str = "localllm.server") -> Callable[..., Any] | None:
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and module.startswith(e.name):
            return None
        raise
    for name in FACTORY_NAMES:
        fn = getattr(mod, name, None)
        if callable(fn):
            return fn
    return None


def make_server(engine: Any, host: str, port: int) -> Any:
    """A uvicorn.Server for the engine (run it with `await server.serve()` as a task)."""
    factory = find_app_factory()
    if factory is None:
        raise LocalLLMError(
            "--serve needs the HTTP server (localllm.server with an app factory), "
            "which this installation does not have"
        )
    import uvicorn

    # log_config=None: uvicorn must not print into the terminal the chat is drawing on
    config = uvicorn.Config(factory(engine), host=host, port=port, log_config=None,
                            access_log=False, log_level="warning")
    return uvicorn.Server(config)
