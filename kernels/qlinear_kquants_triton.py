"""Triton tile decoders for the 256-element super-block formats (Q4_K, Q5_K, Q6_K).

Same contract as `qlinear_legacy_triton`: decode the rows `rows` over [kt, kt + TILE) from the
packed planes (layouts in `localllm.kernels.qlinear`) and hand each group to `_consume`.
TILE is a multiple of 256. The 6-bit scales of Q4_K/Q5_K stay packed (12 bytes per
super-block, as in the file) and are decoded here, so the kernels read exactly the GGUF bytes.
"""

from __future__ import annotations

import triton
import triton.language as tl
from localllm.kernels.qlinear_legacy_triton import _consume, _u2f


@triton.jit
def _kscale(sc, rows, sb, j, K):
    """Scale and min (int32 [BN, C]) of sub-block j [C] of super-block sb [C]."""
    base = sc + rows[:, None] * (K // 256 * 12) + (sb * 12)[None, :]  # [BN, C]
    b0 = tl.load(base + (j + 4)[None, :]).to(tl.int32)
    b1 = tl.load(base + (j % 4)[None, :]).to(tl.int32)
    b2 = tl.load(base + (j % 4 + 4)[None, :]).to(tl.int32)
    low = (j < 4)[None, :]
    scale = tl.where(low, b1 & 63, (b0 & 15) | ((b1 >> 6) << 4))
    mins = tl.where(low, b2 & 63, (b0 >> 4) | ((b2 >> 6) << 4))
    return scale, mins


@triton.jit
def _k_affine(sc, dm, rows, sb, j, K):
    """(d * scale, dmin * min) as fp32 [BN, C] for sub-block j [C] of super-block sb [C]."""
    scale, mins = _kscale(sc, rows, sb, j, K)
    dptr = dm + rows[:, None] * (K // 256 * 2) + (sb * 2)[None, :]  # [BN, C]
    d = tl.load(dptr).to(tl.float32)
    dmin = tl.load(dptr + 1).to(tl.float32)
    return d * scale.to(tl.float32), dmin * mins.to(tl.float32)


@triton.jit
def _tile_q45_k(
    acc, qs, sc, dm, qh, rows, kt, K,
    xb, stride_xm, offs_m, mask_m, wo, mask_n,
    BN: tl.constexpr, TILE: tl.constexpr, MODE: tl.constexpr, HIGH: tl.constexpr,
):  # fmt: skip
    """Q4_K (HIGH=False) and Q5_K (HIGH=True): 64-element chunks c of 32 bytes, low nibbles
    are sub-block 2c (elements 64c + i), high nibbles sub-block 2c + 1 (64c + 32 + i)."""
    cc = tl.arange(0, TILE // 64)  # [C] chunk in tile
    c = cc[:, None]  # [C, 1]
    i = tl.arange(0, 32)[None, :]  # [1, 32]
    byte = tl.load(qs + rows[:, None, None] * (K // 2) + kt // 2 + (c * 32 + i)[None, :, :])
    byte = byte.to(tl.int32)  # [BN, C, 32]
    lo = byte & 15
    hi = byte >> 4
    sb = kt // 256 + cc // 4  # [C] super-block
    if HIGH:
        h = tl.load(qh + rows[:, None, None] * (K // 8) + (sb[:, None] * 32 + i)[None, :, :])
        h = h.to(tl.int32)  # [BN, C, 32]
        shift = ((cc % 4) * 2)[None, :, None]  # [1, C, 1] sub-block of the low nibbles
        lo = lo | (((h >> shift) & 1) << 4)
        hi = hi | (((h >> (shift + 1)) & 1) << 4)
    j = (cc % 4) * 2  # [C] sub-block of the low nibbles
    a, m = _k_affine(sc, dm, rows, sb, j, K)
    acc = _consume(acc, _u2f(lo, 0.0), a, m, c * 64 + i, kt, xb, stride_xm, offs_m, mask_m, wo,
                   mask_n, BN, MODE, True)  # fmt: skip
    a, m = _k_affine(sc, dm, rows, sb, j + 1, K)
    return _consume(acc, _u2f(hi, 0.0), a, m, c * 64 + 32 + i, kt, xb, stride_xm, offs_m, mask_m,
                    wo, mask_n, BN, MODE, True)  # fmt: skip


@triton.jit
def _tile_q4_k(
    acc, qs, sc, dm, p3, rows, kt, K,
    xb, stride_xm, offs_m, mask_m, wo, mask_n,
    BN: tl.constexpr, TILE: tl.constexpr, MODE: tl.constexpr,
):  # fmt: skip
    return _tile_q45_k(acc, qs, sc, dm, qs, rows, kt, K, xb, stride_xm, offs_m, mask_m, wo,
                       mask_n, BN, TILE, MODE, False)  # fmt: skip


@triton.jit
def _tile_q5_k(
    acc, qs, sc, dm, qh, rows, kt, K,
    xb, stride_xm, offs_m, mask_m, wo, mask_n,
    BN: tl.constexpr, TILE: tl.constexpr, MODE: tl.constexpr,
):  # fmt: skip
    return _tile_q45_k(acc, qs, sc, dm, qh, rows, kt, K, xb, stride_xm, offs_m, mask_m, wo,
                       mask_n, BN, TILE, MODE, True)  # fmt: skip


@triton.jit
def _tile_q6_k(
    acc, ql, qh, sc, d, rows, kt, K,
    xb, stride_xm, offs_m, mask_m, wo, mask_n,
    BN: tl.constexpr, TILE: tl.constexpr, MODE: tl.constexpr,
):  # fmt: skip
    """Q6_K in units u of 16 elements: half hh = u // 2 (128 elements), part p = u % 2.
    Group s (0..3) holds elements 128*hh + 32*s + 16*p + i with scale 8*hh + 2*s + p."""
    uu = tl.arange(0, TILE // 64)  # [U]
    u = uu[:, None]  # [U, 1]
    i = tl.arange(0, 16)[None, :]  # [1, 16]
    b = (u // 2) * 64 + (u % 2) * 16 + i  # [U, 16] ql byte of groups 0 and 2 (in tile)
    qrow = ql + rows[:, None, None] * (K // 2) + kt // 2
    ql_a = tl.load(qrow + b[None, :, :]).to(tl.int32)  # [BN, U, 16]
    ql_b = tl.load(qrow + (b + 32)[None, :, :]).to(tl.int32)
    hb = (u // 2) * 32 + (u % 2) * 16 + i  # [U, 16]
    h = tl.load(qh + rows[:, None, None] * (K // 4) + kt // 4 + hb[None, :, :]).to(tl.int32)
    dd = tl.load(d + rows[:, None] * (K // 256) + kt // 256 + (uu // 4)[None, :]).to(tl.float32)
    srow = sc + rows[:, None] * (K // 16) + kt // 16 + ((uu // 2) * 8 + uu % 2)[None, :]  # [BN, U]
    kbase = (u // 2) * 128 + (u % 2) * 16 + i  # [U, 16]
    for s in tl.static_range(4):
        if s % 2 == 0:
            src = ql_a
        else:
            src = ql_b
        q = ((src >> (4 * (s // 2))) & 15) | (((h >> (2 * s)) & 3) << 4)
        scale = dd * tl.load(srow + 2 * s).to(tl.float32)  # [BN, U]
        acc = _consume(acc, _u2f(q, 32.0), scale, scale, kbase + 32 * s, kt, xb, stride_xm,
                       offs_m, mask_m, wo, mask_n, BN, MODE, False)  # fmt: skip
    return acc
