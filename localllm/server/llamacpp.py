"""The answer of llama.cpp's native routes (`/infill`, `/completion`) once the prompt ids are
known: `n_predict: 0` (cache the prompt only), the time and indent limits, and llama.cpp's
response shapes (`content`, `stop`, `timings` ...; a stream of `data: {...}` events with no
`[DONE]`). The generation itself is the shared path in `generation.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from localllm.core import SamplingParams, TokenEvent, TokenLogprob, Usage
from localllm.engine.async_engine import AsyncEngine
from localllm.server.context import ServerContext
from localllm.server.errors import error_body
from localllm.server.generation import ChoiceResult, check_event, collect, merged_events, primed
from localllm.server.limits import Limits, PromptTimeout, first_within, limited
from localllm.server.params import Job, make_params, max_tokens_for
from localllm.server.responses import new_id
from localllm.server.schemas_llamacpp import LlamaCppFields
from localllm.server.sse import EventStreamResponse, sse_data
from localllm.server.structured import compiled, format_constraint
from localllm.structured.spec import ConstraintSpec

RANDOM_SEEDS = (-1, 2**32 - 1)  # llama.cpp's "pick a random seed" values


def llamacpp_params(
    req: LlamaCppFields,
    max_tokens: int,
    logprobs: int | None,
    constraint: ConstraintSpec | None = None,
) -> SamplingParams:
    values = dict(
        max_tokens=max_tokens,
        temperature=req.temperature,
        top_p=req.top_p,
        top_k=max(req.top_k, 0),
        min_p=req.min_p,
        repetition_penalty=req.repeat_penalty,
        presence_penalty=req.presence_penalty,
        frequency_penalty=req.frequency_penalty,
        seed=None if req.seed in RANDOM_SEEDS else req.seed,
        stop=list(req.stop),
        ignore_eos=req.ignore_eos,
        logprobs=logprobs,
        constraint=constraint,
    )
    values["spec_tokens"], values["spec_min_tokens"] = req.spec_limits()
    return make_params(values, req.samplers)


async def llamacpp_answer(
    request: Request,
    ctx: ServerContext,
    engine: AsyncEngine,
    req: LlamaCppFields,
    ids: list[int],
    endpoint: str,
    *,
    truncated: bool = False,
    n_probs: int = 0,
) -> Response:
    model = ctx.settings.model_name
    if req.n_predict == 0 and req.max_tokens is None:
        return await _cache_only(ctx, engine, req, ids, model, truncated)
    wanted = req.max_tokens or (req.n_predict if req.n_predict > 0 else None)
    max_tokens = max_tokens_for(len(ids), wanted, engine.max_model_len)
    constraint = await compiled(engine, format_constraint(None, req.grammar, req.json_schema))
    params = llamacpp_params(req, max_tokens, n_probs or None, constraint)
    events = merged_events(
        engine, [Job(0, ids, params)], True, ctx.metrics, endpoint, new_id(endpoint)
    )
    if req.t_max_prompt_ms > 0:
        try:
            events = await first_within(events, req.t_max_prompt_ms)
        except PromptTimeout:
            ctx.warmer.start(engine, ids)  # finish the prompt for the next request
            return _json(
                req,
                _final_body(engine, model, ChoiceResult(finish_reason="length"), ids, truncated),
            )
    limits = Limits(req.n_indent, req.t_max_predict_ms)
    if limits.active:
        events = limited(events, limits, len(ids))
    if req.stream:
        body = _stream(await primed(events), engine, model, ids, truncated, n_probs)
        return EventStreamResponse(body)
    (result,) = await collect(events, 1, request)
    out = _final_body(engine, model, result, ids, truncated)
    out["content"], out["tokens"] = result.text, result.token_ids
    if n_probs:
        out["completion_probabilities"] = probabilities(engine, result.logprobs)
    return _json(req, out)


async def _cache_only(
    ctx: ServerContext,
    engine: AsyncEngine,
    req: LlamaCppFields,
    ids: list[int],
    model: str,
    truncated: bool,
) -> Response:
    """n_predict 0: process the prompt into the prefix cache; answer when it is cached or after
    t_max_prompt_ms, whichever comes first (the caching goes on in the background)."""
    max_tokens_for(len(ids), 1, engine.max_model_len)  # 400 if it cannot fit at all
    task = ctx.warmer.start(engine, ids)
    await asyncio.wait(
        {task}, timeout=req.t_max_prompt_ms / 1000 if req.t_max_prompt_ms > 0 else None
    )
    r = ChoiceResult(finish_reason="length")
    return _json(req, _final_body(engine, model, r, ids, truncated))


def _json(req: LlamaCppFields, body: dict[str, Any]) -> JSONResponse:
    if req.response_fields:
        body = pick_fields(body, req.response_fields)
    return JSONResponse(body)


def pick_fields(body: dict[str, Any], paths: list[str]) -> dict[str, Any]:
    """llama.cpp's `response_fields`: only these (slash-separated) paths, keyed by the path."""
    out: dict[str, Any] = {}
    for path in paths:
        node: Any = body
        for part in path.split("/"):
            if not isinstance(node, dict) or part not in node:
                break
            node = node[part]
        else:
            out[path] = node
    return out


def probabilities(engine: AsyncEngine, lps: list[TokenLogprob]) -> list[dict[str, Any]]:
    """llama.cpp's `completion_probabilities` for n_probs."""
    tok = engine.tokenizer

    def entry(tid: int, text: str, lp: float) -> dict[str, Any]:
        return {"id": tid, "token": text, "bytes": list(tok.token_bytes(tid)), "logprob": lp}

    return [
        {**entry(lp.token_id, lp.token, lp.logprob), "top_logprobs": [entry(*t) for t in lp.top]}
        for lp in lps
    ]


def _final_body(
    engine: AsyncEngine, model: str, r: ChoiceResult, ids: list[int], truncated: bool
) -> dict[str, Any]:
    """The closing fields llama.cpp sends: why it stopped, token counts and timings."""
    usage, stats = r.usage, r.stats or {}
    prompt_n = usage.prompt_tokens if usage else len(ids)
    cached = usage.cached_tokens if usage else 0
    predicted = usage.completion_tokens if usage else len(r.token_ids)
    eos = bool(r.token_ids) and r.token_ids[-1] in engine.tokenizer.stop_ids
    stop_type = "limit" if r.finish_reason == "length" else ("eos" if eos else "word")
    ttft, tpot = stats.get("ttft") or 0.0, stats.get("tpot") or 0.0
    gen_ms = tpot * max(predicted - 1, 0) * 1000
    return {
        "index": 0,
        "content": "",
        "tokens": [],
        "stop": True,
        "model": model,
        "stop_type": stop_type,
        "truncated": truncated,
        "has_new_line": "\n" in r.text,
        "tokens_predicted": predicted,
        "tokens_evaluated": prompt_n,
        "tokens_cached": cached,
        "timings": {
            "prompt_n": prompt_n - cached,
            "prompt_ms": ttft * 1000,
            "predicted_n": predicted,
            "predicted_ms": gen_ms,
            "predicted_per_second": (predicted - 1) / (gen_ms / 1000) if gen_ms > 0 else 0.0,
            **_draft_timings(usage),
        },
    }


def _draft_timings(usage: Usage | None) -> dict[str, int]:
    """llama.cpp's speculative counters, present when the request drafted."""
    if usage is None or not usage.spec_drafted:
        return {}
    return {"draft_n": usage.spec_drafted, "draft_n_accepted": usage.spec_accepted}


async def _stream(
    events: AsyncIterator[tuple[int, TokenEvent]],
    engine: AsyncEngine,
    model: str,
    ids: list[int],
    truncated: bool,
    n_probs: int,
) -> AsyncIterator[bytes]:
    """`data: {"content", "stop": false}` per piece, then a `stop: true` event with the summary
    (llama.cpp sends no [DONE] line on these routes)."""
    r = ChoiceResult()

    def piece(ev: TokenEvent) -> dict[str, Any]:
        out: dict[str, Any] = {"index": 0, "content": ev.text, "tokens": ev.token_ids}
        if n_probs and ev.logprobs:
            out["completion_probabilities"] = probabilities(engine, ev.logprobs)
        return out

    try:
        async for _, ev in events:
            check_event(ev)
            r.token_ids += ev.token_ids
            r.text += ev.text
            if ev.finished:
                r.finish_reason, r.usage, r.stats = ev.finish_reason, ev.usage, ev.stats
                final = _final_body(engine, model, r, ids, truncated)
                yield sse_data({**final, **piece(ev), "stop": True})
            elif ev.text:
                yield sse_data({**piece(ev), "stop": False})
    except Exception as e:  # noqa: BLE001 - the status line is sent: report in-band
        yield sse_data(error_body(e))
