"""Triton tile loaders for the 32-element block formats (Q8_0, Q4_0) and shared load helpers.

A loader reads the packed planes (`localllm.kernels.qlinear_pack`) of the rows `rows` [BN]
over the groups `g` [NG] and returns `(words, extra, scale0, mins0, scale1, mins1)`: the
int32 quant words [BN, NG, W], the format's extra bits in the same shape (or `words` again),
and fp32 per-group scale/min [BN, NG] for the first and second half of the fields (equal
except for Q6_K). `localllm.kernels.qlinear_core_triton._consume` decodes and uses them. A group is 32
elements (16 for Q8_0).
"""

from __future__ import annotations

import triton
import triton.language as tl

from localllm.kernels.qlinear_core_triton import _ld

SIGN_FLIP = tl.constexpr(-0x7F7F7F80)  # int32 0x80808080: int8 q -> unsigned q + 128 per byte


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


@triton.jit
def _load_q8_0(qs, d, p2, p3, p4, rows, g, gmask, G, MASKED: tl.constexpr):
    """16-element groups (4 words of 4 bytes), one scale per 2 groups."""
    words = _load_words(qs, rows, g, gmask, G, 4, MASKED) ^ SIGN_FLIP  # [BN, NG, 4]
    dptr = d + rows[:, None] * (G // 2) + (g // 2)[None, :]
    scale = _ld(dptr, gmask[None, :], MASKED).to(tl.float32)  # [BN, NG]
    return words, words, scale, scale, scale, scale


@triton.jit
def _load_q4_0(qs, d, p2, p3, p4, rows, g, gmask, G, MASKED: tl.constexpr):
    words = _load_words(qs, rows, g, gmask, G, 4, MASKED)  # [BN, NG, 4]
    scale = _load_reversed(d, rows, g, gmask, G, MASKED).to(tl.float32)  # [BN, NG]
    return words, words, scale, scale, scale, scale
