"""POST /infill, compatible with llama.cpp's server (llama.vim, llama.vscode).

The prompt is laid out by `prompts.fim_layout`; parts too long for the context are trimmed
as llama.cpp does (prefix keeps its end, suffix its start) and the answer says `truncated`.
Texts far longer than the context are clipped by length before tokenizing (`offload`), so a
huge file costs no more than one that just fits. The answer is `llamacpp.llamacpp_answer`.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from localllm.engine.async_engine import AsyncEngine
from localllm.server.context import Ctx, Engine
from localllm.server.llamacpp import llamacpp_answer
from localllm.server.offload import off_loop, text_cap
from localllm.server.params import check_model
from localllm.server.prompts import extra_context_ids, fim_layout, fit_fim, text_ids
from localllm.server.schemas_llamacpp import InfillRequest

router = APIRouter()
DEFAULT_RESERVE = 256  # context kept free for the answer when n_predict is -1


def infill_prompt(engine: AsyncEngine, req: InfillRequest, reserve: int) -> tuple[list[int], bool]:
    """(prompt ids, whether a part was trimmed); runs in a worker thread."""
    tok = engine.tokenizer
    fixed = len(fim_layout(tok, [], [], [], param="input_prefix"))  # 400 without FIM tokens
    budget = engine.max_model_len - reserve - fixed
    cap = 2 * text_cap(tok, max(budget, 1))  # beyond this, trimming drops the text anyway
    chunks = [(c.filename[:cap], c.text[-cap:]) for c in req.input_extra]
    clipped = sum(len(c.text) for c in req.input_extra) > cap
    extra = extra_context_ids(tok, chunks)[-cap:]
    prefix_text = req.input_prefix + req.prompt
    prefix = text_ids(tok, prefix_text[-cap:])
    suffix = text_ids(tok, req.input_suffix[:cap])
    clipped = clipped or len(prefix_text) > cap or len(req.input_suffix) > cap
    prefix, suffix, extra, trimmed = fit_fim(prefix, suffix, extra, budget)
    return fim_layout(tok, prefix, suffix, extra, param="input_prefix"), trimmed or clipped


@router.post("/infill", response_model=None)
async def infill(req: InfillRequest, request: Request, ctx: Ctx, engine: Engine) -> Response:
    check_model(ctx.settings, req.model)
    wanted = req.max_tokens or (req.n_predict if req.n_predict > 0 else None)
    reserve = min(
        wanted or (1 if req.n_predict == 0 else DEFAULT_RESERVE), engine.max_model_len // 2
    )
    ids, truncated = await off_loop(infill_prompt, engine, req, reserve)
    return await llamacpp_answer(request, ctx, engine, req, ids, "infill", truncated=truncated)
