"""Where the multi-row dp4a GEMV (`kernels/linear/dp4a_triton.py`, several activation rows
per weight-tile read) beats the tensor-core fused dequant-GEMM (`qmm_triton`): both kernels on
the 7-8B decode shapes at T = 1..16 rows, weights read from memory (copies cycled past the L2),
CUDA-graph timing. Sets `plan.DP4A_MAX_T` and the row-block configs.

Prints per shape and T: dp4a us (heuristic config, and the best of a few), qmm us, and dp4a
time relative to one row; every timing goes to $OUT/sweep_dp4a_rows.jsonl.
Usage: python3 scripts/sweep_dp4a_rows.py [--rows 1,2,3,4,5,6,8,9,12,16] [--budget 300]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from functools import partial

import torch
from triton.testing import do_bench_cudagraph

sys.path.insert(0, os.path.dirname(__file__))
from bench_qlinear import PEAK_BW, cold_planes  # noqa: E402
from sweep_dp4a import SHAPES  # noqa: E402

from localllm.kernels.device import device_props  # noqa: E402
from localllm.kernels.fused.quant_act_triton import quant_act_triton  # noqa: E402
from localllm.kernels.linear import dp4a_triton as dp  # noqa: E402
from localllm.kernels.linear.qmm_triton import mm_config, qmm_launch  # noqa: E402
from localllm.kernels.quant import kernel_facts  # noqa: E402


def bench(fn) -> float:
    """us per call, replayed from a CUDA graph as the engine runs it."""
    return do_bench_cudagraph(fn, rep=20) * 1e3


def _dp4a_all(xq, xs, sets, fmt, n, cfg):
    return [dp.dp4a_launch(xq, xs, ps, fmt, n, None, cfg, torch.float16) for ps in sets]


def _qmm_all(x, sets, fmt, n, cfg):
    return [qmm_launch(x, ps, fmt, n, None, cfg) for ps in sets]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="1,2,3,4,5,6,8,9,12,16")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds before stopping")
    ap.add_argument("--shapes", default="", help="indices into sweep_dp4a.SHAPES (default all)")
    ap.add_argument("--alts", action="store_true", help="also try a few other dp4a configs")
    a = ap.parse_args()
    log = open(os.path.join(os.environ.get("OUT", "."), "sweep_dp4a_rows.jsonl"), "w")
    props = device_props(torch.device("cuda"))
    sms, smem = props.sm_count, props.smem_per_block
    start = time.time()
    pick = [int(i) for i in a.shapes.split(",")] if a.shapes else range(len(SHAPES))
    for fmt, n, k in [SHAPES[i] for i in pick]:
        if time.time() - start > a.budget:
            print("budget spent")
            break
        w, sets = cold_planes(fmt, n, k)
        copies = len(sets)
        layout = kernel_facts(fmt).act_layout
        base = None
        line = []
        for t in [int(r) for r in a.rows.split(",")]:
            x = torch.randn(t, k, device="cuda").half()
            xq, xs = quant_act_triton(x, layout)
            heur = dp.dp4a_config(fmt, n, k, sms, t)  # what the dispatch runs at t rows
            cfgs = [heur]
            if a.alts and t > 1:
                rbs = sorted({0, -(-t // 2)} if t > 2 else {0})
                cfgs += [c for c in (dp.Dp4aConfig(bn, gpt, warps, 1, rb)
                                     for bn, gpt, warps, rb in itertools.product(
                                         (2, 4, 8, 16), (1, 2), (1, 2, 4, 8), rbs)
                                     if bn * gpt <= 16) if c != heur]  # fmt: skip
            times = {}
            for cfg in cfgs:
                try:
                    times[cfg] = bench(partial(_dp4a_all, xq, xs, sets, fmt, n, cfg)) / copies
                except Exception as e:  # noqa: BLE001 - a config that does not compile
                    print(f"  {cfg}: {type(e).__name__}: {str(e)[:160]}")
            mm = None
            if t > 1:
                mcfg = mm_config(fmt, n, k, t, sms, smem, props.arch)
                mm = bench(partial(_qmm_all, x, sets, fmt, n, mcfg)) / copies
            h = times[heur]
            base = base or h
            best = min(times.items(), key=lambda kv: kv[1])
            log.write(json.dumps({"fmt": fmt, "n": n, "k": k, "t": t, "dp4a_us": h,
                                  "best_us": best[1], "best_cfg": best[0].__dict__,
                                  "qmm_us": mm}) + "\n")  # fmt: skip
            mm_s = f"{mm:6.1f}" if mm else "     -"
            b = best[0]
            line.append(f"T{t}: {h:6.1f} ({h / base:4.2f}x, best {best[1]:6.1f} = "
                        f"{best[1] / base:4.2f}x bn{b.bn} gpt{b.gpt} w{b.warps} rb{b.rb}) "
                        f"qmm {mm_s}")  # fmt: skip
        log.flush()
        pct = 100 * w.nbytes / (base * 1e-6) / PEAK_BW
        print(f"{fmt} {n}x{k} (T1 {pct:4.1f}% of {PEAK_BW / 1e12:.1f} TB/s):", flush=True)
        for s in line:
            print("   ", s, flush=True)


if __name__ == "__main__":
    main()
