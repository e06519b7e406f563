"""Time the fused dequant-GEMM (`kernels/linear/qmm_triton.py`) on sm_90 with the MMA
instruction Triton picks for it: wgmma (MMAv3, the default) or, with DISABLE_MMA_V3=1 in the
environment, the Ampere `mma.sync` (MMAv2, what sm_86 / sm_89 always run). The environment
variable is read when a kernel compiles, so one process times one MMA version; run it twice.

    python3 scripts/probe_mma_version.py --tag v3 --ts 32,64 --only-heuristic
    DISABLE_MMA_V3=1 python3 scripts/probe_mma_version.py --tag v2 --ts 32,64 --warm 15

Each config is launched exactly as given (`qmm_triton._launch`: no spill guard, no fitting) by
`probe_qmm.run_jobs`: weights read from memory, CUDA-graph timing, the best config per shape
printed, every timing (fmt, n, k, t, us, err against the heuristic's output, cfg) appended to
$OUT/probe_mma_version_TAG.jsonl."""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from dataclasses import replace

import torch

sys.path.insert(0, os.path.dirname(__file__))
from probe_qmm import SHAPES, run_jobs  # noqa: E402

from localllm.kernels.device import device_props  # noqa: E402
from localllm.kernels.linear import qmm_triton as mm  # noqa: E402


def variants(cfg: mm.MMConfig, t: int, only_heuristic: bool) -> list[mm.MMConfig]:
    """The heuristic's config, then the tiles around it: operand order, weight rows, warps,
    stages (the split, groups per step and scale prefetch stay the heuristic's)."""
    out = [cfg]
    if not only_heuristic:
        for swap, bn, warps, stages in itertools.product((False, True), (64, 128), (4, 8),
                                                         (2, 3)):  # fmt: skip
            out.append(replace(cfg, bm=min(max(t, 16), 64), swap=swap, bn=bn, warps=warps,
                               stages=stages))  # fmt: skip
    seen: set = set()
    return [c for c in out if not (c in seen or seen.add(c))]


def jobs(props, ts: list[int], fmts: list[str], only_heuristic: bool) -> list[tuple]:
    """(fmt, n, k, t, config as a dict) of every variant of every shape and row count."""
    out = []
    for fmt in fmts:
        for n, k in SHAPES[fmt]:
            for t in ts:
                heur = mm.mm_config(fmt, n, k, t, props.sm_count, props.smem_per_block, props.arch)
                out += [(fmt, n, k, t, c.__dict__) for c in variants(heur, t, only_heuristic)]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tag", required=True, help="printed before each line")
    ap.add_argument("--ts", default="32,64")
    ap.add_argument("--fmts", default="q4_k,q6_k,q4_0")
    ap.add_argument("--only-heuristic", action="store_true")
    ap.add_argument("--warm", type=int, default=0, help="compile in N processes first")
    a = ap.parse_args()
    props = device_props(torch.device("cuda"))
    todo = jobs(props, [int(v) for v in a.ts.split(",")], a.fmts.split(","), a.only_heuristic)
    run_jobs(todo, a.warm, props.sm_count, props.smem_per_block, props.arch, exact=True,
             name=f"probe_mma_version_{a.tag}.jsonl", tag=f"{a.tag} ")  # fmt: skip


if __name__ == "__main__":
    main()
