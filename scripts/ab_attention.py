"""Time batch-1 decode / verify attention as a decode step meets it: the KV read from memory
(copies of the sequence cycled past the L2, as the other layers and the weights evict it in a
real step), CUDA-graph timing, the plan made for the live context (`localllm bench`'s) and for
a long window (the engine's graphs: `--window`). One line per (model, KV type, context, query
rows). Run it once per package version in the same call to A/B a kernel change
(`PYTHONPATH` picks the version).

Usage: python3 scripts/ab_attention.py [--seqs 129,1024,4161,16513] [--q 1,5] [--tag new]
Appends JSON lines to $OUT/ab_attention.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
from triton.testing import do_bench_cudagraph

sys.path.insert(0, os.path.dirname(__file__))
from bench_attention import paged_inputs  # noqa: E402

from localllm.kernels.attention.paged_triton import run_paged_attention  # noqa: E402

MODELS = {"llama3-8b": (32, 8), "llama2-7b": (32, 32)}
KV = {"fp16": torch.float16, "int8": torch.int8}
COLD_BYTES = 256 << 20  # KV copies cycled per replay: several times an H200's 50 MB L2


def kv_token_bytes(hkv: int, d: int, kv: torch.dtype) -> int:
    """K and V of one token over all KV heads (+ their fp32 scales for int8)."""
    quant = kv == torch.int8
    return 2 * hkv * (d * kv.itemsize + (4 if quant else 0))


def time_case(hq: int, hkv: int, kv: torch.dtype, seq: int, q_len: int, window: int) -> dict:
    """us per launch and GB/s of KV read, the plan made for the live context and for the
    window."""
    one = kv_token_bytes(hkv, 128, kv) * seq  # one sequence's KV
    copies = max(2, min(256, COLD_BYTES // one))
    q, kc, vc, ks, vs, tables, _, lens, _, _, scale = paged_inputs(copies, seq, q_len, hq, hkv,
                                                                   128, kv)  # fmt: skip
    cu = torch.tensor([0, q_len], device="cuda", dtype=torch.int32)
    quant = "w4" if q_len == 1 else None  # one token: the int8 form for the O projection too
    rec = {}
    for plan, plan_len in (("live", seq), ("window", max(window, seq))):

        def run(plan_len: int = plan_len) -> None:
            for i in range(copies):
                run_paged_attention(q[:q_len], kc, vc, ks, vs, tables[i : i + 1], cu, lens[:1],
                                    q_len, plan_len, scale, quant=quant)  # fmt: skip

        us = do_bench_cudagraph(run, rep=30) * 1e3 / copies
        rec[plan + "_us"] = round(us, 2)
        rec[plan + "_gbs"] = round(one / us / 1e3)
    return rec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqs", default="129,1024,4161,16513")
    ap.add_argument("--q", default="1,5")
    ap.add_argument("--window", type=int, default=16640)
    ap.add_argument("--tag", default="")
    a = ap.parse_args()
    out = open(os.path.join(os.environ.get("OUT", "."), "ab_attention.jsonl"), "a")
    for model, (hq, hkv) in MODELS.items():
        for kvn, kv in KV.items():
            for seq in [int(s) for s in a.seqs.split(",")]:
                for q_len in [int(q) for q in a.q.split(",")]:
                    rec = dict(tag=a.tag, model=model, kv=kvn, seq=seq, q=q_len)
                    rec |= time_case(hq, hkv, kv, seq, q_len, a.window)
                    print(json.dumps(rec), flush=True)
                    out.write(json.dumps(rec) + "\n")
                    torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
