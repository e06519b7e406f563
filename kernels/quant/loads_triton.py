"""Triton load helpers over the packed planes (`kernels/quant/planes.py`) shared by the formats'
tile loaders (`q*_triton.py`).

A format's `load_tile` reads the planes of the rows `rows` [BN] over the groups `g` [NG] and
returns `(words, extra, scale0, mins0, scale1, mins1)`: the int32 quant words [BN, NG, W], the
format's extra bits in the same shape (or `words` again), and fp32 per-group scale/min
[BN, NG] for the first and second half of the fields (equal except for Q6_K).
`kernels/linear/gemv_core_triton._consume` decodes and uses them.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _ld(ptr, mask, MASKED: tl.constexpr):
    """Load, masked (other=0) only on the K tail tile."""
    if MASKED:
        v = tl.load(ptr, mask=mask, other=0)
    else:
        v = tl.load(ptr)
    return v


@triton.jit
def _load_words(p, rows, g, gmask, G, W: tl.constexpr, MASKED: tl.constexpr):
    """[BN, NG, W] from a plane with W entries per group (16-byte loads for int32)."""
    w = tl.arange(0, W)
    ptr = p + rows[:, None, None] * (G * W) + (g[:, None] * W + w[None, :])[None, :, :]
    return _ld(ptr, gmask[None, :, None], MASKED)


@triton.jit
def _load_pair(p, rows, g, gmask, G, MASKED: tl.constexpr):
    """Two [BN, NG] from a plane with two entries per group."""
    j = tl.arange(0, 2)
    ptr = p + rows[:, None, None] * (G * 2) + (g[:, None] * 2 + j[None, :])[None, :, :]
    return tl.split(_ld(ptr, gmask[None, :, None], MASKED))


@triton.jit
def _load_reversed(p, rows, g, gmask, G, MASKED: tl.constexpr):
    """[BN, NG] from a plane with one entry per group, stored in reverse group order."""
    return _ld(p + rows[:, None] * G + (G - 1 - g)[None, :], gmask[None, :], MASKED)


@triton.jit
def _load_super(p, rows, g, gmask, G, MASKED: tl.constexpr):
    """[BN, NG] from a plane with one entry per 256-element super-block (8 groups)."""
    return _ld(p + rows[:, None] * (G // 8) + (g // 8)[None, :], gmask[None, :], MASKED)
