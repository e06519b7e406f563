"""Q8_0's Triton tile loader (planes: `q8_0.py`)."""

from __future__ import annotations

import triton
import triton.language as tl

from localllm.kernels.quant.loads_triton import _ld, _load_words

SIGN_FLIP = tl.constexpr(-0x7F7F7F80)  # int32 0x80808080: int8 q -> unsigned q + 128 per byte


@triton.jit
def load_tile(qs, d, p2, p3, p4, rows, g, gmask, G, MASKED: tl.constexpr):
    """16-element groups (4 words of 4 bytes), one scale per 2 groups."""
    words = _load_words(qs, rows, g, gmask, G, 4, MASKED) ^ SIGN_FLIP  # [BN, NG, 4]
    dptr = d + rows[:, None] * (G // 2) + (g // 2)[None, :]
    scale = _ld(dptr, gmask[None, :], MASKED).to(tl.float32)  # [BN, NG]
    return words, words, scale, scale, scale, scale
