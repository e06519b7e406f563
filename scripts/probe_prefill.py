"""Where a 512-token prefill goes (issue 16: pp512): GPU time per kernel over a few
prefills of fresh prompts (torch profiler), and the wall time of each prefill step.

Usage: python3 scripts/probe_prefill.py [--model llama3-8b-q4_k_m] [--tokens 512] [--runs 5]
"""

from __future__ import annotations

import argparse
import random
import time
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from localllm.bench.models import resolve_model
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
        for _ in range(a.runs):
            prefill(engine, a.tokens, rng)
    per: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for ev in prof.events():
        if ev.device_type.name == "CUDA":
            p = per[ev.name[:90]]
            p[0] += ev.device_time_total / a.runs
            p[1] += 1 / a.runs
    total = sum(v[0] for v in per.values())
    print(f"GPU kernels per prefill: {total / 1e3:.2f} ms")
    for name, (us, calls) in sorted(per.items(), key=lambda kv: -kv[1][0])[:16]:
        print(f"  {us / 1e3:7.2f} ms {100 * us / total:5.1f}%  {calls:5.0f} calls  {name}")


if __name__ == "__main__":
    main()
