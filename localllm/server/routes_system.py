"""GET /health, /v1/models, /metrics and /stats (engine and KV cache state as JSON)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from localllm.engine.async_engine import AsyncEngine
from localllm.server.context import Ctx, Engine, ServerContext
from localllm.server.errors import APIError
from localllm.server.metrics import engine_snapshot

router = APIRouter()


@router.get("/health", response_model=None)
async def health(ctx: Ctx) -> Response:
    st = ctx.holder.status
    if ctx.holder.ready:
        return JSONResponse({"status": "ok"})
    body: dict[str, Any] = {"status": st.state}
    if st.error:
        body["error"] = st.error
    return JSONResponse(body, status_code=503)


def _model_card(ctx: ServerContext, engine: AsyncEngine) -> dict[str, Any]:
    return {
        "id": ctx.settings.model_name,
        "object": "model",
        "created": ctx.created,
        "owned_by": "localllm",
        "max_model_len": engine.max_model_len,
    }


@router.get("/v1/models")
async def list_models(ctx: Ctx, engine: Engine) -> dict[str, Any]:
    return {"object": "list", "data": [_model_card(ctx, engine)]}


@router.get("/v1/models/{model:path}")
async def get_model(model: str, ctx: Ctx, engine: Engine) -> dict[str, Any]:
    if not ctx.settings.serves(model):
        raise APIError(
            404,
            f"The model {ascii(model)} does not exist; this server serves "
            f"{ascii(ctx.settings.model_name)}",
            code="model_not_found",
            param="model",
        )
    return _model_card(ctx, engine)


@router.get("/metrics", response_model=None)
async def metrics(ctx: Ctx, engine: Engine) -> Response:
    data = await run_in_threadpool(ctx.metrics.render)
    return Response(data, media_type=CONTENT_TYPE_LATEST)


@router.get("/stats")
async def stats(engine: Engine) -> dict[str, Any]:
    """Engine counters and KV-cache occupancy (a localllm extension, used by tests and the UI)."""
    return await run_in_threadpool(engine.run_sync, engine_snapshot)
