"""Triton tile loaders for the 256-element super-block formats (Q4_K, Q5_K, Q6_K).

Same contract as `qlinear_legacy_triton`. The 6-bit Q4_K/Q5_K scales and mins were decoded
to bytes at load (`sm`, one int16 per group), so a group's scale is one 2-byte load here.
"""

from __future__ import annotations

import triton
import triton.language as tl

from localllm.kernels.qlinear_legacy_triton import _load_pair, _load_super, _load_words


@triton.jit
def _k_affine(sm, d, dmin, rows, g, gmask, G, MASKED: tl.constexpr):
    """(d * scale, dmin * min) fp32 [BN, NG] of Q4_K/Q5_K groups."""
    scale, mins = _load_pair(sm, rows, g, gmask, G, MASKED)  # uint8 [BN, NG] each
    dd = _load_super(d, rows, g, gmask, G, MASKED).to(tl.float32)
    dm = _load_super(dmin, rows, g, gmask, G, MASKED).to(tl.float32)
    return dd * scale.to(tl.float32), dm * mins.to(tl.float32)


@triton.jit
def _load_q4_k(qs, sm, d, dmin, p4, rows, g, gmask, G, MASKED: tl.constexpr):
    words = _load_words(qs, rows, g, gmask, G, 4, MASKED)  # [BN, NG, 4]
    scale, mins = _k_affine(sm, d, dmin, rows, g, gmask, G, MASKED)
    return words, words, scale, mins, scale, mins


@triton.jit
def _load_q5_k(qs, sm, d, dmin, qh, rows, g, gmask, G, MASKED: tl.constexpr):
    words = _load_words(qs, rows, g, gmask, G, 4, MASKED)  # [BN, NG, 4]
    high = _load_words(qh, rows, g, gmask, G, 4, MASKED).to(tl.int32)  # bytes [BN, NG, 4]
    scale, mins = _k_affine(sm, d, dmin, rows, g, gmask, G, MASKED)
    return words, high, scale, mins, scale, mins


@triton.jit
def _load_q6_k(ql, qh, sc, d, p4, rows, g, gmask, G, MASKED: tl.constexpr):
    words = _load_words(ql, rows, g, gmask, G, 4, MASKED)  # [BN, NG, 4]
    high = _load_words(qh, rows, g, gmask, G, 4, MASKED).to(tl.int32)  # int16 [BN, NG, 4]
    sc0, sc1 = _load_pair(sc, rows, g, gmask, G, MASKED)  # int8 [BN, NG]: elements 0..15, 16..31
    dd = _load_super(d, rows, g, gmask, G, MASKED).to(tl.float32)  # [BN, NG]
    s0 = dd * sc0.to(tl.float32)
    s1 = dd * sc1.to(tl.float32)
    return words, high, s0, s0, s1, s1
