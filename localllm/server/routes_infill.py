"""POST /infill, compatible with llama.cpp's server (llama.vim, llama.vscode).

The prompt is laid out by `prompts.fim_layout`; parts too long for the context are trimmed
as llama.cpp does (prefix keeps its end, suffix its start) and the answer says `truncated`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from localllm.core import SamplingParams, TokenEvent
from localllm.engine.async_engine import AsyncEngine
from localllm.server.context import Ctx, Engine
from localllm.server.errors import error_body
from localllm.server.generation import ChoiceResult, check_event, collect, merged_events, primed
from localllm.server.params import Job, check_model, max_tokens_for
from localllm.server.prompts import extra_context_ids, fim_layout, fit_fim, text_ids
from localllm.server.responses import new_id
from localllm.server.schemas import InfillRequest
from localllm.server.sse import EventStreamResponse, sse_data

router = APIRouter()
DEFAULT_RESERVE = 256  # context kept free for the answer when n_predict is -1


def infill_prompt(engine: AsyncEngine, req: InfillRequest, reserve: int) -> tuple[list[int], bool]:
    tok = engine.tokenizer
    fixed = len(fim_layout(tok, [], [], [], param="input_prefix"))  # 400 without FIM tokens
    extra = extra_context_ids(tok, [(c.filename, c.text) for c in req.input_extra])
    prefix = text_ids(tok, req.input_prefix + req.prompt)
    suffix = text_ids(tok, req.input_suffix)
    budget = engine.max_model_len - reserve - fixed
    prefix, suffix, extra, trimmed = fit_fim(prefix, suffix, extra, budget)
    return fim_layout(tok, prefix, suffix, extra, param="input_prefix"), trimmed


def _params(req: InfillRequest, max_tokens: int) -> SamplingParams:
    return SamplingParams(
        max_tokens=max_tokens,
        temperature=req.temperature,
        top_p=req.top_p,
        top_k=max(req.top_k, 0),
        min_p=req.min_p,
        repetition_penalty=req.repeat_penalty,
        presence_penalty=req.presence_penalty,
        frequency_penalty=req.frequency_penalty,
        seed=None if req.seed < 0 else req.seed,
        stop=list(req.stop),
    )


@router.post("/infill", response_model=None)
async def infill(req: InfillRequest, request: Request, ctx: Ctx, engine: Engine) -> Response:
    check_model(ctx.settings, req.model)
    wanted = req.max_tokens or (req.n_predict if req.n_predict > 0 else None)
    reserve = min(wanted or DEFAULT_RESERVE, engine.max_model_len // 2)
    ids, truncated = infill_prompt(engine, req, reserve)
    job = Job(0, ids, _params(req, max_tokens_for(len(ids), wanted, engine.max_model_len)))
    events = merged_events(engine, [job], True, ctx.metrics, "infill", new_id("infill"))
    model = ctx.settings.model_name
    if req.stream:
        return EventStreamResponse(_stream(await primed(events), engine, model, truncated))
    (result,) = await collect(events, 1, request)
    body = {"content": result.text, "tokens": result.token_ids, "stop": True, "index": 0}
    return JSONResponse({**body, **_summary(engine, model, result, truncated)})


def _summary(engine: AsyncEngine, model: str, r: ChoiceResult, truncated: bool) -> dict[str, Any]:
    """The closing fields llama.cpp sends: why it stopped, token counts and timings."""
    usage, stats = r.usage, r.stats or {}
    prompt_n = usage.prompt_tokens if usage else 0
    cached = usage.cached_tokens if usage else 0
    predicted = usage.completion_tokens if usage else 0
    eos = bool(r.token_ids) and r.token_ids[-1] in engine.tokenizer.stop_ids
    stop_type = "limit" if r.finish_reason == "length" else ("eos" if eos else "word")
    ttft, tpot = stats.get("ttft") or 0.0, stats.get("tpot") or 0.0
    gen_ms = tpot * max(predicted - 1, 0) * 1000
    return {
        "model": model,
        "stop_type": stop_type,
        "truncated": truncated,
        "tokens_predicted": predicted,
        "tokens_evaluated": prompt_n,
        "tokens_cached": cached,
        "timings": {
            "prompt_n": prompt_n - cached,
            "prompt_ms": ttft * 1000,
            "predicted_n": predicted,
            "predicted_ms": gen_ms,
            "predicted_per_second": (predicted - 1) / (gen_ms / 1000) if gen_ms > 0 else 0.0,
        },
    }


async def _stream(
    events: AsyncIterator[tuple[int, TokenEvent]], engine: AsyncEngine, model: str, truncated: bool
) -> AsyncIterator[bytes]:
    """llama.cpp's native stream: `data: {"content", "stop": false}` ..., then a final
    `stop: true` event with the summary (no [DONE] line on this endpoint)."""
    r = ChoiceResult()
    try:
        async for _, ev in events:
            check_event(ev)
            r.token_ids += ev.token_ids
            if ev.finished:
                r.finish_reason, r.usage, r.stats = ev.finish_reason, ev.usage, ev.stats
                last = {"content": ev.text, "tokens": ev.token_ids, "stop": True, "index": 0}
                yield sse_data({**last, **_summary(engine, model, r, truncated)})
            elif ev.text:
                yield sse_data(
                    {"content": ev.text, "tokens": ev.token_ids, "stop": False, "index": 0}
                )
    except Exception as e:  # noqa: BLE001 - the status line is sent: report in-band
        yield sse_data(error_body(e))
