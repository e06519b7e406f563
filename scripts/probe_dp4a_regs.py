"""The multi-row dp4a GEMV (a speculative verify step's 5 rows) under a register cap per
thread (`Dp4aConfig.regs`, ptxas maxnreg): the uncapped 5-row programs take 255 registers and
run 8 warps per SM (session 14's ncu: latency-bound at 12.5% occupancy); a cap doubles the
warps at the price of spills to local memory (L1).

    python3 scripts/probe_dp4a_regs.py [--rows 5] [--shapes 0,2,3,4,5,6] [--regs 0,168,128]
        [--bns 4,8] [--warps 1,2]

Times, per shape (indices into `sweep_dp4a.SHAPES`), the one-row dispatch config, then the
`rows`-row dispatch config and its weight-row / warp variants under each cap; weights read from
memory, CUDA-graph timing. Prints us and the ratio to one row; JSON lines to
$OUT/probe_dp4a_regs.jsonl (outputs checked against the uncapped config's)."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from dataclasses import replace
from functools import partial

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_qlinear import cold_planes  # noqa: E402
from sweep_dp4a import SHAPES, _launch_all, bench  # noqa: E402

from localllm.kernels.device import device_props  # noqa: E402
from localllm.kernels.fused.quant_act_triton import quant_act_triton  # noqa: E402
from localllm.kernels.linear import dp4a_triton as dp  # noqa: E402
from localllm.kernels.quant import kernel_facts  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=5)
    ap.add_argument("--shapes", default="0,2,3,4,5,6")
    ap.add_argument("--regs", default="0,168,128")
    ap.add_argument("--bns", default="4,8", help="weight rows per program (and the dispatch's)")
    ap.add_argument("--warps", default="", help="warps per program (default: the dispatch's)")
    a = ap.parse_args()
    sms = device_props(torch.device("cuda")).sm_count
    path = os.path.join(os.environ.get("OUT", "."), "probe_dp4a_regs.jsonl")
    for i in map(int, a.shapes.split(",")):
        fmt, n, k = SHAPES[i]
        w, sets = cold_planes(fmt, n, k)
        layout = kernel_facts(fmt).act_layout
        x = torch.randn(a.rows, k, device="cuda").half()
        xq, xs = quant_act_triton(x, layout)
        one = dp.dp4a_config(fmt, n, k, sms, 1)
        us1 = bench(partial(_launch_all, xq[:1], xs[:1], sets, fmt, n, one)) / len(sets)
        heur = dp.dp4a_config(fmt, n, k, sms, a.rows)
        ref = dp.dp4a_launch(xq, xs, sets[0], fmt, n, None, heur, torch.float16).float()
        line = f"{fmt} {n}x{k}: 1 row {us1:.1f} us |"
        bns = sorted({heur.bn, *map(int, a.bns.split(","))})
        warps = sorted({heur.warps, *(int(w) for w in a.warps.split(",") if w)})
        for bn, wp, regs in itertools.product(bns, warps, map(int, a.regs.split(","))):
            cfg = replace(heur, bn=bn, warps=wp, regs=regs)
            try:
                o = dp.dp4a_launch(xq, xs, sets[0], fmt, n, None, cfg, torch.float16).float()
                us = bench(partial(_launch_all, xq, xs, sets, fmt, n, cfg)) / len(sets)
            except Exception as e:  # noqa: BLE001 - a config that does not compile
                print(f"  {cfg}: {type(e).__name__}", flush=True)
                continue
            err = ((o - ref).abs().max() / ref.abs().max()).item()
            line += f" bn{bn} w{wp} r{regs or '-'} {us:.1f} ({us / us1:.2f}x)"
            with open(path, "a") as f:
                f.write(json.dumps({"fmt": fmt, "n": n, "k": k, "rows": a.rows, "us": us,
                                    "one_row_us": us1, "err": err, "cfg": cfg.__dict__,
                                    "heuristic": cfg == heur}) + "\n")  # fmt: skip
        print(line, flush=True)


if __name__ == "__main__":
    main()
