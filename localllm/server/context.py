"""Per-app context that routes reach through FastAPI dependencies (no module globals)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from localllm.engine.async_engine import AsyncEngine
from localllm.server.metrics import ServerMetrics
from localllm.server.settings import ServerSettings
from localllm.server.state import EngineHolder
from localllm.server.warmer import PromptWarmer


@dataclass
class ServerContext:
    settings: ServerSettings
    holder: EngineHolder
    metrics: ServerMetrics
    created: int  # unix time the server started (the model card's `created`)
    warmer: PromptWarmer  # prompt-only jobs that fill the prefix cache (n_predict 0)


def get_context(request: Request) -> ServerContext:
    ctx: ServerContext = request.app.state.ctx
    return ctx


def get_engine(request: Request) -> AsyncEngine:
    """The loaded engine; 503 while the model loads."""
    return get_context(request).holder.get()


# route parameter types: `ctx: Ctx, engine: Engine`
Ctx = Annotated[ServerContext, Depends(get_context)]
Engine = Annotated[AsyncEngine, Depends(get_engine)]
