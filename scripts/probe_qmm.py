"""Time the fused dequant-GEMM (`kernels/linear/qmm_triton.py`) on the 8B model's shapes with
weights read from memory (enough copies to overflow L2), at the heuristic config and a few
others; optionally next to another version of the module (`--old path/to/module.py`).

Usage: python3 scripts/probe_qmm.py [--ts 16,32] [--fmts q4_k,q6_k] [--old FILE] [--sweep]
Prints us per call, GB/s and % of 4.1 TB/s for the packed weight bytes.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import sys

import torch
from triton.testing import do_bench_cudagraph

sys.path.insert(0, os.path.dirname(__file__))
from bench_qlinear import PEAK_BW, random_weight  # noqa: E402

from localllm.kernels.device import device_props  # noqa: E402
from localllm.kernels.linear import qmm_triton as mm  # noqa: E402
from localllm.kernels.linear.qlinear_triton import qlinear_triton  # noqa: E402
from localllm.kernels.quant import kernel_facts  # noqa: E402

SHAPES = {"q4_k": [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)],
          "q6_k": [(4096, 14336), (1024, 4096), (128256, 4096)],
          "q4_0": [(12288, 4096), (4096, 4096), (22016, 4096), (4096, 11008)]}  # fmt: skip


def cold_copies(fmt: str, n: int, k: int):
    w = random_weight(fmt, n, k)
    reps = max(1, int(256e6 // w.nbytes))
    planes = [w.tensors[p] for p in kernel_facts(fmt).planes]
    return w, [[p.clone() for p in planes] for _ in range(reps)]


def time_us(mod, x, copies, fmt, n, cfg) -> float:
    def run():
        for planes in copies:
            mod.qmm_launch(x, planes, fmt, n, None, cfg)

    return do_bench_cudagraph(run, rep=30) * 1e3 / len(copies)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ts", default="32")
    ap.add_argument("--fmts", default="q4_k,q6_k,q4_0")
    ap.add_argument("--old", default="")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--bms", default="", help="--sweep these M block sizes (default: heuristic's)")
    ap.add_argument("--ngs", default="8", help="--sweep these groups per K step")
    ap.add_argument("--splits", default="1,2,4,8")
    ap.add_argument("--stages", default="3,4")
    ap.add_argument("--shapes", default="", help="only these NxK (comma list)")
    ap.add_argument("--cublas", action="store_true", help="also time qlinear_triton (L2-warm)")
    a = ap.parse_args()
    old = None
    if a.old:
        spec = importlib.util.spec_from_file_location("qmm_old", a.old)
        old = importlib.util.module_from_spec(spec)
        sys.modules["qmm_old"] = old
        spec.loader.exec_module(old)
    props = device_props(torch.device("cuda"))
    sms, smem = props.sm_count, props.smem_per_block
    for fmt in a.fmts.split(","):
        for n, k in SHAPES[fmt]:
            if a.shapes and f"{n}x{k}" not in a.shapes.split(","):
                continue
            w, copies = cold_copies(fmt, n, k)
            for t in map(int, a.ts.split(",")):
                x = torch.randn(t, k, device="cuda").half()
                cfg = mm.mm_config(fmt, n, k, t, sms, smem)
                ref = mm.qmm_launch(x, copies[0], fmt, n, None, cfg).float()
                line = f"{fmt} {n}x{k} T={t}:"
                if old is not None:
                    ocfg = old.mm_config(fmt, n, k, t, sms)
                    o = old.qmm_launch(x, copies[0], fmt, n, None, ocfg).float()
                    us = time_us(old, x, copies, fmt, n, ocfg)
                    line += f" old {us:.1f} us ({w.nbytes / us / 1e3 / PEAK_BW * 1e9:.0%})"
                    line += f" maxdiff {((o - ref).abs().max() / ref.abs().max()).item():.1e} |"
                if a.cublas:
                    us = do_bench_cudagraph(lambda x=x, w=w: qlinear_triton(x, w), rep=30) * 1e3
                    line += f" current path {us:.1f} us |"
                us = time_us(mm, x, copies, fmt, n, cfg)
                line += f" new {us:.1f} us ({w.nbytes / us / 1e3 / PEAK_BW * 1e9:.0%}) {cfg}"
                print(line, flush=True)
                if not a.sweep:
                    continue
                res = []
                bms = [int(b) for b in a.bms.split(",") if b] or [cfg.bm]
                ngs = [int(g) for g in a.ngs.split(",")]
                splits = [int(v) for v in a.splits.split(",")]
                stage_list = [int(v) for v in a.stages.split(",")]
                for bm, ng, bn, warps, split, stages in itertools.product(
                    bms, ngs, (64, 128), (4, 8), splits, stage_list
                ):
                    if split > 1 and n > 8192 or stages == 4 and (bn, warps) != (128, 4):
                        continue
                    c = mm.MMConfig(bm, bn, ng, split, warps, stages, True)
                    try:
                        res.append((time_us(mm, x, copies, fmt, n, c), c))
                    except Exception as e:  # noqa: BLE001 - configs that do not compile
                        print(f"   {c}: {type(e).__name__}", flush=True)
                res.sort(key=lambda r: r[0])
                for us, c in res[:4]:
                    print(
                        f"   {us:.1f} us ({w.nbytes / us / 1e3 / PEAK_BW * 1e9:.0%}) {c}",
                        flush=True,
                    )
                with open(os.path.join(os.environ.get("OUT", "."), "probe_qmm.jsonl"), "a") as f:
                    for us, c in res:
                        f.write(
                            json.dumps(
                                {"fmt": fmt, "n": n, "k": k, "t": t, "us": us, "cfg": c.__dict__}
                            )
                            + "\n"
                        )


if __name__ == "__main__":
    main()
