"""Batch-1 decode attention over long contexts (issue 16: tg at depth 4,096 / 16,384, fp16
and int8 KV): time per call and KV bandwidth for the planner's launch and for other KV splits,
pipeline depths, KV tile widths and warp counts, on llama2-7b (32 KV heads) and llama3-8b (8)
heads, as a CUDA graph runs it (planned for a window a little past the context).
Usage: python3 scripts/sweep_long_attention.py [--seqs 4096,16384] [--quick]"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import itertools

import torch
import triton.testing
from bench_attention import kv_bytes, paged_inputs  # scripts/ is on the path

from localllm.kernels.attention import paged_triton as pt
from localllm.kernels.attention.kv_dtypes import is_quantized

MODELS = {"llama2-7b": (32, 32), "llama3-8b": (32, 8)}
KV = {"fp16": torch.float16, "int8": torch.int8}


def _patched(block_n: int | None, warps: int | None):
    """plan_launch with the KV tile width / warp count forced (None: the planner's)."""
    orig = pt.plan_launch

    def plan(*args, **kw):
        p = orig(*args, **kw)
        return dataclasses.replace(p, block_n=block_n or p.block_n, num_warps=warps or p.num_warps)

    return orig, plan


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqs", default="4096,16384")
    ap.add_argument("--quick", action="store_true", help="the planner's launch only")
    a = ap.parse_args()
    print(torch.cuda.get_device_name(), flush=True)
    for (model, (hq, hkv)), seq, (kvn, kv) in itertools.product(
        MODELS.items(), [int(s) for s in a.seqs.split(",")], KV.items()
    ):
        window = seq + 256
        args = list(paged_inputs(1, window, 1, hq, hkv, 128, kv))
        args[7] = torch.full((1,), seq, device="cuda", dtype=torch.int32)  # live context
        nbytes = kv_bytes(tuple(args)) * seq // window
        quant = is_quantized(kv)
        base = pt.plan_launch(1, hkv, hq // hkv, 128, 1, window, pt.target_programs(
            pt.device_props(torch.device("cuda"))), stages=pt.kv_stages(quant, 1),
            quantized=quant)  # fmt: skip
        combos = [(None, None, None, None)]  # the engine's launch (its pipeline depth too)
        if not a.quick:
            combos += list(itertools.product((None, base.parts * 2, base.parts * 4),
                                             (1, 2, 3), (None, 32, 64), (None, 8)))  # fmt: skip
        res = []
        for parts, stages, bn, warps in combos:
            orig, plan = _patched(bn, warps)
            pt.plan_launch = plan
            try:
                fn = functools.partial(
                    pt.run_paged_attention, *args, parts=parts, num_stages=stages
                )
                fn()
                us = triton.testing.do_bench_cudagraph(fn, rep=30) * 1e3
                res.append((us, parts, stages, bn, warps))
            except Exception as e:  # noqa: BLE001 - a config that does not fit
                print(f"  {parts}/{stages}/{bn}/{warps}: {type(e).__name__} {str(e)[:100]}")
            finally:
                pt.plan_launch = orig
        us0 = res[0][0]
        best = min(res)
        print(f"{model} seq {seq} {kvn}: planner {us0:7.1f} us ({nbytes / us0 / 1e3:6.0f} GB/s, "
              f"{base.parts} parts, bn {base.block_n}, {base.num_warps} warps) | best {best[0]:7.1f} us "
              f"({nbytes / best[0] / 1e3:6.0f} GB/s) parts {best[1]} stages {best[2]} bn {best[3]} "
              f"warps {best[4]}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
