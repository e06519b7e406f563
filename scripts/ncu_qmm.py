"""Launch the fused dequant-GEMM (`kernels/linear/qmm_triton.py`) at the dispatch's config on one
shape and row count, for Nsight Compute to profile (stall reasons, occupancy, memory throughput).

Usage: ncu --set full -k regex:_qmm_kernel -s 2 -c 1 python3 scripts/ncu_qmm.py --fmt q4_0 \\
           --shape 22016x4096 --rows 32
Launches `--reps` times on weights past the L2 (copies cycled); profile one of the later launches
(`ncu -s`). Prints the config it launched."""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from probe_qmm import cold_copies  # noqa: E402

from localllm.kernels.device import device_props  # noqa: E402
from localllm.kernels.linear import qmm_triton as mm  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fmt", default="q4_0")
    ap.add_argument("--shape", default="22016x4096", help="N x K")
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--reps", type=int, default=4)
    a = ap.parse_args()
    n, k = map(int, a.shape.split("x"))
    props = device_props(torch.device("cuda"))
    cfg = mm.mm_config(a.fmt, n, k, a.rows, props.sm_count, props.smem_per_block, props.arch)
    _, copies = cold_copies(a.fmt, n, k)
    x = torch.randn(a.rows, k, device="cuda").half()
    print(f"{a.fmt} {n}x{k} rows {a.rows}: {cfg}", flush=True)
    for i in range(a.reps):
        mm._launch(x, copies[i % len(copies)], a.fmt, n, None, cfg)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
