"""Batch-1 decode with and without programmatic dependent launch, in one process (GPU).

For each `LOCALLLM_PDL` mode (0 off, 1 on: `kernels/pdl.py`) an engine is built (its CUDA
graphs captured under that mode), a greedy sequence decodes --tokens tokens, and it reports:
engine steps per second after a warm-up, the batch-1 decode graph replayed back to back, and
whether the tokens equal those of the first mode. One JSON line per mode (--json appends
them), then a summary with each mode's speed relative to the first and as a % of the
bandwidth ceiling (--copy-gbs, the GPU's measured copy bandwidth: 4,200 for the H200, ~3,000
for an H100, / the weight bytes per token).

Usage: python3 scripts/probe_pdl.py --model llama3-8b-q4_k_m --modes 0,1 [--tokens 160]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time

import torch
from probe_step import decode_graph_replay_s  # scripts/ (this script's folder)

from localllm.bench.models import resolve_model
from localllm.cli.args import add_engine_args, engine_config
from localllm.core import SamplingParams
from localllm.engine.engine import LLMEngine


def measure(a: argparse.Namespace, mode: str) -> dict:
    os.environ["LOCALLLM_PDL"] = mode
    t0 = time.perf_counter()
    engine = LLMEngine(engine_config(a, max_model_len=a.tokens + 512, max_num_seqs=1,
                                     max_num_batched_tokens=128, spec_tokens=0))  # fmt: skip
    start_s = time.perf_counter() - t0
    bos = engine.tokenizer.bos_id or 1
    params = SamplingParams(max_tokens=a.tokens, temperature=0.0, ignore_eos=True)
    rid = engine.add_request([bos] + list(range(100, 132)), params)
    tokens: list[int] = []
    times: list[float] = []
    while engine.has_work():
        for ev in engine.step():
            if ev.request_id == rid:
                tokens.extend(ev.token_ids)
        torch.cuda.synchronize()
        times.append(time.perf_counter())
    steps = times[a.warmup :]
    step_s = (steps[-1] - steps[0]) / (len(steps) - 1)
    replay_s = decode_graph_replay_s(engine, 1, a.replays, warmup=10)
    weight_bytes = engine.runner.weight_bytes
    engine.close()
    del engine
    gc.collect()
    torch.cuda.empty_cache()
    return {"mode": mode, "model": os.path.basename(a.model), "engine_start_s": round(start_s, 1),
            "step_us": round(1e6 * step_s, 1), "tok_s": round(1 / step_s, 1),
            "replay_us": round(1e6 * replay_s, 1), "weight_bytes": weight_bytes,
            "tokens": tokens, "gpu": torch.cuda.get_device_name()}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    add_engine_args(ap, model_required=False)
    ap.add_argument("--modes", default="0,1")
    ap.add_argument("--tokens", type=int, default=160)
    ap.add_argument("--warmup", type=int, default=32, help="engine steps before timing")
    ap.add_argument("--replays", type=int, default=200)
    ap.add_argument("--copy-gbs", type=float, default=4200.0, help="measured copy bandwidth")
    ap.add_argument("--json", help="append one JSON line per mode")
    a = ap.parse_args()
    a.model = resolve_model(a.model or "llama3-8b-q4_k_m")
    rows = []
    for mode in a.modes.split(","):
        r = measure(a, mode)
        rows.append(r)
        if a.json:
            with open(a.json, "a") as fh:
                fh.write(json.dumps(r) + "\n")
    base = rows[0]
    ceiling = a.copy_gbs * 1e9 / base["weight_bytes"] if base["weight_bytes"] else 0.0
    print(f"{base['model']} on {base['gpu']}, batch-1 greedy decode, {a.tokens} tokens")
    for r in rows:
        same = r["tokens"] == base["tokens"]
        pct = f", {100 * r['tok_s'] / ceiling:.1f}% of the ceiling" if ceiling else ""
        print(f"  LOCALLLM_PDL={r['mode']}: step {r['step_us']} us = {r['tok_s']} tok/s "
              f"({r['tok_s'] / base['tok_s']:.3f}x{pct}); graph replay {r['replay_us']} us "
              f"({base['replay_us'] / r['replay_us']:.3f}x); tokens equal mode "
              f"{base['mode']}: {same}; engine start {r['engine_start_s']} s")  # fmt: skip


if __name__ == "__main__":
    main()
