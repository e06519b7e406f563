"""AWQ's Triton decode functions (planes: `awq.py`; what each is for: `base.py`): plain
nibbles (`nibbles_triton.py`) run as a format with a min (weight = s u - s z). The scale and
zero point of a 32-element group g are entry g // R of their planes (R = group size / 32);
the functions that index them take R, and `HOOKS_128` (R = 4) / `HOOKS_64` (R = 2) bind it."""

from __future__ import annotations

import triton
import triton.language as tl

from localllm.kernels.quant import dp4a_ops_triton as dq
from localllm.kernels.quant import mm_ops_triton as mq
from localllm.kernels.quant import nibbles_triton as nib
from localllm.kernels.quant import q4_k_triton as q4k
from localllm.kernels.quant.base import TritonHooks
from localllm.kernels.quant.loads_triton import _ld, _load_words


@triton.jit
def scale_min(s, z, rows, g, gmask, G, R: tl.constexpr, MASKED: tl.constexpr):
    """(s, s * z) fp32 [BN, NG] of the groups g of the rows (exact: 11 x 4 bits)."""
    o = rows[:, None] * (G // R) + (g // R)[None, :]
    scale = _ld(s + o, gmask[None, :], MASKED).to(tl.float32)
    zero = _ld(z + o, gmask[None, :], MASKED).to(tl.float32)
    return scale, scale * zero


@triton.jit
def _load_tile(qs, s, z, rows, g, gmask, G, R: tl.constexpr, MASKED: tl.constexpr):
    words = _load_words(qs, rows, g, gmask, G, 4, MASKED)  # [BN, NG, 4]
    scale, mins = scale_min(s, z, rows, g, gmask, G, R, MASKED)
    return words, words, scale, mins, scale, mins


@triton.jit
def _dp4a_load(p0, p1, p2, rows, g, gmask, G, R: tl.constexpr):
    """s fp16, z uint8 [N, G / R]."""
    r2, g2, m2, m3, o4, osb = dq.index(rows, g, gmask, G)
    wd = dq.ld(p0 + o4, m3)
    oq = r2 * (G // R) + g2 // R
    s0 = dq.ld(p1 + oq, m2).to(tl.float32)
    m0 = s0 * dq.ld(p2 + oq, m2).to(tl.float32)
    return wd, wd, s0, m0, s0, m0


@triton.jit
def _mm_ptrs(p0, p1, p2, rows, g_lo, G, NG: tl.constexpr, R: tl.constexpr):
    """qs int32 [N, 4G], s fp16 / z uint8 [N, G / R]."""
    r2, g2, o4, o1, osb = mq.index(rows, g_lo, G, NG)
    oq = r2 * (G // R) + g2 // R
    wp = p0 + o4
    sp = p1 + oq
    mp = p2 + oq
    return wp, wp, sp, sp, mp


@triton.jit
def mm_load(wp, hp, sp, dp, mp):
    wd = mq.load_words(wp, sp, 4)  # [BN, NG, 4] int32
    s = tl.load(sp)  # [BN, NG]
    m = tl.load(mp)  # the zero points
    return wd, wd, s, s, m


@triton.jit
def _mm_advance(wp, hp, sp, dp, mp, NG: tl.constexpr, R: tl.constexpr):
    return wp + NG * 4, hp + NG * 4, sp + NG // R, dp + NG // R, mp + NG // R


@triton.jit
def mm_deq(wd, hi, s, d, m, DT: tl.constexpr, EMU: tl.constexpr):
    """(u - z) s = u s - s z (Q4_K's packed-fp16 PTX: no zero point, a shift)."""
    sc0 = s.to(tl.float32)[:, :, None]
    mn0 = sc0 * m.to(tl.float32)[:, :, None]
    return mq.deq_nibbles(nib.quant, wd, hi, sc0, mn0, sc0, mn0, DT, EMU, q4k.MM_ASM, True)


# the group-size-bound functions (R = 4: groups of 128, R = 2: groups of 64)
@triton.jit
def load_tile_128(qs, s, z, p3, p4, rows, g, gmask, G, MASKED: tl.constexpr):
    return _load_tile(qs, s, z, rows, g, gmask, G, 4, MASKED)


@triton.jit
def load_tile_64(qs, s, z, p3, p4, rows, g, gmask, G, MASKED: tl.constexpr):
    return _load_tile(qs, s, z, rows, g, gmask, G, 2, MASKED)


@triton.jit
def dp4a_load_128(p0, p1, p2, p3, p4, rows, g, gmask, G):
    return _dp4a_load(p0, p1, p2, rows, g, gmask, G, 4)


@triton.jit
def dp4a_load_64(p0, p1, p2, p3, p4, rows, g, gmask, G):
    return _dp4a_load(p0, p1, p2, rows, g, gmask, G, 2)


@triton.jit
def mm_ptrs_128(p0, p1, p2, p3, p4, rows, g_lo, G, NG: tl.constexpr):
    return _mm_ptrs(p0, p1, p2, rows, g_lo, G, NG, 4)


@triton.jit
def mm_ptrs_64(p0, p1, p2, p3, p4, rows, g_lo, G, NG: tl.constexpr):
    return _mm_ptrs(p0, p1, p2, rows, g_lo, G, NG, 2)


@triton.jit
def mm_advance_128(wp, hp, sp, dp, mp, NG: tl.constexpr):
    return _mm_advance(wp, hp, sp, dp, mp, NG, 4)


@triton.jit
def mm_advance_64(wp, hp, sp, dp, mp, NG: tl.constexpr):
    return _mm_advance(wp, hp, sp, dp, mp, NG, 2)


# dp4a: d dx S - m X with d = s, m = s z (Q4_K's formula)
HOOKS_128 = TritonHooks(
    load_tile=load_tile_128, field=nib.field, dp4a_load=dp4a_load_128,
    dp4a_group=q4k.dp4a_group, mm_ptrs=mm_ptrs_128, mm_load=mm_load,
    mm_advance=mm_advance_128, mm_deq=mm_deq,
)  # fmt: skip
HOOKS_64 = TritonHooks(
    load_tile=load_tile_64, field=nib.field, dp4a_load=dp4a_load_64,
    dp4a_group=q4k.dp4a_group, mm_ptrs=mm_ptrs_64, mm_load=mm_load,
    mm_advance=mm_advance_64, mm_deq=mm_deq,
)  # fmt: skip
