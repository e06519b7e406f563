"""prefix: a shared system prompt, first seen (cold) and then reused from the prefix cache
(warm), each followed by a different user message: time to first token of both."""

from __future__ import annotations

from localllm.bench.stats import spread
from localllm.bench.suite.base import Context, Skip
from localllm.bench.timing import Prompts, greedy, run_sync


def run_prefix(ctx: Context) -> list[dict]:
    eng = ctx.engines.main()
    if not eng.cfg.enable_prefix_caching:
        raise Skip("the prefix cache is off (--no-prefix-caching)")
    s, prompts = ctx.sizes, Prompts(eng, seed=7)
    run_sync(eng, [prompts.make(s.prefix_len + s.prefix_suffix)], greedy(1))  # warm-up
    cold, warm, cached = [], [], []
    for _ in range(s.reps):
        system = prompts.make(s.prefix_len)
        user = [prompts.make(s.prefix_suffix + 1)[1:] for _ in range(2)]  # no second BOS
        (c,) = run_sync(eng, [system + user[0]], greedy(1))  # caches the system prompt
        (w,) = run_sync(eng, [system + user[1]], greedy(1))
        cold.append(c.ttft)
        warm.append(w.ttft)
        assert w.usage is not None
        cached.append(w.usage.cached_tokens)
        ctx.progress.advance("prefix")
    c_ms, w_ms = spread([1000 * x for x in cold]), spread([1000 * x for x in warm])
    unit = eng.block_manager.unit  # tokens per prefix-cache key
    return [
        {
            "prefix_tokens": s.prefix_len,
            "suffix_tokens": s.prefix_suffix,
            "reps": s.reps,
            "cold_ttft_ms": c_ms["mean"],
            "warm_ttft_ms": w_ms["mean"],
            "cold_samples_ms": c_ms["samples"],
            "warm_samples_ms": w_ms["samples"],
            "ratio": w_ms["mean"] / c_ms["mean"],
            "cached_tokens": cached,  # per warm request: the whole units of the system prompt
            "cacheable_tokens": s.prefix_len // unit * unit,
        }
    ]
