"""Batch-1 decode attention as a CUDA graph runs it (planned for the whole context window,
4352 tokens, while the sequence holds far fewer): time per call for KV partitions of 64 / 128 /
the planner's length and 1-3 pipeline stages, fp16 KV, 8B heads, over context lengths.
Usage: python3 scripts/sweep_decode_attention.py"""

from __future__ import annotations

import functools

import torch
import triton.testing
from bench_attention import paged_inputs  # scripts/ is the working directory

from localllm.kernels.attention.paged_triton import plan_launch, run_paged_attention

WINDOW = 4352


def main() -> None:
    for seq in (64, 129, 256, 1024, 4096):
        args = list(paged_inputs(1, WINDOW, 1, 32, 8, 128, torch.float16))
        args[7] = torch.full((1,), seq, device="cuda", dtype=torch.int32)  # seq_lens
        for parts in (None, 34, 68):
            plan = plan_launch(1, 8, 4, 128, 1, WINDOW, 264, parts)
            for stages in (1, 2, 3):
                fn = functools.partial(run_paged_attention, *args, parts=parts, num_stages=stages,
                                       quant="w4")  # fmt: skip
                fn()
                us = triton.testing.do_bench_cudagraph(fn, rep=50) * 1e3
                print(
                    f"seq {seq:5d} part_len {plan.part_len:4d} ({plan.parts:2d} parts) "
                    f"stages {stages}: {us:.2f} us",
                    flush=True,
                )


if __name__ == "__main__":
    main()
