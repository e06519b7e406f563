"""llama.cpp's native `POST /completion` and `GET /props` (llama-server's shapes)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from localllm import __version__
from localllm.engine.async_engine import AsyncEngine
from localllm.errors import RequestError
from localllm.server.context import Ctx, Engine
from localllm.server.llamacpp import llamacpp_answer
from localllm.server.offload import check_text_size, off_loop
from localllm.server.params import check_model
from localllm.server.schemas_llamacpp import CompletionRequest

router = APIRouter()


def prompt_ids(engine: AsyncEngine, prompt: str | list[int | str]) -> list[int]:
    """A string, or token ids mixed with strings (BOS only before a leading string)."""
    tok = engine.tokenizer
    parts = [prompt] if isinstance(prompt, str) else prompt
    if not parts:
        raise RequestError("prompt must not be empty", param="prompt")
    check_text_size(
        tok, sum(len(p) for p in parts if isinstance(p, str)), engine.max_model_len, "prompt"
    )
    ids: list[int] = []
    for i, p in enumerate(parts):
        if isinstance(p, int):
            ids.append(p)
        else:
            ids += tok.encode(p, add_special=i == 0, parse_special=True)
    return ids


@router.post("/completion", response_model=None)
async def completion(
    req: CompletionRequest, request: Request, ctx: Ctx, engine: Engine
) -> Response:
    check_model(ctx.settings, req.model)
    ids = await off_loop(prompt_ids, engine, req.prompt)
    return await llamacpp_answer(request, ctx, engine, req, ids, "completion", n_probs=req.n_probs)


@router.get("/props")
async def props(ctx: Ctx, engine: Engine) -> dict[str, Any]:
    tok = engine.tokenizer
    return {
        "default_generation_settings": {"n_ctx": engine.max_model_len, "params": {}},
        "total_slots": engine.engine.cfg.max_num_seqs,
        "model_path": ctx.settings.model_path,
        "model_alias": ctx.settings.model_name,
        "chat_template": engine.chat_template.source,
        "bos_token": tok.token_text(tok.bos_id) if tok.bos_id is not None else "",
        "eos_token": tok.token_text(tok.eos_id) if tok.eos_id is not None else "",
        "build_info": f"localllm {__version__}",
        "modalities": {"vision": False, "audio": False},
        "is_sleeping": False,
    }
