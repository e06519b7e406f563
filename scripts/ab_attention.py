"""Time batch-1 decode / verify attention as a decode step meets it: the KV read from memory
(copies of the sequence cycled past the L2, as the other layers and the weights evict it in a
real step), CUDA-graph timing, the plan made for the live context (`localllm bench`'s) and for
a long window (the engine's graphs: `--window`). One line per (model, KV type, context, query
rows). Run it once per package version in the same call to A/B a kernel change
(`PYTHONPATH` picks the version).

Usage: python3 scripts/ab_attention.py [--seqs 129,1024,4161,16513] [--q 1,5] [--parts 8,16]
    [--variants s1,s3,n32,w2,r1,n128s1] [--models llama3-8b,llama2-7b] [--kv fp16,int8] [--tag new]
    [--block-size 64]
Appends JSON lines to $OUT/ab_attention.jsonl.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys

import torch
import triton
from triton.testing import do_bench_cudagraph

sys.path.insert(0, os.path.dirname(__file__))
from bench_attention import kv_token_bytes, paged_inputs  # noqa: E402

from localllm.kernels.attention import paged_triton as pt  # noqa: E402

MODELS = {"llama3-8b": (32, 8), "llama2-7b": (32, 32)}
KV = {"fp16": torch.float16, "int8": torch.int8}
COLD_BYTES = 256 << 20  # KV copies cycled per replay: several times an H200's 50 MB L2


def _with_plan(block_n: int | None, warps: int | None, prefetch: int | None,
               block_m: int | None = None):  # noqa: ANN202  # fmt: skip
    """`plan_launch` with BLOCK_N, the warps per program, the register prefetch of one-stage
    decode and / or BLOCK_M (query rows x grouped heads a program holds; its row tiles follow)
    forced (partition lengths rounded up to the tile)."""
    plan = pt.plan_launch

    def planned(batch: int, n_kv: int, group: int, d_pad: int, max_q_len: int,
                *args, **kwargs) -> pt.Plan:  # noqa: ANN002, ANN003  # fmt: skip
        p = plan(batch, n_kv, group, d_pad, max_q_len, *args, **kwargs)
        bn = block_n or p.block_n
        part_len = min(triton.cdiv(p.part_len, bn) * bn, 2**30)
        pf = p.prefetch if prefetch is None else bool(prefetch)
        bm, m_blocks = p.block_m, p.m_blocks
        if block_m:
            bm = max(block_m, triton.next_power_of_2(group))
            m_blocks = triton.cdiv(max(max_q_len, 1), bm // group)
        return dataclasses.replace(p, block_n=bn, part_len=part_len, block_m=bm,
                                   m_blocks=m_blocks, num_warps=warps or p.num_warps,
                                   prefetch=pf)  # fmt: skip

    return planned


def time_case(hq: int, hkv: int, kv: torch.dtype, seq: int, q_len: int, window: int,
              parts: list[int], variants: list[str], block: int = 16) -> dict:  # fmt: skip
    """us per launch and GB/s of KV read, the plan made for the live context and for the
    window, the live context over each forced number of KV partitions in `parts`, and the live
    plan with each of `variants` ("s3": 3 pipeline stages, "n32": 32-token KV tiles, "w2": 2
    warps per program, "r1" / "r0": the one-stage register prefetch on / off, "p66": 66 KV
    partitions, "m128": 128-row query tiles, "n128s1w2": several). `block`: tokens per KV page."""
    one = kv_token_bytes(hkv, 128, kv) * seq  # one sequence's KV
    copies = max(2, min(256, COLD_BYTES // one))
    q, kc, vc, ks, vs, tables, _, lens, _, _, scale = paged_inputs(copies, seq, q_len, hq, hkv,
                                                                   128, kv, block)  # fmt: skip
    cu = torch.tensor([0, q_len], device="cuda", dtype=torch.int32)
    quant = "w4" if q_len == 1 else None  # one token: the int8 form for the O projection too
    rec = {}
    cases = [("live", seq, None, ""), ("window", max(window, seq), None, "")]
    cases += [(f"p{p}", seq, p, "") for p in parts] + [(v, seq, None, v) for v in variants]
    for plan, plan_len, forced, variant in cases:
        knobs = {k: int(v) for k, v in re.findall(r"([snwrpm])(\d+)", variant)}
        stages = knobs.get("s")
        forced = knobs.get("p", forced)

        def run(plan_len: int = plan_len, forced: int | None = forced, st=stages) -> None:
            for i in range(copies):
                pt.run_paged_attention(q[:q_len], kc, vc, ks, vs, tables[i : i + 1], cu,
                                       lens[:1], q_len, plan_len, scale, quant=quant,
                                       parts=forced, num_stages=st)  # fmt: skip

        saved = pt.plan_launch
        if knobs.keys() & {"n", "w", "r", "m"}:
            pt.plan_launch = _with_plan(knobs.get("n"), knobs.get("w"), knobs.get("r"),
                                        knobs.get("m"))  # fmt: skip
        try:
            us = do_bench_cudagraph(run, rep=30) * 1e3 / copies
        finally:
            pt.plan_launch = saved
        rec[plan + "_us"] = round(us, 2)
        rec[plan + "_gbs"] = round(one / us / 1e3)
    return rec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqs", default="129,1024,4161,16513")
    ap.add_argument("--q", default="1,5")
    ap.add_argument("--window", type=int, default=16640)
    ap.add_argument("--parts", default="", help="also force these KV partition counts")
    ap.add_argument(
        "--variants",
        default="",
        help="s3: 3 stages, n32: 32-token tiles, w2: 2 warps, r1: the prefetch, p66: 66 "
        "partitions, m128: 128-row query tiles; combined: s4p66",
    )
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--kv", default=",".join(KV))
    ap.add_argument("--tag", default="")
    ap.add_argument("--block-size", type=int, default=16, help="tokens per KV page")
    a = ap.parse_args()
    out = open(os.path.join(os.environ.get("OUT", "."), "ab_attention.jsonl"), "a")
    parts = [int(p) for p in a.parts.split(",") if p]
    variants = [v for v in a.variants.split(",") if v]
    for model in a.models.split(","):
        hq, hkv = MODELS[model]
        for kvn in a.kv.split(","):
            kv = KV[kvn]
            for seq in [int(s) for s in a.seqs.split(",")]:
                for q_len in [int(q) for q in a.q.split(",")]:
                    rec = dict(tag=a.tag, model=model, kv=kvn, seq=seq, q=q_len, block=a.block_size)
                    rec |= time_case(
                        hq, hkv, kv, seq, q_len, a.window, parts, variants, a.block_size
                    )
                    print(json.dumps(rec), flush=True)
                    out.write(json.dumps(rec) + "\n")
                    torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
