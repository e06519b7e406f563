"""The per-format tile loader of the GEMV/GEMM kernel `linear/gemv_triton._qlinear_kernel`
([BN, NG] tiles; the dp4a GEMV loads its own [NG, BN] tiles, see
`linear/dp4a_triton._load_step`). FMT is a format's `KernelFacts.code`; each branch inlines
that format's `load_tile` (`kernels/quant/q*_triton.py`)."""

from __future__ import annotations

import triton
import triton.language as tl

from localllm.kernels.quant import (
    awq_triton,
    q4_0_triton,
    q4_k_triton,
    q5_k_triton,
    q6_k_triton,
    q8_0_triton,
)


@triton.jit
def _load_tile(FMT: tl.constexpr, p0, p1, p2, p3, p4, rows, g0, g_hi, G, NG: tl.constexpr):
    """Planes of groups [g0, g0 + NG) of the rows, masked to g < g_hi:
    (words, extra, scale0, mins0, scale1, mins1), see `kernels/quant/loads_triton.py`."""
    g = g0 + tl.arange(0, NG)  # [NG]
    gmask = g < g_hi
    if FMT == 0:
        tile = q8_0_triton.load_tile(p0, p1, p2, p3, p4, rows, g, gmask, G, True)
    elif FMT == 1:
        tile = q4_0_triton.load_tile(p0, p1, p2, p3, p4, rows, g, gmask, G, True)
    elif FMT == 2:
        tile = q4_k_triton.load_tile(p0, p1, p2, p3, p4, rows, g, gmask, G, True)
    elif FMT == 3:
        tile = q5_k_triton.load_tile(p0, p1, p2, p3, p4, rows, g, gmask, G, True)
    elif FMT >= 5:  # awq128 / awq64
        R: tl.constexpr = 4 if FMT == 5 else 2
        tile = awq_triton.load_tile(p0, p1, p2, p3, p4, rows, g, gmask, G, R, True)
    else:
        tile = q6_k_triton.load_tile(p0, p1, p2, p3, p4, rows, g, gmask, G, True)
    return tile
