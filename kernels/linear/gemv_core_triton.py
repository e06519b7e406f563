"""Shared Triton pieces of qlinear: bit-field decoding and the per-mode consumer of a tile.

A tile is `NG` groups of W * F elements (along K) of `BN` weight rows, held as int32 words
`[BN, NG, W]` (layout in `kernels/quant/planes.py`), loaded by the format's `load_tile` (LOAD):
field s of word w of group g is element `W F g + W s + w`. The format's `field` (FIELD)
decodes a field without int->float conversion: its bits are moved to the top of a float32
mantissa with exponent 0, giving `v = 1 + u / QB` (u the unsigned quant, QB = 2^bits) in one
shift and one mask. With a format's scale and min per group,
    weight = scale * q - mins,  q = QB * v - QC  (exact; QC = QB + the format's zero point)
so, with P = sum(v * x) and X = sum(x) over a group,
    sum(weight * x) = (scale * QB) * P - (scale * QC + mins) * X
MODE_VEC (GEMV) therefore spends one FMA per weight and applies the scales once per group;
MODE_DOT rebuilds fp16 weights for `tl.dot`. (Dequantizing for the prefill's cuBLAS GEMMs is
`dequant_triton`'s, on the fused GEMM's decode functions.)
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from localllm.kernels.quant.loads_triton import _ld

MODE_VEC = 0
MODE_DOT = 1


@triton.jit
def _load_tile(LOAD: tl.constexpr, p0, p1, p2, p3, p4, rows, g0, g_hi, G, NG: tl.constexpr):
    """Planes of groups [g0, g0 + NG) of the rows, masked to g < g_hi, by the format's
    `load_tile` (LOAD): (words, extra, scale0, mins0, scale1, mins1), see `quant/base.py`."""
    g = g0 + tl.arange(0, NG)  # [NG]
    gmask = g < g_hi
    return LOAD(p0, p1, p2, p3, p4, rows, g, gmask, G, True)


def plane_args(planes: list[torch.Tensor]) -> list[torch.Tensor]:
    """The five plane pointers the qlinear kernels take (formats with fewer planes repeat the
    first one in the unused slots)."""
    return list(planes) + [planes[0]] * (5 - len(planes))


@triton.jit
def _write_out(res, optrs, omask, bias_ptr, offs_n, mask_n, pid_k, HAS_BIAS: tl.constexpr,
               ATOMIC: tl.constexpr):  # fmt: skip
    """The epilogue of the qlinear kernels: res [.., BN] (+ bias [BN], added by the first K
    split only) stored to optrs, or atomically added into zeroed fp32 when K is split."""
    if HAS_BIAS:
        b = tl.load(bias_ptr + offs_n, mask=mask_n, other=0.0).to(tl.float32)
        res += tl.where(pid_k == 0, b, 0.0)
    if ATOMIC:
        tl.atomic_add(optrs, res, mask=omask)
    else:
        tl.store(optrs, res.to(optrs.dtype.element_ty), mask=omask)


@triton.jit
def _vec(acc, FIELD: tl.constexpr, words, extra, sc0, mn0, sc1, mn1, kidx, gmask, xb,
         W: tl.constexpr, F: tl.constexpr, QB: tl.constexpr, QC: tl.constexpr,
         HAS_MIN: tl.constexpr, TWO: tl.constexpr, MASKED: tl.constexpr):  # fmt: skip
    """acc [BN, NG] += per-group partial dot products with one x row. TWO (a format with
    `two_scales`): fields 0..F/2-1 use (sc0, mn0), the rest (sc1, mn1)."""
    p0 = tl.zeros(words.shape, dtype=tl.float32)  # [BN, NG, W]
    x0 = tl.zeros(kidx.shape, dtype=tl.float32)  # [NG, W]
    p1 = p0
    x1 = x0
    for s in tl.static_range(F):
        xs = _ld(xb + kidx + s * W, gmask[:, None], MASKED).to(tl.float32)  # [NG, W]
        v = FIELD(words, extra, s)
        if TWO and s >= F // 2:
            p1 += v * xs[None, :, :]
            x1 += xs
        else:
            p0 += v * xs[None, :, :]
            x0 += xs
    b0 = sc0 * QC
    if HAS_MIN:
        b0 += mn0
    acc += (sc0 * QB) * tl.sum(p0, axis=2) - b0 * tl.sum(x0, axis=1)[None, :]
    if TWO:
        acc += (sc1 * QB) * tl.sum(p1, axis=2) - (sc1 * QC) * tl.sum(x1, axis=1)[None, :]
    return acc


@triton.jit
def _weights(FIELD: tl.constexpr, words, extra, sc0, mn0, sc1, mn1, S: tl.constexpr,
             F: tl.constexpr, QB: tl.constexpr, QC: tl.constexpr, HAS_MIN: tl.constexpr):  # fmt: skip
    """fp32 weights [BN, NG, W] of field S, computed like the torch reference."""
    q = FIELD(words, extra, S) * QB - QC  # exact small integers
    if S < F // 2:
        w = q * sc0[:, :, None]
        if HAS_MIN:
            w -= mn0[:, :, None]
    else:
        w = q * sc1[:, :, None]
        if HAS_MIN:
            w -= mn1[:, :, None]
    return w


@triton.jit
def _consume(acc, FIELD: tl.constexpr, words, extra, sc0, mn0, sc1, mn1, g, g_hi,
             xb, stride_xm, offs_m, mask_m,
             MODE: tl.constexpr, BN: tl.constexpr, NG: tl.constexpr, W: tl.constexpr,
             F: tl.constexpr, QB: tl.constexpr, QC: tl.constexpr, HAS_MIN: tl.constexpr,
             TWO: tl.constexpr, MASKED: tl.constexpr):  # fmt: skip
    """Feed one decoded tile to the GEMV (MODE_VEC) or tl.dot (MODE_DOT)."""
    kidx = g[:, None] * (W * F) + tl.arange(0, W)[None, :]  # [NG, W] element of field 0
    gmask = g < g_hi  # [NG]
    if MODE == 0:
        acc = _vec(acc, FIELD, words, extra, sc0, mn0, sc1, mn1, kidx, gmask, xb, W, F, QB, QC,
                   HAS_MIN, TWO, MASKED)  # fmt: skip
    else:
        for s in tl.static_range(F):
            w = _weights(FIELD, words, extra, sc0, mn0, sc1, mn1, s, F, QB, QC, HAS_MIN)
            k2 = tl.reshape(kidx + s * W, [NG * W])  # [NG * W]
            xmask = mask_m[:, None]
            if MASKED:
                xmask = xmask & (k2 < g_hi * (W * F))[None, :]
            xp = xb + offs_m[:, None] * stride_xm + k2[None, :]
            x = tl.load(xp, mask=xmask, other=0.0)  # [BM, NG * W]
            wt = tl.reshape(w, [BN, NG * W]).to(x.dtype)
            acc += tl.dot(x, tl.trans(wt))  # [BM, NG * W] @ [NG * W, BN]
    return acc
