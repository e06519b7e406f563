"""Where a 512-token prefill goes (issue 16: pp512): the wall time of each of a few prefills of
fresh prompts, then their kernels by category and the top ones (torch profiler,
`bench.profile.kernel_breakdown`, as `localllm bench --profile` for decode steps).

Usage: python3 scripts/probe_prefill.py [--model llama3-8b-q4_k_m] [--tokens 512] [--runs 5]
"""

from __future__ import annotations

import argparse
import random
import time

import torch
from torch.profiler import ProfilerActivity, profile

from localllm.bench.models import resolve_model
from localllm.bench.profile import format_profile, kernel_breakdown
from localllm.cli.args import add_engine_args, engine_config
from localllm.core import SamplingParams
from localllm.engine.engine import LLMEngine


def prefill(engine: LLMEngine, n: int, rng: random.Random) -> float:
    """Seconds of the engine steps that prefill one fresh n-token prompt (max_tokens 1)."""
    prompt = [rng.randrange(100, 30000) for _ in range(n)]
    engine.add_request(prompt, SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True))
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    while engine.has_work():
        engine.step()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    add_engine_args(ap, model_required=False)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    a.model = resolve_model(a.model or "llama3-8b-q4_k_m")
    engine = LLMEngine(engine_config(a, max_model_len=4096, enable_prefix_caching=False))
    rng = random.Random(0)
    for _ in range(2):
        prefill(engine, a.tokens, rng)
    walls = [prefill(engine, a.tokens, rng) for _ in range(a.runs)]
    print("prefill wall ms:", " ".join(f"{1e3 * w:.2f}" for w in walls),
          "| tok/s:", " ".join(f"{a.tokens / w:.0f}" for w in walls))  # fmt: skip
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        wall = sum(prefill(engine, a.tokens, rng) for _ in range(a.runs))
    p = kernel_breakdown(prof, a.runs, wall)
    print(format_profile(p, f"{a.tokens}-token prefill (profiler on)"))


if __name__ == "__main__":
    main()
