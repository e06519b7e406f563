"""Q4_K's Triton tile loader (planes: `q4_k.py`); `k_affine` is shared with Q5_K. The
6-bit scales and mins were decoded to bytes at load (`sm`), so a group's scale is one 2-byte
load here."""

from __future__ import annotations

import triton
import triton.language as tl

from localllm.kernels.quant.loads_triton import _load_pair, _load_super, _load_words


@triton.jit
def k_affine(sm, d, dmin, rows, g, gmask, G, MASKED: tl.constexpr):
    """(d * scale, dmin * min) fp32 [BN, NG] of Q4_K/Q5_K groups."""
    scale, mins = _load_pair(sm, rows, g, gmask, G, MASKED)  # uint8 [BN, NG] each
    dd = _load_super(d, rows, g, gmask, G, MASKED).to(tl.float32)
    dm = _load_super(dmin, rows, g, gmask, G, MASKED).to(tl.float32)
    return dd * scale.to(tl.float32), dm * mins.to(tl.float32)


@triton.jit
def load_tile(qs, sm, d, dmin, p4, rows, g, gmask, G, MASKED: tl.constexpr):
    words = _load_words(qs, rows, g, gmask, G, 4, MASKED)  # [BN, NG, 4]
    scale, mins = k_affine(sm, d, dmin, rows, g, gmask, G, MASKED)
    return words, words, scale, mins, scale, mins
