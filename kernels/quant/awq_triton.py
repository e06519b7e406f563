"""AWQ's Triton tile loader (planes: `awq.py`): the scale and zero point of a 32-element group
g are entry g // R of their planes (R = group size / 32: 4 for awq128, 2 for awq64)."""

from __future__ import annotations

import triton
import triton.language as tl

from localllm.kernels.quant.loads_triton import _ld, _load_words


@triton.jit
def group_ratio(FMT: tl.constexpr):
    """32-element groups per AWQ group of format code FMT (5: awq128, 6: awq64)."""
    R: tl.constexpr = 4 if FMT == 5 else 2
    return R


@triton.jit
def scale_min(s, z, rows, g, gmask, G, R: tl.constexpr, MASKED: tl.constexpr):
    """(s, s * z) fp32 [BN, NG] of the groups g of the rows (exact: 11 x 4 bits)."""
    o = rows[:, None] * (G // R) + (g // R)[None, :]
    scale = _ld(s + o, gmask[None, :], MASKED).to(tl.float32)
    zero = _ld(z + o, gmask[None, :], MASKED).to(tl.float32)
    return scale, scale * zero


@triton.jit
def load_tile(qs, s, z, p3, p4, rows, g, gmask, G, R: tl.constexpr, MASKED: tl.constexpr):
    words = _load_words(qs, rows, g, gmask, G, 4, MASKED)  # [BN, NG, 4]
    scale, mins = scale_min(s, z, rows, g, gmask, G, R, MASKED)
    return words, words, scale, mins, scale, mins
