"""Q4_0's Triton tile loader (planes: `q4_0.py`)."""

from __future__ import annotations

import triton
import triton.language as tl

from localllm.kernels.quant.loads_triton import _load_reversed, _load_words


@triton.jit
def load_tile(qs, d, p2, p3, p4, rows, g, gmask, G, MASKED: tl.constexpr):
    words = _load_words(qs, rows, g, gmask, G, 4, MASKED)  # [BN, NG, 4]
    scale = _load_reversed(d, rows, g, gmask, G, MASKED).to(tl.float32)  # [BN, NG]
    return words, words, scale, scale, scale, scale
