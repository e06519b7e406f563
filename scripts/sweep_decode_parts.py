"""Batch-1 decode attention inside a CUDA graph planned for a long window (the engine captures
its graphs for max_model_len), run at a shorter live context: time per layer of the engine's
launch against the live context spread evenly over P partitions (P forced, planned for the
context itself). Shows whether the partition length the kernel derives from the window
leaves SMs idle at medium contexts (issue 16, tg at depth 4,096).

Usage: PYTHONPATH=scripts python3 scripts/sweep_decode_parts.py [--window 16640]
"""

from __future__ import annotations

import argparse
import functools
import itertools

import torch
import triton.testing
from bench_attention import kv_bytes, paged_inputs  # scripts/ is on the path

from localllm.kernels.attention import paged_triton as pt

MODELS = {"llama3-8b": (32, 8), "llama2-7b": (32, 32)}
KV = {"fp16": torch.float16, "int8": torch.int8}


def _us(fn) -> float:
    fn()
    return triton.testing.do_bench_cudagraph(fn, rep=30) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--window", type=int, default=16640)
    ap.add_argument("--seqs", default="1024,2048,4096,8192,16384")
    ap.add_argument("--parts", default="4,8,16,33,66,132")
    a = ap.parse_args()
    print(torch.cuda.get_device_name(), flush=True)
    for (model, (hq, hkv)), (kvn, kv) in itertools.product(MODELS.items(), KV.items()):
        args = list(paged_inputs(1, a.window, 1, hq, hkv, 128, kv))
        for seq in [int(s) for s in a.seqs.split(",")]:
            args[7] = torch.full((1,), seq, device="cuda", dtype=torch.int32)  # live context
            nbytes = kv_bytes(tuple(args)) * seq // a.window
            engine = _us(functools.partial(pt.run_paged_attention, *args))  # planned for window
            forced = list(args)
            forced[9] = seq  # planned for the live context
            res = []
            for p in [int(x) for x in a.parts.split(",")]:
                res.append((_us(functools.partial(pt.run_paged_attention, *forced, parts=p)), p))
            best = min(res)
            row = " ".join(f"{p}:{us:.1f}" for us, p in res)
            print(f"{model} {kvn} seq {seq:6d}: engine {engine:6.1f} us ({nbytes / engine / 1e3:5.0f}"
                  f" GB/s) | forced parts {row} | best {best[0]:.1f} us ({best[1]} parts, "
                  f"{nbytes / best[0] / 1e3:.0f} GB/s)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
