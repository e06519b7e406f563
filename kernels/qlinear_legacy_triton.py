"""Triton tile decoders for the 32-element block formats (Q8_0, Q4_0) and the shared consumer.

A *tile decoder* `_tile_<fmt>` dequantizes the weight rows `rows` over the K range
[kt, kt + TILE) of the packed planes (see `localllm.kernels.qlinear`) in groups: each group is
an fp32 tensor `w [BN, A, B]` plus `koff [A, B]`, the in-tile K index of every element (the
planes keep GGUF's nibble order, so a group is a strided set of K positions and x is gathered
to match). Every group goes to `_consume`, which according to MODE
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
def _consume(
    acc,  # [BM, BN] fp32
    w,  # [BN, A, B] fp32 dequantized weights of one group
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
):
    if MODE == 0:
        x = tl.load(xb + kt + koff).to(tl.float32)  # [A, B]
        acc += tl.sum(tl.sum(w * x[None, :, :], axis=2), axis=1)[None, :]
    elif MODE == 1:
        G: tl.constexpr = koff.shape[0] * koff.shape[1]
        k2 = tl.reshape(koff, [G])
        x = tl.load(xb + offs_m[:, None] * stride_xm + kt + k2[None, :], mask=mask_m[:, None], other=0.0)
        w2 = tl.reshape(w, [BN, G]).to(x.dtype)
        acc += tl.dot(x, tl.trans(w2))  # [BM, G] @ [G, BN]
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
    q = tl.load(qs + rows[:, None, None] * K + kt + koff[None, :, :]).to(tl.float32)
    s = tl.load(d + rows[:, None] * (K // 32) + kt // 32 + nb[None, :])
    w = q * s.to(tl.float32)[:, :, None]  # [BN, NB, 32]
    return _consume(acc, w, koff, kt, xb, stride_xm, offs_m, mask_m, wo, mask_n, BN, MODE)


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
    s = s.to(tl.float32)[:, :, None]  # [BN, NB, 1]
    lo = ((byte & 15) - 8).to(tl.float32) * s
    acc = _consume(acc, lo, blk * 32 + i, kt, xb, stride_xm, offs_m, mask_m, wo, mask_n, BN, MODE)
    hi = ((byte >> 4) - 8).to(tl.float32) * s
    return _consume(acc, hi, blk * 32 + 16 + i, kt, xb, stride_xm, offs_m, mask_m, wo, mask_n, BN, MODE)
