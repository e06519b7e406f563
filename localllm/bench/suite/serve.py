"""serve: many streams through the AsyncEngine the HTTP server uses. Fixed concurrency (all
streams start together, as llama-batched-bench runs them) and Poisson arrivals at several
rates: throughput, time to first token and inter-token latency percentiles, goodput."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from typing import Any

from localllm.bench.sizes import AUTO_RATE_FRACTIONS
from localllm.bench.stats import meets_slo, percentiles_ms
from localllm.bench.suite.base import Context
from localllm.bench.timing import Prompts, Trace, greedy, stream

WARMUP_GEN = 4  # tokens of the untimed run before each concurrency (compiles its shapes)


async def _gather(
    aeng: Any, prompts: list[list[int]], gen: int, starts: list[float]
) -> list[Trace]:
    params = greedy(gen)
    return list(
        await asyncio.gather(*(stream(aeng, p, params, s) for p, s in zip(prompts, starts)))
    )


def summarize(ctx: Context, traces: list[Trace]) -> dict:
    """Throughput, latency percentiles and goodput of one run's requests."""
    s = ctx.sizes
    t0 = min(t.submitted for t in traces)
    end = max(t.arrivals[-1] for t in traces)
    generated = sum(t.tokens for t in traces)
    last_first = max(t.arrivals[0] for t in traces)
    after_first = sum(n for t in traces for a, n in zip(t.arrivals, t.counts) if a > last_first)
    good = sum(meets_slo(t.ttft, t.mean_itl, s.slo_ttft_ms, s.slo_itl_ms) for t in traces)
    duration = end - t0
    return {
        "requests": len(traces),
        "prompt": s.serve_prompt,
        "gen": s.serve_gen,
        "generated_tokens": generated,
        "duration_s": duration,
        "throughput_tok_s": generated / duration,
        # tokens produced once every stream had its first token / that time: the decode rate
        # of the full batch (llama-batched-bench's S_TG); None if the phase is empty
        "decode_tok_s": after_first / (end - last_first) if end > last_first else None,
        "request_rate": len(traces) / duration,
        "ttft_ms": percentiles_ms([t.ttft for t in traces]),
        "itl_ms": percentiles_ms([g for t in traces for g in t.gaps]),
        "slo": {"ttft_ms": s.slo_ttft_ms, "itl_ms": s.slo_itl_ms},
        "slo_met": good,
        "goodput_req_s": good / duration,
        "finish_reasons": sorted({t.finish_reason or "" for t in traces}),
    }


def _fixed(ctx: Context, aeng: Any, prompts: Prompts, c: int) -> dict:
    s = ctx.sizes
    warm = [prompts.make(s.serve_prompt) for _ in range(c)]
    asyncio.run(_gather(aeng, warm, WARMUP_GEN, [0.0] * c))
    timed = [prompts.make(s.serve_prompt) for _ in range(c)]
    traces = asyncio.run(_gather(aeng, timed, s.serve_gen, [0.0] * c))
    return {"mode": "concurrency", "concurrency": c, **summarize(ctx, traces)}


def _poisson(ctx: Context, aeng: Any, prompts: Prompts, rate: float, seed: int) -> dict:
    s = ctx.sizes
    rng = random.Random(seed)
    offsets = itertools.accumulate(rng.expovariate(rate) for _ in range(s.requests - 1))
    batch = [prompts.make(s.serve_prompt) for _ in range(s.requests)]
    t0 = time.perf_counter() + 0.01  # the first request now, the others after exponential gaps
    starts = [t0, *(t0 + x for x in offsets)]
    traces = asyncio.run(_gather(aeng, batch, s.serve_gen, starts))
    return {"mode": "poisson", "rate": rate, **summarize(ctx, traces)}


def poisson_rates(ctx: Context, fixed: list[dict]) -> list[float]:
    """--rate, else fractions of the request rate the widest fixed concurrency sustained;
    none with --requests 0."""
    if not ctx.sizes.requests:
        return []
    if ctx.sizes.rates:
        return list(ctx.sizes.rates)
    top = max(fixed, key=lambda r: r["concurrency"])["request_rate"]
    return [round(f * top, 3) for f in AUTO_RATE_FRACTIONS]


def run_serve(ctx: Context) -> list[dict]:
    from localllm.engine.async_engine import AsyncEngine

    eng = ctx.engines.main()
    prompts = Prompts(eng, seed=1000)
    aeng = AsyncEngine(eng)  # the engine's loop thread, as under `localllm serve`
    rows: list[dict] = []
    try:
        for c in ctx.sizes.concurrency:
            rows.append(_fixed(ctx, aeng, prompts, c))
            ctx.progress.advance(f"serve x{c}")
        for i, rate in enumerate(poisson_rates(ctx, rows)):
            rows.append(_poisson(ctx, aeng, prompts, rate, seed=i))
            ctx.progress.advance(f"serve {rate:g} req/s")
    finally:
        aeng.shutdown(close_engine=False)  # the next scenarios step the same engine
    return rows
