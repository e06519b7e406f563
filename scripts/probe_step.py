"""Where a decode step's wall time goes (batch 1, or --batch B streams): GPU time of the
captured graph alone (replayed back to back) against a full engine step, with step overlap
(engine/overlap.py) off and on, and the host phases of a plain step.

Usage: python3 scripts/probe_step.py [--model llama3-8b-q4_k_m] [--steps 200] [--batch 1]
       [--temperature T]
"""

from __future__ import annotations

import argparse
import time

import torch

from localllm.bench.models import resolve_model
from localllm.cli.args import add_engine_args, engine_config
from localllm.core import SamplingParams
from localllm.engine.engine import LLMEngine
from localllm.engine.graph_layout import GraphKey
from localllm.engine.step_sampling import sample_step


def decode_graph_replay_s(engine: LLMEngine, batch: int, replays: int, warmup: int = 0) -> float:
    """Seconds per replay of the engine's decode CUDA graph for `batch` streams, replayed back
    to back (after `warmup` untimed replays)."""
    graphs = engine.runner.graphs
    assert graphs is not None, "the engine captured no CUDA graphs"
    g = graphs.graphs[GraphKey(graphs._bucket(graphs.buckets, batch), 0)]
    torch.cuda.synchronize()
    for _ in range(warmup):
        g.replay()
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ev0.record()
    for _ in range(replays):
        g.replay()
    ev1.record()
    torch.cuda.synchronize()
    return ev0.elapsed_time(ev1) / 1e3 / replays


def main() -> None:
    ap = argparse.ArgumentParser()
    add_engine_args(ap, model_required=False)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=1, help="decoding streams")
    ap.add_argument("--temperature", type=float, default=0.0, help="sample (top-p 0.95) if > 0")
    a = ap.parse_args()
    a.model = resolve_model(a.model or "llama3-8b-q4_k_m")
    # a plain decode step unless --spec-tokens asks: with speculation on, a synthetic model's
    # repetitive output is accepted in long runs and the requests finished before the phase
    # loop (an empty batch)
    spec = a.spec_tokens if a.spec_tokens is not None else 0
    engine = LLMEngine(engine_config(a, max_model_len=4096 + 256, spec_tokens=spec))
    bos = engine.tokenizer.bos_id or 1
    top_p = 0.95 if a.temperature > 0 else 1.0
    params = SamplingParams(
        max_tokens=a.steps * 4 + 64, temperature=a.temperature, top_p=top_p, ignore_eos=True
    )
    rids = [engine.add_request([bos, 100 + i], params) for i in range(a.batch)]
    for _ in range(20):
        engine.step()
    step_by_overlap = {}
    for overlap in (False, True):  # engine steps with step overlap off, then on
        engine.overlap = overlap
        engine.step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.steps):
            engine.step()
        torch.cuda.synchronize()
        step_by_overlap[overlap] = (time.perf_counter() - t0) / a.steps
    engine.overlap = False  # the phase loop below is a plain step
    engine.step()
    step = step_by_overlap[False]

    replay = decode_graph_replay_s(engine, a.batch, a.steps)

    # host phases of an engine step, synchronizing after the GPU part
    phases = {
        "propose + schedule": 0.0,
        "execute (stage, copy, replay launch)": 0.0,
        "guided + sample (GPU wait + sync)": 0.0,
        "take + update + postprocess": 0.0,
    }
    keys = list(phases)
    for _ in range(a.steps):
        t = [time.perf_counter()]
        decoding = [s for s in engine.scheduler.running if not s.in_prefill]
        engine.speculator.propose(decoding)
        batch = engine.scheduler.schedule()
        if not batch.items:
            raise SystemExit("probe_step: the requests finished before the phase loop")
        t.append(time.perf_counter())
        out = engine.runner.execute(batch)
        t.append(time.perf_counter())
        greedy = engine.guided.apply(None, out.logits, [r for r in out.rows if r[1]], out.greedy)
        taken = sample_step(engine.sampler, batch, out.logits, out.rows, greedy)
        t.append(time.perf_counter())
        engine._take(batch, taken)
        engine.scheduler.update(batch, taken.accepted)
        engine._postprocess(batch, taken.accepted)
        t.append(time.perf_counter())
        for i, k in enumerate(keys):
            phases[k] += (t[i + 1] - t[i]) / a.steps
    for rid in rids:
        engine.abort(rid)
    b = a.batch
    ov = step_by_overlap[True]
    label = f"{b}, temperature {a.temperature}" if a.temperature else str(b)
    print(
        f"batch {label}: engine step {1e6 * step:.1f} us ({b / step:.1f} tok/s); graph replay alone "
        f"{1e6 * replay:.1f} us ({b / replay:.1f} tok/s); host gap {1e6 * (step - replay):.1f} us"
    )
    print(
        f"batch {label}: with step overlap {1e6 * ov:.1f} us ({b / ov:.1f} tok/s), "
        f"{step / ov:.3f}x; host gap {1e6 * (ov - replay):.1f} us"
    )
    for k, v in phases.items():
        print(f"  {k}: {1e6 * v:.1f} us")


if __name__ == "__main__":
    main()
