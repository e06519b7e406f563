"""Launch-shape sweep of the one-row elementwise kernels of a decode step (add + RMSNorm + int8
quantization over D = 4096; SiLU x mul + int8 quantization over F = 14336 / 11008), CUDA-graph
timing with 20 launches per graph (the kernels are latency-bound: what matters is the time per
launch inside a graph).
Usage: python3 scripts/sweep_small_kernels.py"""

from __future__ import annotations

import functools
import itertools

import torch
import triton
from triton.testing import do_bench_cudagraph

from localllm.kernels.fused.activation_triton import _silu_mul_kernel
from localllm.kernels.fused.norm_triton import _rms_norm_kernel
from localllm.kernels.fused.quant_act_triton import act_buffers


def bench(fn) -> float:
    def run():
        for _ in range(20):
            fn()

    return do_bench_cudagraph(run, rep=100) * 1e3 / 20


def main() -> None:
    d = 4096
    x, r = torch.randn(1, d, device="cuda").half(), torch.randn(1, d, device="cuda").half()
    w = torch.rand(d, device="cuda").half()
    out, r_out = torch.empty_like(x), torch.empty_like(x)
    xq, xs = act_buffers(1, d, x.device)
    for block_c, warps in itertools.product((256, 512, 1024, 2048, 4096), (2, 4, 8, 16)):
        launch = _rms_norm_kernel[(1, triton.cdiv(d, block_c))]
        us = bench(functools.partial(launch, x, r, w, out, r_out, xq, xs, d, d, d, d, d, 1e-5,
                                     BLOCK_D=d, BLOCK_C=block_c, HAS_RESIDUAL=True, QUANT=1,
                                     num_warps=warps))  # fmt: skip
        print(f"add_rms_norm D={d} block_c={block_c} warps={warps}: {us:.2f} us", flush=True)
    for f in (14336, 11008):
        gu = torch.randn(1, 2 * f, device="cuda").half()
        o = torch.empty(1, f, device="cuda").half()
        hq, hs = act_buffers(1, f, gu.device)
        for block, warps in itertools.product((256, 512, 1024, 2048), (1, 2, 4, 8)):
            launch = _silu_mul_kernel[(1, triton.cdiv(f, block))]
            us = bench(functools.partial(launch, gu, gu[:, f:], o, hq, hs, 2 * f, 2 * f, f, f,
                                         BLOCK=block, QUANT=1, num_warps=warps))  # fmt: skip
            print(f"silu_mul F={f} block={block} warps={warps}: {us:.2f} us", flush=True)


if __name__ == "__main__":
    main()
