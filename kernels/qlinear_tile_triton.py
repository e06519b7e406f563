"""The per-format tile loader of `qlinear_triton`'s kernel ([BN, NG] tiles; the dp4a GEMV loads
its own [NG, BN] tiles, see `qlinear_dp4a_triton._load_step`).

FMT codes: 0 q8_0, 1 q4_0, 2 q4_k, 3 q5_k, 4 q6_k (the planes of `qlinear_pack`, in the
argument order of `qlinear_triton._FORMATS`).
"""

from __future__ import annotations

import triton
import triton.language as tl

from localllm.kernels.qlinear_kquants_triton import _load_q4_k, _load_q5_k, _load_q6_k
from localllm.kernels.qlinear_legacy_triton import _load_q4_0, _load_q8_0


@triton.jit
def _load_tile(FMT: tl.constexpr, p0, p1, p2, p3, p4, rows, g0, g_hi, G, NG: tl.constexpr):
    """Planes of groups [g0, g0 + NG) of the rows, masked to g < g_hi (host dispatch: _FORMATS):
    (words, extra, scale0, mins0, scale1, mins1), see `qlinear_legacy_triton`."""
    g = g0 + tl.arange(0, NG)  # [NG]
    gmask = g < g_hi
    if FMT == 0:
        tile = _load_q8_0(p0, p1, p2, p3, p4, rows, g, gmask, G, True)
    elif FMT == 1:
        tile = _load_q4_0(p0, p1, p2, p3, p4, rows, g, gmask, G, True)
    elif FMT == 2:
        tile = _load_q4_k(p0, p1, p2, p3, p4, rows, g, gmask, G, True)
    elif FMT == 3:
        tile = _load_q5_k(p0, p1, p2, p3, p4, rows, g, gmask, G, True)
    else:
        tile = _load_q6_k(p0, p1, p2, p3, p4, rows, g, gmask, G, True)
    return tile
