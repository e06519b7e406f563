"""Host cost of launching each captured CUDA graph: for every graph the engine captured, the
wall time of `CUDAGraph.replay()` on the host and the graph's device time from an event
recorded before the launch, medians of --reps replays. Run it under LOCALLLM_PDL=0 and =1 to see
what programmatic dependent launch costs at launch.

Measured (H200, torch 2.11, benchmarks/session40 call 2): 7-19 us a launch for every graph up
to 256 rows, 50-190 us for the 512-2048-row prefill graphs. Under the torch profiler (CPU +
CUDA activities) the 128-row prefill graph's `cudaGraphLaunch` took 486 us instead of ~10: the
profiler's own cost, not the engine's (a graph split into parts to hide it gained nothing).

Usage: python3 scripts/probe_graph_launch.py [--model llama3-8b-q4_k_m] [--reps 20]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from localllm.bench.models import resolve_model
from localllm.cli.args import add_engine_args, engine_config
from localllm.engine.engine import LLMEngine


def main() -> None:
    ap = argparse.ArgumentParser()
    add_engine_args(ap, model_required=False)
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    a.model = resolve_model(a.model or "llama3-8b-q4_k_m")
    engine = LLMEngine(engine_config(a, max_model_len=4096))
    graphs = engine.runner.graphs
    assert graphs is not None and graphs.enabled, "no CUDA graphs captured"
    print(f"PDL in the graphs: {graphs.pdl}")
    print(f"{'graph (decodes, chunk, width)':32s} {'launch us':>10s} {'device us':>10s}")
    for key, g in sorted(graphs.graphs.items(), key=lambda kv: (kv[0].c == 0, -kv[0].tokens)):
        host, dev = [], []
        for _ in range(a.reps):
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            t0 = time.perf_counter()
            g.replay()
            host.append(1e6 * (time.perf_counter() - t0))
            end.record()
            torch.cuda.synchronize()
            dev.append(1e3 * start.elapsed_time(end))
        name = f"({key.b}, {key.c}, {key.w})" + (" long" if key.long else "")
        print(f"{name:32s} {statistics.median(host):10.1f} {statistics.median(dev):10.1f}")


if __name__ == "__main__":
    main()
