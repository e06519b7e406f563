"""Triton tile decoders for the 32-element block formats (Q8_0, Q4_0) and the shared consumer.

A *tile decoder* `_tile_<fmt>` decodes the weight rows `rows` over the K range
[kt, kt + TILE) of the packed planes (see `localllm.kernels.qlinear`) in groups: each group is
`q [BN, A, B]` (quant values as fp32), `scale`/`mins [BN, A]` per block (weight =
scale * q - mins) and `koff [A, B]`, the in-tile K index of every element (the planes keep
GGUF's nibble order, so a group is a strided set of K positions and x is gathered to match). Every group goes to `_consume`, which according to MODE
  MODE_VEC   accumulates a GEMV row: acc [1, BN] += sum_k w * x          (T == 1)
  MODE_DOT   accumulates a tensor-core product: acc [BM, BN] += x @ w^T   (skinny GEMM / GEMM)
  MODE_STORE writes the dequantized tile to a dense [N, K] workspace     (dequant + cuBLAS)
so each format is written once and serves all three paths.
"""

from __future__ import annotations

import triton
import triton.language as tl

MODE_VEC = 0
MODE_DOT = 1
MODE_STORE = 2


@triton.jit
def _u2f(v, offset: tl.constexpr):
    """int32 v in [0, 2^23) -> float32 v - offset, exactly: OR into the mantissa of 2^23 and
    subtract, two full-rate ops instead of the quarter-rate int->float conversion."""
    return (v | 0x4B000000).to(tl.float32, bitcast=True) - (8388608.0 + offset)


@triton.jit
def _consume(
    acc,  # [BM, BN] fp32
    q,  # [BN, A, B] fp32 quant values of one group (weight = scale * q - mins)
    scale,  # [BN, A] fp32 per (row, block)
    mins,  # [BN, A] fp32 (only read when HAS_MIN)
    koff,  # [A, B] int32 in-tile K index of each element
    kt,  # first K index of the tile
    xb,  # x pointer of the first row of this program's M block
    stride_xm,
    offs_m,  # [BM] row indices relative to xb
    mask_m,  # [BM]
    wo,  # [BN] pointers to the workspace rows (MODE_STORE only)
    mask_n,  # [BN]
    BN: tl.constexpr,
    MODE: tl.constexpr,
    HAS_MIN: tl.constexpr,
):
    if MODE == 0:  # scales factor out of the block sums: one FMA per weight
        x = tl.load(xb + kt + koff).to(tl.float32)  # [A, B]
        part = tl.sum(q * x[None, :, :], axis=2) * scale  # [BN, A]
        if HAS_MIN:
            part -= mins * tl.sum(x, axis=1)[None, :]
        acc += tl.sum(part, axis=1)[None, :]
    else:
        w = q * scale[:, :, None]
        if HAS_MIN:
            w -= mins[:, :, None]
        if MODE == 1:
            G: tl.constexpr = koff.shape[0] * koff.shape[1]
            k2 = tl.reshape(koff, [G])
            xp = xb + offs_m[:, None] * stride_xm + kt + k2[None, :]
            x = tl.load(xp, mask=mask_m[:, None], other=0.0)  # [BM, G]
            acc += tl.dot(x, tl.trans(tl.reshape(w, [BN, G]).to(x.dtype)))  # [BM, G] @ [G, BN]
        else:
            ptrs = wo[:, None, None] + kt + koff[None, :, :]
            tl.store(ptrs, w.to(wo.dtype.element_ty), mask=mask_n[:, None, None])
    return acc


@triton.jit
def _tile_q8_0(
    acc, qs, d, p2, p3, rows, kt, K,
    xb, stride_xm, offs_m, mask_m, wo, mask_n,
    BN: tl.constexpr, TILE: tl.constexpr, MODE: tl.constexpr,
):  # fmt: skip
    nb = tl.arange(0, TILE // 32)  # [NB]
    blk = nb[:, None]
    koff = blk * 32 + tl.arange(0, 32)[None, :]  # [NB, 32]
    q = tl.load(qs + rows[:, None, None] * K + kt + koff[None, :, :])  # int8 [BN, NB, 32]
    q = _u2f(q.to(tl.uint8, bitcast=True).to(tl.int32) ^ 128, 128.0)
    s = tl.load(d + rows[:, None] * (K // 32) + kt // 32 + nb[None, :]).to(tl.float32)
    return _consume(acc, q, s, s, koff, kt, xb, stride_xm, offs_m, mask_m, wo, mask_n, BN, MODE,
                    False)  # fmt: skip


@triton.jit
def _tile_q4_0(
    acc, qs, d, p2, p3, rows, kt, K,
    xb, stride_xm, offs_m, mask_m, wo, mask_n,
    BN: tl.constexpr, TILE: tl.constexpr, MODE: tl.constexpr,
):  # fmt: skip
    nb = tl.arange(0, TILE // 32)  # [NB]
    blk = nb[:, None]
    i = tl.arange(0, 16)[None, :]  # [1, 16]
    byte = tl.load(qs + rows[:, None, None] * (K // 2) + kt // 2 + (blk * 16 + i)[None, :, :])
    byte = byte.to(tl.int32)  # [BN, NB, 16]
    s = tl.load(d + rows[:, None] * (K // 32) + kt // 32 + nb[None, :])
    s = s.to(tl.float32)  # [BN, NB]
    acc = _consume(acc, _u2f(byte & 15, 8.0), s, s, blk * 32 + i, kt, xb, stride_xm, offs_m,
                   mask_m, wo, mask_n, BN, MODE, False)  # fmt: skip
    return _consume(acc, _u2f(byte >> 4, 8.0), s, s, blk * 32 + 16 + i, kt, xb, stride_xm,
                    offs_m, mask_m, wo, mask_n, BN, MODE, False)  # fmt: skip
