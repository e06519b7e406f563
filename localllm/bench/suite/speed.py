"""pp and tg, as llama-bench measures them: prefill of one prompt (pp), and batch-1 decode of
n tokens after `depth` tokens are already in the KV cache (tg, llama-bench -d)."""

from __future__ import annotations

from typing import Any

from localllm.bench.stats import spread
from localllm.bench.suite.base import Context
from localllm.bench.timing import Prompts, greedy, run_sync

WARMUP_GEN = 4  # tokens decoded by the untimed run before each tg depth


def run_pp(ctx: Context) -> list[dict]:
    eng = ctx.engines.main()
    prompts = Prompts(eng, seed=0)
    rows = []
    for n in ctx.sizes.pp:
        run_sync(eng, [prompts.make(n)], greedy(1))  # warm-up: compiles this prompt's shapes
        rates, counted = [], []
        for _ in range(ctx.sizes.reps):
            (t,) = run_sync(eng, [prompts.make(n)], greedy(1))
            rates.append(n / t.ttft)
            assert t.usage is not None
            counted.append(t.usage.prompt_tokens - t.usage.cached_tokens)
        s = spread(rates)
        rows.append(
            {
                "n_prompt": n,
                "reps": ctx.sizes.reps,
                "tok_s": s["mean"],
                "stdev_tok_s": s["stdev"],
                "samples_tok_s": s["samples"],
                "prompt_tokens": counted,  # prefilled per repetition (no cache hits)
            }
        )
        ctx.progress.advance(f"pp{n}")
    return rows


def decode_at_depth(ctx: Context, eng: Any, depth: int, seed: int) -> dict:
    """tg of ctx.sizes.tg tokens after `depth` cached tokens, ctx.sizes.reps times."""
    n, prompts = ctx.sizes.tg, Prompts(eng, seed=seed)
    prompt_len = max(1, depth)  # depth 0: the BOS token alone
    run_sync(eng, [prompts.make(prompt_len)], greedy(WARMUP_GEN + 1))
    rates, counted = [], []
    for _ in range(ctx.sizes.reps):
        (t,) = run_sync(eng, [prompts.make(prompt_len)], greedy(n + 1))
        rates.append(t.decode_rate)  # the n tokens after the first (which ends the prefill)
        counted.append(t.tokens - t.counts[0])
    s = spread(rates)
    ceiling, per_token = ctx.ceiling(eng, depth)
    return {
        "n_gen": n,
        "depth": depth,
        "kv_dtype": eng.runner.kv_dtype,
        "reps": ctx.sizes.reps,
        "tok_s": s["mean"],
        "stdev_tok_s": s["stdev"],
        "samples_tok_s": s["samples"],
        "generated_tokens": counted,  # timed per repetition
        "bytes_per_token": per_token,
        "ceiling_tok_s": ceiling,
        "fraction_of_ceiling": s["mean"] / ceiling if ceiling else None,
    }


def run_tg(ctx: Context) -> list[dict]:
    eng = ctx.engines.main()
    rows = []
    for i, depth in enumerate(ctx.sizes.depths):
        rows.append(decode_at_depth(ctx, eng, depth, seed=100 + i))
        ctx.progress.advance(f"tg{ctx.sizes.tg} @ d{depth}")
    return rows
