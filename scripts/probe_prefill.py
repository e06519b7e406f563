"""Where a 512-token prefill goes (issue 16: pp512): the wall time of each of a few prefills of
fresh prompts, then their kernels by category and the top ones (torch profiler,
`bench.profile.kernel_breakdown`, as `localllm bench --profile` for decode steps).
With --cached N: the turn after a cached N-token prefix instead (bench's prefix scenario: N =
3900, --tokens 100): each run's prefix is sent once with another suffix first (untimed), then
prefix + a new suffix is timed and profiled, so the timed turns prefill only what the prefix
cache does not hold.

With --trace FILE: one more turn under the profiler with CPU activity too, written as a Chrome
trace (where the host spends a turn's wall time around its kernels), and that turn's host
functions by cumulative time (cProfile, a separate turn) printed.

Usage: python3 scripts/probe_prefill.py [--model llama3-8b-q4_k_m] [--tokens 512] [--runs 5]
           [--cached N] [--block-size B] [--trace FILE]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import time

import torch
from torch.profiler import ProfilerActivity, profile

from localllm.bench.models import resolve_model
from localllm.bench.profile import format_profile, kernel_breakdown
from localllm.cli.args import add_engine_args, engine_config
from localllm.core import SamplingParams
from localllm.engine.engine import LLMEngine


def prefill(engine: LLMEngine, prompt: list[int]) -> float:
    """Seconds of the engine steps that prefill `prompt` (max_tokens 1)."""
    engine.add_request(prompt, SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True))
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    while engine.has_work():
        engine.step()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def prompts(
    engine: LLMEngine, rng: random.Random, n: int, tokens: int, cached: int
) -> list[list[int]]:
    """`n` fresh prompts of `tokens` tokens, each after a `cached`-token prefix that the prefix
    cache then holds (sent once with another suffix, untimed)."""

    def fresh(k: int) -> list[int]:
        return [rng.randrange(100, min(30000, engine.model_cfg.vocab_size)) for _ in range(k)]

    out = []
    for _ in range(n):
        prefix = fresh(cached)
        if cached:
            prefill(engine, prefix + fresh(tokens))
        out.append(prefix + fresh(tokens))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    add_engine_args(ap, model_required=False)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument(
        "--cached", type=int, default=0, help="tokens of a cached prefix before each prompt"
    )
    ap.add_argument("--trace", help="write one turn's CPU + CUDA Chrome trace here")
    a = ap.parse_args()
    a.model = resolve_model(a.model or "llama3-8b-q4_k_m")
    ctx = max(4096, a.cached + a.tokens + 16)
    engine = LLMEngine(engine_config(a, max_model_len=ctx, enable_prefix_caching=a.cached > 0))
    rng = random.Random(0)
    for p in prompts(engine, rng, 2, a.tokens, a.cached):
        prefill(engine, p)
    walls = [prefill(engine, p) for p in prompts(engine, rng, a.runs, a.tokens, a.cached)]
    what = f"{a.tokens}-token prefill" + (f" after {a.cached} cached tokens" if a.cached else "")
    print(what, "wall ms:", " ".join(f"{1e3 * w:.2f}" for w in walls),
          "| tok/s:", " ".join(f"{a.tokens / w:.0f}" for w in walls))  # fmt: skip
    timed = prompts(engine, rng, a.runs, a.tokens, a.cached)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        wall = sum(prefill(engine, p) for p in timed)
    p = kernel_breakdown(prof, a.runs, wall)
    print(format_profile(p, f"{what} (profiler on)"))
    if a.trace:
        trace(engine, prompts(engine, rng, 2, a.tokens, a.cached), a.trace)


def trace(engine: LLMEngine, turns: list[list[int]], path: str) -> None:
    """The first turn as a CPU + CUDA Chrome trace at `path`, the second under cProfile."""
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        wall = prefill(engine, turns[0])
    prof.export_chrome_trace(path)
    print(f"traced turn: {1e3 * wall:.2f} ms wall -> {path}")
    host = cProfile.Profile()
    host.enable()
    wall = prefill(engine, turns[1])
    host.disable()
    print(f"cProfiled turn: {1e3 * wall:.2f} ms wall")
    pstats.Stats(host).sort_stats("cumulative").print_stats(45)


if __name__ == "__main__":
    main()
