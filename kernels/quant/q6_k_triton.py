"""Q6_K's Triton tile loader (planes: `q6_k.py`): two scales per group (16 elements each)."""

from __future__ import annotations

import triton
import triton.language as tl

from localllm.kernels.quant.loads_triton import _load_pair, _load_super, _load_words


@triton.jit
def load_tile(ql, qh, sc, d, p4, rows, g, gmask, G, MASKED: tl.constexpr):
    words = _load_words(ql, rows, g, gmask, G, 4, MASKED)  # [BN, NG, 4]
    high = _load_words(qh, rows, g, gmask, G, 4, MASKED).to(tl.int32)  # int16 [BN, NG, 4]
    sc0, sc1 = _load_pair(sc, rows, g, gmask, G, MASKED)  # int8 [BN, NG]: elements 0..15, 16..31
    dd = _load_super(d, rows, g, gmask, G, MASKED).to(tl.float32)  # [BN, NG]
    s0 = dd * sc0.to(tl.float32)
    s1 = dd * sc1.to(tl.float32)
    return words, high, s0, s0, s1, s1
