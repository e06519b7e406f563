"""Fused-GEMM configs that fill the GPU's SMs in whole waves, as JSON lines for
`scripts/probe_qmm.py --configs FILE --warm N` (no GPU needed to write them).

At 65-128 rows (a short turn after a cached prefix, wide batched decode) the dispatch runs one
128-row block per weight tile, one program per SM (`mm_config`), and several llama shapes leave
SMs idle in their last wave: on an H200 (132 SMs) llama3-8b's QKV (Q4_K 6144x4096) launches 96
programs (73% of one wave), its gate+up (28672x4096) 224 (85% of two), llama2-7b's QKV (Q4_0
12288x4096) 192 (73%) and gate+up (22016x4096) 172 (65%). Two wave-filling one-knob changes
already lost (session 38's `--neighbours`: the QKV with 4 K splits 49.9 vs 41.8 us, the gate+up
with 32-row tiles 282.4 vs 120.0); `--sweep` never tried split K on matrices of over 8192 rows,
nor two knobs at once. For each shape and row count this lists the dispatch's config
and every config (weight rows per program, groups per K step, K splits, stages, warps) whose
programs fill at least --fill of their waves, given programs per SM by shared memory
(`mm_smem`), with at least --min-steps K steps per program.

With --streamk it lists instead the dispatch's config and its stream-K form
(`kernels/linear/qmm_streamk_triton.py`: as many programs as fit on the SMs at once, sharing the
tiles' K steps), the same tile and pipeline.

Usage: python3 scripts/wave_fill_configs.py OUT.jsonl [--ts 100,128] [--sms 132]
           [--smem 232448] [--arch 90] [--fill 0.9] [--min-steps 4] [--shapes 6144x4096,...]
           [--streamk]
"""

from __future__ import annotations

import argparse
import itertools
import json
from dataclasses import replace

import triton

from localllm.kernels.linear.qmm_triton import (
    MMConfig,
    _per_sm,
    mm_smem,
    plain_mm_config,
)

# the llama3-8b-q4_k_m and llama2-7b-q4_0 weights (probe_qmm.py's SHAPES)
SHAPES = [("q4_k", 6144, 4096), ("q4_k", 4096, 4096), ("q4_k", 28672, 4096),
          ("q4_k", 4096, 14336), ("q6_k", 4096, 14336), ("q4_0", 12288, 4096),
          ("q4_0", 4096, 4096), ("q4_0", 22016, 4096), ("q4_0", 4096, 11008)]  # fmt: skip


def fill(programs: int, per_sm: int, sms: int) -> float:
    """The share of the program slots of its waves that a launch uses."""
    slots = per_sm * sms
    return programs / (triton.cdiv(programs, slots) * slots)


def candidates(fmt: str, n: int, k: int, t: int, sms: int, smem: int, arch: int,
               min_fill: float, min_steps: int) -> list[MMConfig]:  # fmt: skip
    """The dispatch's plain config (`plain_mm_config`), then the wave-filling ones, fullest
    first."""
    groups = k // 32
    heur = plain_mm_config(fmt, n, k, t, sms, smem, arch)
    found = []
    for bn, ng, split, stages, warps in itertools.product(
        (32, 64, 128), (4, 8), (1, 2, 4, 8), (2, 3, 4), (4, 8)
    ):
        per_split = groups // split
        if groups % split or per_split % ng or per_split // ng < min_steps:
            continue
        cfg = MMConfig(128, bn, ng, split, warps, stages, swap=True)
        if mm_smem(fmt, cfg, arch) > smem:
            continue
        per_sm = _per_sm(fmt, cfg, smem, arch)
        f = fill(triton.cdiv(n, bn) * split * triton.cdiv(t, 128), per_sm, sms)
        if f >= min_fill and cfg != heur:
            found.append((f, cfg))
    found.sort(key=lambda fc: -fc[0])
    return [heur] + [c for _, c in found]


def streamk(fmt: str, n: int, k: int, t: int, sms: int, smem: int, arch: int) -> list[MMConfig]:
    """The dispatch's plain config (`plain_mm_config`), then its stream-K form: one program
    per resident slot."""
    heur = plain_mm_config(fmt, n, k, t, sms, smem, arch)
    return [heur, replace(heur, split=1, streamk=_per_sm(fmt, heur, smem, arch) * sms)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--ts", default="100,128")
    ap.add_argument("--sms", type=int, default=132)  # H200
    ap.add_argument("--smem", type=int, default=232448)  # H200: bytes per block
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--fill", type=float, default=0.9)
    ap.add_argument("--min-steps", type=int, default=4)
    ap.add_argument("--shapes", default="", help="only these NxK (comma list)")
    ap.add_argument("--streamk", action="store_true", help="the stream-K forms instead")
    a = ap.parse_args()
    rows = 0
    with open(a.out, "w") as f:
        for fmt, n, k in SHAPES:
            if a.shapes and f"{n}x{k}" not in a.shapes.split(","):
                continue
            for t in map(int, a.ts.split(",")):
                if a.streamk:
                    cfgs = streamk(fmt, n, k, t, a.sms, a.smem, a.arch)
                else:
                    cfgs = candidates(fmt, n, k, t, a.sms, a.smem, a.arch, a.fill, a.min_steps)
                heur = cfgs[0]
                progs = triton.cdiv(n, heur.bn) * heur.split
                print(f"{fmt} {n}x{k} T={t}: dispatch {progs} programs, fill "
                      f"{fill(progs, _per_sm(fmt, heur, a.smem, a.arch), a.sms):.0%}; "
                      f"{len(cfgs) - 1} {'stream-K' if a.streamk else 'wave-filling'} configs")  # fmt: skip
                for c in cfgs:
                    f.write(json.dumps({"fmt": fmt, "n": n, "k": k, "t": t, "cfg": c.__dict__}))
                    f.write("\n")
                    rows += 1
    print(f"{rows} configs -> {a.out}")


if __name__ == "__main__":
    main()
