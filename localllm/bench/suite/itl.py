"""itl: how smoothly running streams keep decoding while a long prompt prefills (the gap
between their tokens, p99, unloaded vs while the prompt is in flight)."""

from __future__ import annotations

import time
from typing import Any

from localllm.bench.stats import percentile
from localllm.bench.suite.base import Context
from localllm.bench.timing import Prompts, greedy

WARMUP_STEPS = 20


def _gaps(engine: Any, ids: set[str], steps: int) -> list[float]:
    """Seconds between steps that gave the streams tokens."""
    gaps, last = [], time.perf_counter()
    for _ in range(steps):
        events = engine.step()
        now = time.perf_counter()
        if any(ev.request_id in ids and ev.token_ids for ev in events):
            gaps.append(now - last)
            last = now
    return gaps


def itl_context(s: Any) -> int:
    """Streams decode through the warm-up, the unloaded steps and, at worst, one step per token
    of the long prompt."""
    return max(s.itl_prompt + 1, s.serve_prompt + WARMUP_STEPS + s.itl_steps + s.itl_prompt + 8)


def _one_run(eng: Any, s: Any, prompts: Prompts) -> tuple[list[float], list[float]]:
    """One run: gaps of `itl_streams` fresh streams unloaded, then while a fresh long prompt
    prefills (seconds)."""
    params = greedy(eng.max_model_len - s.serve_prompt)
    ids = {eng.add_request(prompts.make(s.serve_prompt), params) for _ in range(s.itl_streams)}
    try:
        _gaps(eng, ids, WARMUP_STEPS)
        unloaded = _gaps(eng, ids, s.itl_steps)
        long_id = eng.add_request(prompts.make(s.itl_prompt), greedy(1))
        loaded: list[float] = []
        while long_id in eng.requests:
            loaded += _gaps(eng, ids, 1)
    finally:
        for rid in ids:
            eng.abort(rid)
    return unloaded, loaded


def run_itl(ctx: Context) -> list[dict]:
    """`reps` runs; the reported p99s and ratio are the median run's (by ratio), the p50s show
    whether a ratio comes from every loaded step or from a few slow ones."""
    eng = ctx.engines.main()
    s, prompts = ctx.sizes, Prompts(eng, seed=11)
    runs = []
    for _ in range(s.reps):
        unloaded, loaded = _one_run(eng, s, prompts)
        p_un, p_lo = percentile(unloaded, 99), percentile(loaded, 99)
        runs.append({
            "unloaded_p99_ms": 1000 * p_un,
            "loaded_p99_ms": 1000 * p_lo,
            "ratio": p_lo / p_un,
            "unloaded_p50_ms": 1000 * percentile(unloaded, 50),
            "loaded_p50_ms": 1000 * percentile(loaded, 50),
            "loaded_max_ms": 1000 * max(loaded, default=0.0),
            "unloaded_steps": len(unloaded),
            "loaded_steps": len(loaded),
        })  # fmt: skip
        ctx.progress.advance("itl")
    median = sorted(runs, key=lambda r: r["ratio"])[(len(runs) - 1) // 2]
    return [
        {
            "streams": s.itl_streams,
            "long_prompt": s.itl_prompt,
            "reps": s.reps,
            **median,
            "ratio_samples": [r["ratio"] for r in runs],
            "runs": runs,
        }
    ]
