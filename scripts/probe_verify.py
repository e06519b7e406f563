"""Where a speculative verify step's time goes, against a plain decode step (batch 1): engine
step wall time, the GPU's busy time (the union of kernel spans, so PDL's overlapping spans
count once), the host's share, and the kernels by time (exact per kernel with LOCALLLM_PDL=0).

Usage: python3 scripts/probe_verify.py [--model llama3-8b-q4_k_m] [--ks 0,4,8] [--steps 50]
Writes probe_verify.json to $OUT (or --out) as well.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
from pathlib import Path

from localllm.bench.models import resolve_model
from localllm.bench.profile import kernel_breakdown
from localllm.cli.args import add_engine_args, engine_config
from localllm.engine.engine import LLMEngine
from localllm.engine.speculative.calibrate import step_seconds


def busy_us(events) -> float:
    """Length of the union of the kernels' [start, end) spans, us."""
    spans = sorted((e.time_range.start, e.time_range.end) for e in events)
    total, end = 0.0, float("-inf")
    for s, e in spans:
        if e > end:
            total += e - max(s, end)
            end = e
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    add_engine_args(ap, model_required=False)
    ap.add_argument("--ks", default="0,4,8", help="drafts per verify step (0: plain decode)")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--context", type=int, default=512, help="prompt tokens before decoding")
    ap.add_argument("--top", type=int, default=14, help="kernels listed per step kind")
    ap.add_argument(
        "--host-profile",
        action="store_true",
        help="also cProfile the host side of each step kind (top functions)",
    )
    ap.add_argument(
        "--trace",
        type=int,
        default=0,
        help="also write a Chrome trace (host and GPU) of this many steps per kind",
    )
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    a = ap.parse_args()
    a.model = resolve_model(a.model or "llama3-8b-q4_k_m")
    ks = [int(k) for k in a.ks.split(",")]
    need = a.context + a.steps * (max(ks) + 1) + 256
    engine = LLMEngine(engine_config(a, max_model_len=need, spec_tokens=max(ks)))
    from torch.profiler import DeviceType, ProfilerActivity, profile

    res = {"model": a.model, "pdl": engine.runner.launches_pdl, "kinds": {}}
    print(f"{a.model}: PDL {'on' if res['pdl'] else 'off'}, {a.steps} steps per figure")
    for k in ks:
        wall_plain = step_seconds(engine, 1, k, a.steps, a.context)
        prof = profile(activities=[ProfilerActivity.CUDA])
        graphs = engine.runner.graphs
        before = dict(graphs.replays) if graphs is not None else {}
        wall_prof = step_seconds(engine, 1, k, a.steps, a.context, around=prof)
        if graphs is not None:
            print(f"k={k}: graph replays " + ", ".join(
                f"{n} {graphs.replays[n] - before[n]}" for n in graphs.replays))  # fmt: skip
        if a.host_profile:
            host = cProfile.Profile()
            step_seconds(engine, 1, k, a.steps, a.context, around=host)
            pstats.Stats(host).sort_stats("tottime").print_stats(18)
        if a.trace:
            tr = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], with_stack=True)
            step_seconds(engine, 1, k, a.trace, a.context, around=tr)
            Path(a.out).mkdir(parents=True, exist_ok=True)
            tr.export_chrome_trace(str(Path(a.out) / f"trace_k{k}.json.gz"))
        busy = busy_us([e for e in prof.events() if e.device_type == DeviceType.CUDA]) / a.steps
        kb = kernel_breakdown(prof, a.steps, wall_prof * a.steps, a.top)
        cats = {
            c: f * 1e6 * wall_prof for c, f in kb["fractions"].items() if not c.startswith("idle")
        }
        r = {"wall_us": 1e6 * wall_plain, "wall_profiled_us": 1e6 * wall_prof, "gpu_busy_us": busy,
             "kernel_sum_us": kb["kernel_us"], "categories_us": cats, "kernels": kb["kernels"]}  # fmt: skip
        res["kinds"][k] = r
        print(f"k={k}: engine step {r['wall_us']:.0f} us (profiled {r['wall_profiled_us']:.0f}); "
              f"GPU busy {busy:.0f} us, host-only {r['wall_profiled_us'] - busy:.0f} us; "
              f"kernel spans {r['kernel_sum_us']:.0f} us")  # fmt: skip
        for cat, us in cats.items():
            print(f"    {us:8.1f} us  {cat}")
        for name, us, calls in r["kernels"]:
            print(f"      {us:8.1f} us {calls:5.1f} calls  {name}")
    base = res["kinds"].get(0)
    if base:
        for k, r in res["kinds"].items():
            if k:
                print(f"k={k} / plain: wall {r['wall_us'] / base['wall_us']:.3f}x, GPU busy "
                      f"{r['gpu_busy_us'] / base['gpu_busy_us']:.3f}x")  # fmt: skip
    out = Path(a.out) / "probe_verify.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
