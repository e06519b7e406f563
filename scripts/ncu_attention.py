"""Launch batch-1 decode attention on one shape, for Nsight Compute to profile (the kernel
under `ncu`: stalls, occupancy, memory throughput).

Usage: ncu --set full -k regex:_attn_kernel -s 4 -c 1 python3 scripts/ncu_attention.py
           [--model llama3-8b] [--kv fp16] [--seq 4161] [--q 1] [--parts 0]
Each launch reads another copy of the sequence's KV (copies cycled past the L2), as in a real
step; profile one of the later launches (`ncu -s`).
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from ab_attention import COLD_BYTES, KV, MODELS  # noqa: E402
from bench_attention import kv_token_bytes, paged_inputs  # noqa: E402

from localllm.kernels.attention import paged_triton as pt  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama3-8b", choices=list(MODELS))
    ap.add_argument("--kv", default="fp16", choices=list(KV))
    ap.add_argument("--seq", type=int, default=4161)
    ap.add_argument("--q", type=int, default=1)
    ap.add_argument("--parts", type=int, default=0, help="force KV partitions (0: the plan's)")
    ap.add_argument("--reps", type=int, default=8)
    a = ap.parse_args()
    hq, hkv = MODELS[a.model]
    kv = KV[a.kv]
    one = kv_token_bytes(hkv, 128, kv) * a.seq
    copies = max(2, min(64, COLD_BYTES // one))
    q, kc, vc, ks, vs, tables, _, lens, _, _, scale = paged_inputs(copies, a.seq, a.q, hq, hkv,
                                                                   128, kv)  # fmt: skip
    cu = torch.tensor([0, a.q], device="cuda", dtype=torch.int32)
    quant = "w4" if a.q == 1 else None
    for i in range(a.reps):
        c = i % copies
        pt.run_paged_attention(q[: a.q], kc, vc, ks, vs, tables[c : c + 1], cu, lens[:1], a.q,
                               a.seq, scale, quant=quant, parts=a.parts or None)  # fmt: skip
    torch.cuda.synchronize()
    print(f"{a.model} {a.kv} seq {a.seq} q {a.q}: {a.reps} launches", flush=True)


if __name__ == "__main__":
    main()
