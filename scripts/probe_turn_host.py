"""The host work of the turn after a cached prefix (bench's prefix scenario) with the device
stubbed out: no GPU needed. A small synthetic model (llama3's vocabulary size, an 8K context,
16-token blocks) runs on the CPU; each timed turn sends a fresh prefix once (real forward), then
prefix + a new suffix with `runner.execute` replaced by what a prefill-graph replay does on the
host (the graph input staging and its copy) and a fixed argmax. Prints the median and fastest
time of each host phase over --turns turns, and of the whole turn (add_request to the final
event), the part of a turn's time to first token that is not the device's.

Usage: python3 scripts/probe_turn_host.py [--cached 3900] [--tokens 100] [--turns 12]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from probe_verify_path import TOTALS, timed  # scripts/: wraps a method to time it by phase

from localllm.config import EngineConfig
from localllm.core import SamplingParams
from localllm.engine.engine import LLMEngine
from localllm.engine.graph_layout import GraphKey, StepBuffers
from localllm.engine.runner import StepOutput
from localllm.formats.synthetic import Q, SyntheticSpec, UniformRule, write_synthetic

SPEC = SyntheticSpec("turn-host", vocab=128256, dim=256, n_layers=2, n_heads=4, n_kv_heads=2,
                     ffn=512, tensor_type=UniformRule(Q.Q4_0, output=Q.Q6_K),
                     context_length=8192)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cached", type=int, default=3900)
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--turns", type=int, default=12)
    a = ap.parse_args()
    path = Path(tempfile.mkdtemp()) / "turn-host.gguf"
    write_synthetic(SPEC, path)
    eng = LLMEngine(EngineConfig(model=str(path), device="cpu", block_size=16, spec_tokens=0))
    r = eng.runner
    key = GraphKey(0, 1 << max(a.tokens - 1, 1).bit_length())  # the prefill graph it pads to
    buf = StepBuffers.allocate(key.tokens, 2, r.max_blocks_per_seq, r.device)
    logits = torch.zeros(1, eng.model_cfg.vocab_size)
    argmax = torch.zeros(1, dtype=torch.int64)
    real, stub = r.execute, [False]

    def execute(batch: Any, greedy: bool = False, ids_from: Any = None) -> StepOutput:
        if not stub[0]:
            return real(batch, greedy, ids_from)
        n, rows = buf.stage(key, [], batch.items[0], r.block_size)
        buf.dev[:n].copy_(buf.host[:n])
        return StepOutput(logits, rows, argmax)

    r.execute = execute  # type: ignore[method-assign]
    phases = (
        (eng, "add_request", "add_request"),
        (eng.scheduler, "schedule", "schedule"),
        (eng.block_manager, "get_computed_prefix", "  prefix lookup"),
        (eng.block_manager, "allocate", "  allocate"),
        (r, "execute", "graph staging + copy"),
        (eng, "_settle", "settle (sampling, update)"),
        (eng, "_postprocess", "postprocess (detokenize, finish)"),
    )
    for obj, name, label in phases:
        timed(obj, name, label)
    rng = random.Random(0)
    fresh = lambda k: [rng.randrange(100, 30000) for _ in range(k)]  # noqa: E731
    params = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True)

    def turn(prompt: list[int]) -> float:
        t = time.perf_counter()
        eng.add_request(prompt, params)
        while eng.has_work():
            eng.step()
        return time.perf_counter() - t

    acc: dict[str, list[float]] = {label: [] for *_, label in [*phases, (0, 0, "whole turn")]}
    for _ in range(a.turns + 2):
        prefix = fresh(a.cached)
        stub[0] = False
        turn(prefix + fresh(a.tokens))  # caches the prefix
        stub[0] = True
        TOTALS.clear()
        TOTALS["whole turn"] = turn(prefix + fresh(a.tokens))
        for k in acc:
            acc[k].append(1e6 * TOTALS[k])
    print(f"host work of a {a.cached} cached + {a.tokens} token turn, device stubbed, "
          f"{a.turns} turns (us):")  # fmt: skip
    for k, v in acc.items():
        v = v[2:]  # the first two turns warm up
        print(f"  {k:34s} median {statistics.median(v):7.0f}   fastest {min(v):7.0f}")


if __name__ == "__main__":
    main()
