"""Time the dp4a GEMV at the dispatch's config on decode shapes, weights read from memory
(copies cycled past the L2), CUDA-graph timing: one line per (shape, rows). Run it once per
package version in the same call to A/B a kernel change (`PYTHONPATH` picks the version).

Usage: python3 scripts/ab_dp4a.py [--rows 1,5] [--shapes 0,2,3,4,5,6,9,10] [--tag new]
Appends JSON lines to $OUT/ab_dp4a.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
from triton.testing import do_bench_cudagraph

sys.path.insert(0, os.path.dirname(__file__))
from bench_qlinear import cold_planes, dispatch_inputs  # noqa: E402
from sweep_dp4a import SHAPES  # noqa: E402

from localllm.kernels.device import device_props  # noqa: E402
from localllm.kernels.linear import dp4a_triton as dp  # noqa: E402


def dp4a_us(xq: torch.Tensor, xs: torch.Tensor, cfg, fmt: str, n: int,  # noqa: ANN001
            sets: list[list[torch.Tensor]]) -> float:  # fmt: skip
    """us per dp4a GEMV at config `cfg`, each launch on the next copy of the weight planes
    (`bench_qlinear.cold_planes`: read from memory), CUDA-graph timing."""

    def run() -> None:
        for ps in sets:
            dp.dp4a_launch(xq, xs, ps, fmt, n, None, cfg, torch.float16)

    return do_bench_cudagraph(run, rep=30) * 1e3 / len(sets)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="1,5")
    ap.add_argument("--shapes", default="0,1,2,3,4,5,6,9,10")
    ap.add_argument("--tag", default="")
    a = ap.parse_args()
    sms = device_props(torch.device("cuda")).sm_count
    out = open(os.path.join(os.environ.get("OUT", "."), "ab_dp4a.jsonl"), "a")
    for i in [int(s) for s in a.shapes.split(",")]:
        fmt, n, k = SHAPES[i]
        w, sets = cold_planes(fmt, n, k)
        for t in [int(r) for r in a.rows.split(",")]:
            xq, xs, cfg = dispatch_inputs(fmt, n, k, t, sms)
            us = dp4a_us(xq, xs, cfg, fmt, n, sets)
            gbs = w.nbytes / us / 1e3
            rec = dict(tag=a.tag, fmt=fmt, n=n, k=k, rows=t, us=round(us, 2), gbs=round(gbs))
            print(json.dumps(rec), flush=True)
            out.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
