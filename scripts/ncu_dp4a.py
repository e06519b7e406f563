"""Launch the dp4a GEMV on one shape at a few row counts, for Nsight Compute to profile (the
kernel under `ncu`: where its time goes, instruction mix, stalls, pipes).

Usage: ncu --set full -k regex:_dp4a_kernel -o prof python3 scripts/ncu_dp4a.py --shape 3 --rows 1,5
Each row count launches `--reps` times on weights past the L2 (copies cycled); profile one of
the later launches (`ncu -s`).
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_qlinear import cold_planes, dispatch_inputs  # noqa: E402
from sweep_dp4a import SHAPES  # noqa: E402

from localllm.kernels.device import device_props  # noqa: E402
from localllm.kernels.linear import dp4a_triton as dp  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", type=int, default=3, help="index into sweep_dp4a.SHAPES")
    ap.add_argument("--rows", default="1,5")
    ap.add_argument("--reps", type=int, default=4)
    a = ap.parse_args()
    fmt, n, k = SHAPES[a.shape]
    sms = device_props(torch.device("cuda")).sm_count
    _, sets = cold_planes(fmt, n, k)
    copies = len(sets)
    for t in [int(r) for r in a.rows.split(",")]:
        xq, xs, cfg = dispatch_inputs(fmt, n, k, t, sms)
        print(f"{fmt} {n}x{k} rows {t}: {cfg}", flush=True)
        for i in range(a.reps):
            dp.dp4a_launch(xq, xs, sets[i % copies], fmt, n, None, cfg, torch.float16)
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
