"""The FastAPI app: routers, middleware, error handlers, and the engine loaded at startup."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from localllm import __version__
from localllm.engine.async_engine import AsyncEngine
from localllm.server import (
    routes_chat,
    routes_completions,
    routes_infill,
    routes_llamacpp,
    routes_ollama,
    routes_system,
    routes_tokens,
)
from localllm.server.context import ServerContext
from localllm.server.errors import install_error_handlers
from localllm.server.metrics import ServerMetrics, engine_snapshot
from localllm.server.middleware import (
    AuthMiddleware,
    BodyLimitMiddleware,
    RequestCountMiddleware,
)
from localllm.server.safety import SafetyMiddleware
from localllm.server.settings import ServerSettings
from localllm.server.state import EngineHolder
from localllm.server.warmer import PromptWarmer

ROUTERS = (
    routes_system,
    routes_chat,
    routes_completions,
    routes_infill,
    routes_tokens,
    routes_llamacpp,
    routes_ollama,
)


def create_app(
    settings: ServerSettings,
    load_engine: Callable[[], AsyncEngine],
    on_load_error: Callable[[BaseException], None] | None = None,
) -> FastAPI:
    """An app that starts loading the engine (`load_engine()`, in a background thread) when
    the server starts and shuts it down when the server stops."""
    holder = EngineHolder(load_engine, on_load_error)

    def snapshot() -> dict[str, Any] | None:
        return holder.get().run_sync(engine_snapshot) if holder.ready else None

    ctx = ServerContext(settings, holder, ServerMetrics(snapshot), int(time.time()), PromptWarmer())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        holder.start()
        try:
            yield
        finally:
            ctx.warmer.close()
            holder.close()

    app = FastAPI(
        title="localllm",
        version=__version__,
        lifespan=lifespan,
        description="OpenAI-compatible API over a local model",
    )
    app.state.ctx = ctx
    for module in ROUTERS:
        app.include_router(module.router)
    install_error_handlers(app)
    # added innermost first: requests pass counting -> safety (Host, Origin, content type)
    # -> CORS -> auth -> body limit -> routes
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    if settings.api_key is not None:
        app.add_middleware(AuthMiddleware, api_key=settings.api_key)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.cors_origins),
            allow_methods=["*"],
            allow_headers=["*"],
        )
    app.add_middleware(SafetyMiddleware, settings=settings)
    paths = frozenset(getattr(r, "path", "") for m in ROUTERS for r in m.router.routes)
    app.add_middleware(RequestCountMiddleware, metrics=ctx.metrics, routes=paths)
    return app
