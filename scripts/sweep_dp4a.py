"""Sweep the int8-activation dp4a GEMV (`kernels/linear/dp4a_triton.py`) on the 7-8B decode
shapes, next to the packed-fp16 GEMV it replaces, with CUDA-graph timing.

Prints one line per shape: fp16 GEMV us, activation quantization us, dp4a with the heuristic
config and the best swept config (us, % of 4.1 TB/s for the packed weight bytes); every
timing goes to $OUT/sweep_dp4a.jsonl (or ./sweep_dp4a.jsonl).
Usage: python3 scripts/sweep_dp4a.py [--quick] [--budget 240]
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
from bench_qlinear import PEAK_BW, random_weight  # noqa: E402

from localllm.kernels.fused.quant_act_triton import quant_act_triton  # noqa: E402
from localllm.kernels.linear import dp4a_triton as dp  # noqa: E402
from localllm.kernels.linear.qlinear_triton import pick_config, qlinear_launch  # noqa: E402
from localllm.kernels.quant import kernel_facts  # noqa: E402

# (fmt, N, K): llama3-8b-q4_k_m's q+k, v, o, gate+up, down (both formats), lm head; llama2's
SHAPES = [
    ("q4_k", 5120, 4096), ("q6_k", 1024, 4096), ("q4_k", 4096, 4096), ("q4_k", 28672, 4096),
    ("q4_k", 4096, 14336), ("q6_k", 4096, 14336), ("q6_k", 128256, 4096),
    ("q4_0", 12288, 4096), ("q4_0", 4096, 4096), ("q4_0", 22016, 4096), ("q4_0", 4096, 11008),
    ("q8_0", 4096, 4096), ("q5_k", 4096, 4096),
]  # fmt: skip


def bench(fn) -> float:
    """us per call, replayed from a CUDA graph as the engine runs it."""
    return do_bench_cudagraph(fn, rep=20) * 1e3


def _launch_all(xq, xs, sets, fmt, n, cfg):
    return [dp.dp4a_launch(xq, xs, ps, fmt, n, None, cfg, torch.float16) for ps in sets]


def _bw_pct(nbytes: int, us: float) -> float:
    return 100 * nbytes / (us * 1e-6) / PEAK_BW


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="heuristic config only")
    ap.add_argument("--budget", type=float, default=240.0, help="seconds before stopping")
    ap.add_argument(
        "--cold",
        action="store_true",
        help="cycle through copies of each weight (> 2x the L2 cache) so every call "
        "reads from memory, as in a real decode step",
    )
    a = ap.parse_args()
    log = open(os.path.join(os.environ.get("OUT", "."), "sweep_dp4a.jsonl"), "w")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    start = time.time()
    cands = [dp.Dp4aConfig(bn, gpt, warps) for bn, gpt, warps in
             itertools.product((2, 4, 8), (1, 2), (1, 2, 4, 8)) if bn * gpt <= 16]  # fmt: skip
    for fmt, n, k in SHAPES:
        if time.time() - start > a.budget:
            print("budget spent")
            break
        w = random_weight(fmt, n, k)
        copies = max(1, -(-120 * 2**20 // w.nbytes)) if a.cold else 1
        sets = [[w.tensors[p].clone() for p in kernel_facts(fmt).planes] for _ in range(copies)]
        planes = sets[0]
        x = torch.randn(1, k, device="cuda").half()
        fp16 = bench(partial(qlinear_launch, x, w, None, pick_config(fmt, n, k, 1, x.device)))
        layout = kernel_facts(fmt).act_layout
        qact = bench(partial(quant_act_triton, x, layout))
        xq, xs = quant_act_triton(x, layout)
        ref = qlinear_launch(x, w, None, pick_config(fmt, n, k, 1, x.device)).float()
        heur = dp.dp4a_config(fmt, n, k, sms)
        rows = []
        for cfg in [heur] + ([] if a.quick else cands):
            try:
                o = dp.dp4a_launch(xq, xs, planes, fmt, n, None, cfg, torch.float16).float()
                err = ((o - ref).norm() / ref.norm()).item()
                us = bench(partial(_launch_all, xq, xs, sets, fmt, n, cfg)) / copies
            except Exception as e:  # noqa: BLE001 - a config that does not compile
                print(f"  {cfg}: {type(e).__name__}: {str(e)[:160]}")
                continue
            rows.append((us, cfg, err))
            log.write(json.dumps({"fmt": fmt, "n": n, "k": k, "cfg": cfg.__dict__, "us": us,
                                  "rel_l2_vs_fp16": err, "fp16_us": fp16, "quant_us": qact}) + "\n")  # fmt: skip
        log.flush()
        bw = partial(_bw_pct, w.nbytes)
        best = min(rows, key=lambda r: r[0])
        print(f"{fmt} {n}x{k}: fp16 GEMV {fp16:6.1f} us ({bw(fp16):4.1f}%) | quant {qact:4.1f} us | "
              f"dp4a heur {rows[0][0]:6.1f} us ({bw(rows[0][0]):4.1f}%, err {rows[0][2]:.1e}) | "
              f"best {best[0]:6.1f} us ({bw(best[0]):4.1f}%) {best[1]}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
