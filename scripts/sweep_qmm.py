"""Sweep the fused dequant-GEMM (`kernels/linear/qmm_triton.py`) on 7-8B shapes for 2..256
rows, next to the current `qlinear_triton` choice and dequantize + cuBLAS.

Prints one line per point (best config, us, % of 4.1 TB/s for the packed weight bytes) and
writes every timing as JSON lines to $OUT/sweep_qmm.jsonl (or ./sweep_qmm.jsonl).
Usage: python3 scripts/sweep_qmm.py [--fmts q4_k,q6_k,q4_0] [--ts 8,32,128] [--budget 300]
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

from localllm.kernels.device import device_props  # noqa: E402
from localllm.kernels.linear.dequant_triton import dequantize  # noqa: E402
from localllm.kernels.linear.qlinear_triton import qlinear_triton  # noqa: E402
from localllm.kernels.linear.qmm_triton import MMConfig, mm_config, qmm_launch  # noqa: E402
from localllm.kernels.quant import kernel_facts  # noqa: E402


def bench(fn) -> float:
    """ms per call, replayed from a CUDA graph as the engine runs it (no launch overhead)."""
    return do_bench_cudagraph(fn, rep=20)


SHAPES = [(4096, 4096), (28672, 4096), (4096, 14336), (1024, 4096)]


def candidates(t: int) -> list[MMConfig]:
    bms = [min(64, max(16, 1 << (t - 1).bit_length()))] + ([128] if t > 64 else [])
    out = []
    for bm, bn, ng, warps, stages, swap in itertools.product(
        bms, (32, 64, 128), (8, 16), (4, 8), (1, 2), (False, True)
    ):
        if (
            bn == 128
            and (warps == 4 or ng == 16)
            or bm * bn * ng > 64 * 128 * 8
            or (swap and bm > 64)
        ):
            continue
        out.append(MMConfig(bm, bn, ng, 1, warps, stages, swap))
    return out


def _cublas(x: torch.Tensor, w) -> torch.Tensor:
    return x @ dequantize(w).T


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fmts", default="q4_k,q6_k,q4_0")
    ap.add_argument("--ts", default="8,32,128")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds before stopping")
    a = ap.parse_args()
    out_dir = os.environ.get("OUT", ".")
    log = open(os.path.join(out_dir, "sweep_qmm.jsonl"), "w")
    props = device_props(torch.device("cuda"))
    sms, smem = props.sm_count, props.smem_per_block
    start = time.time()
    for fmt in a.fmts.split(","):
        for n, k in SHAPES:
            w = random_weight(fmt, n, k)
            planes = [w.tensors[p] for p in kernel_facts(fmt).planes]
            for t in map(int, a.ts.split(",")):
                if time.time() - start > a.budget:
                    print("budget spent")
                    return
                x = torch.randn(t, k, device="cuda").half()
                ref = qlinear_triton(x, w)
                cur = bench(partial(qlinear_triton, x, w)) * 1e3
                cub = bench(partial(_cublas, x, w)) * 1e3
                rows = []
                cfgs = [mm_config(fmt, n, k, t, sms, smem, props.arch)] + candidates(t)
                for i, cfg in enumerate(cfgs):
                    splits = (1, 4) if n <= 4096 and t <= 32 else (1,)
                    for split in (cfg.split,) if i == 0 else splits:
                        c = MMConfig(cfg.bm, cfg.bn, cfg.ng, split, cfg.warps, cfg.stages, cfg.swap)
                        try:
                            o = qmm_launch(x, planes, fmt, n, None, c)
                            err = (
                                (o.float() - ref.float()).abs().max() / ref.float().abs().max()
                            ).item()
                            us = bench(partial(qmm_launch, x, planes, fmt, n, None, c)) * 1e3
                        except Exception as e:  # noqa: BLE001 - a config that does not compile
                            print(f"  {c}: {type(e).__name__}: {str(e)[:120]}")
                            continue
                        rows.append((us, c, err, i == 0))
                        log.write(
                            json.dumps(
                                {
                                    "fmt": fmt,
                                    "n": n,
                                    "k": k,
                                    "t": t,
                                    "cfg": c.__dict__,
                                    "us": us,
                                    "err": err,
                                    "heuristic": i == 0,
                                }
                            )
                            + "\n"
                        )
                rows.sort(key=lambda r: r[0])
                best, heur = rows[0], next(r for r in rows if r[3])
                gbs = w.nbytes / (best[0] * 1e-6) / 1e9
                print(
                    f"{fmt} {n}x{k} T={t} (CUDA graph): current {cur:.1f} us, deq+cuBLAS {cub:.1f} us, "
                    f"heuristic {heur[0]:.1f} us, best {best[0]:.1f} us ({gbs:.0f} GB/s = "
                    f"{gbs * 1e9 / PEAK_BW:.0%}) {best[1]} err {best[2]:.1e}"
                )
                for us, c, _err, _ in rows[1:4]:
                    print(f"     {us:.1f} us {c}")
                log.flush()


if __name__ == "__main__":
    main()
