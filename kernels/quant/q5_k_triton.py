"""Q5_K's Triton tile loader (planes: `q5_k.py`)."""

from __future__ import annotations

import triton
import triton.language as tl

from localllm.kernels.quant.loads_triton import _load_words
from localllm.kernels.quant.q4_k_triton import k_affine


@triton.jit
def load_tile(qs, sm, d, dmin, qh, rows, g, gmask, G, MASKED: tl.constexpr):
    words = _load_words(qs, rows, g, gmask, G, 4, MASKED)  # [BN, NG, 4]
    high = _load_words(qh, rows, g, gmask, G, 4, MASKED).to(tl.int32)  # bytes [BN, NG, 4]
    scale, mins = k_affine(sm, d, dmin, rows, g, gmask, G, MASKED)
    return words, high, scale, mins, scale, mins
