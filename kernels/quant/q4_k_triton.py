"""Q4_K's Triton decode functions (planes: `q4_k.py`; what each is for: `base.py`): plain
nibbles (`nibbles_triton.py`), weight = d sc u - dmin m. The 6-bit scales and mins were decoded
to bytes at load (`sm`), so a group's scale is one 2-byte load. The `k_*` pieces are shared
with Q5_K."""

from __future__ import annotations

import triton
import triton.language as tl

from localllm.kernels.quant import dp4a_ops_triton as dq
from localllm.kernels.quant import mm_ops_triton as mq
from localllm.kernels.quant import nibbles_triton as nib
from localllm.kernels.quant.base import TritonHooks
from localllm.kernels.quant.h2_asm import deq_asm
from localllm.kernels.quant.loads_triton import _load_pair, _load_super, _load_words

MM_ASM = tl.constexpr(deq_asm(0, ""))


@triton.jit
def k_affine(sm, d, dmin, rows, g, gmask, G, MASKED: tl.constexpr):
    """(d * scale, dmin * min) fp32 [BN, NG] of Q4_K/Q5_K groups."""
    scale, mins = _load_pair(sm, rows, g, gmask, G, MASKED)  # uint8 [BN, NG] each
    dd = _load_super(d, rows, g, gmask, G, MASKED).to(tl.float32)
    dm = _load_super(dmin, rows, g, gmask, G, MASKED).to(tl.float32)
    return dd * scale.to(tl.float32), dm * mins.to(tl.float32)


@triton.jit
def load_tile(qs, sm, d, dmin, p4, rows, g, gmask, G, MASKED: tl.constexpr):
    words = _load_words(qs, rows, g, gmask, G, 4, MASKED)  # [BN, NG, 4]
    scale, mins = k_affine(sm, d, dmin, rows, g, gmask, G, MASKED)
    return words, words, scale, mins, scale, mins


@triton.jit
def k_dp4a_affine(sm, d, dmin, r2, g2, m2, m3, osb, G):
    """(d sc, dmin m) [NG, BN]: (scale, min) bytes [N, 2G], d / dmin [N, G / 8]."""
    sc, mn = dq.pair(sm, r2, g2, m3, G)
    dd = dq.ld(d + osb, m2).to(tl.float32)
    dm = dq.ld(dmin + osb, m2).to(tl.float32)
    return dd * sc.to(tl.float32), dm * mn.to(tl.float32)


@triton.jit
def dp4a_load(p0, p1, p2, p3, p4, rows, g, gmask, G):
    r2, g2, m2, m3, o4, osb = dq.index(rows, g, gmask, G)
    wd = dq.ld(p0 + o4, m3)
    s0, m0 = k_dp4a_affine(p1, p2, p3, r2, g2, m2, m3, osb, G)
    return wd, wd, s0, m0, s0, m0


@triton.jit
def dp4a_group(acc, words, extra, s0, m0, s1, m1, xw, xs, g, gmask, EMU: tl.constexpr):
    """d sc dx S - dmin m X."""
    si, si1 = dq.nibble_sums(nib.dp4a_bytes, words, extra, xw, g, gmask, EMU, False)
    dx, x_all, x_lo, x_hi = dq.group_stats(xs, g, gmask)
    acc += s0 * dx * si.to(tl.float32) - m0 * x_all
    return acc


@triton.jit
def k_mm_ptrs(p0, p1, p2, p3, rows, g_lo, G, NG: tl.constexpr):
    """qs int32 [N, 4G], sm (scale, min) byte pairs as int16 [N, G], d / dmin [N, G / 8];
    also o4 (the offsets of Q5_K's qh)."""
    r2, g2, o4, o1, osb = mq.index(rows, g_lo, G, NG)
    wp = p0 + o4
    sp = p1.to(tl.pointer_type(tl.int16)) + o1
    dp = p2 + osb
    mp = p3 + osb
    return wp, sp, dp, mp, o4


@triton.jit
def mm_ptrs(p0, p1, p2, p3, p4, rows, g_lo, G, NG: tl.constexpr):
    wp, sp, dp, mp, o4 = k_mm_ptrs(p0, p1, p2, p3, rows, g_lo, G, NG)
    return wp, wp, sp, dp, mp


@triton.jit
def mm_load(wp, hp, sp, dp, mp):
    wd = mq.load_words(wp, sp, 4)  # [BN, NG, 4] int32
    s = tl.load(sp)  # [BN, NG]
    d = tl.load(dp)
    m = tl.load(mp)
    return wd, wd, s, d, m


@triton.jit
def mm_advance(wp, hp, sp, dp, mp, NG: tl.constexpr):
    return wp + NG * 4, hp + NG * 4, sp + NG, dp + NG // 8, mp + NG // 8


@triton.jit
def k_mm_affine(s, d, m):
    """(d sc, dmin m) fp32 [BN, NG, 1] from the int16 (scale | min << 8) and d, dmin."""
    sm = s.to(tl.int32)  # [BN, NG]: scale | min << 8
    dd = d.to(tl.float32)
    dm = m.to(tl.float32)
    sc0 = (dd * (sm & 255).to(tl.float32))[:, :, None]
    mn0 = (dm * ((sm >> 8) & 255).to(tl.float32))[:, :, None]
    return sc0, mn0


@triton.jit
def mm_deq(wd, hi, s, d, m, DT: tl.constexpr, EMU: tl.constexpr):
    """u d sc - dmin m."""
    sc0, mn0 = k_mm_affine(s, d, m)
    return mq.deq_nibbles(nib.quant, wd, hi, sc0, mn0, sc0, mn0, DT, EMU, MM_ASM, True)


HOOKS = TritonHooks(
    load_tile=load_tile, field=nib.field, dp4a_load=dp4a_load, dp4a_group=dp4a_group,
    mm_ptrs=mm_ptrs, mm_load=mm_load, mm_advance=mm_advance, mm_deq=mm_deq,
    h2_word=nib.h2_word, quant=nib.quant,
)  # fmt: skip
