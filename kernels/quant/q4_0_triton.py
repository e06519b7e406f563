"""Q4_0's Triton decode functions (planes: `q4_0.py`; what each is for: `base.py`): plain
nibbles (`nibbles_triton.py`), q = u - 8, one scale per group stored in reverse group order."""

from __future__ import annotations

import triton
import triton.language as tl

from localllm.kernels.quant import dp4a_ops_triton as dq
from localllm.kernels.quant import mm_ops_triton as mq
from localllm.kernels.quant import nibbles_triton as nib
from localllm.kernels.quant.base import TritonHooks
from localllm.kernels.quant.h2_asm import deq_asm
from localllm.kernels.quant.loads_triton import _load_reversed, _load_words

MM_ASM = tl.constexpr(deq_asm(8, ""))


@triton.jit
def load_tile(qs, d, p2, p3, p4, rows, g, gmask, G, MASKED: tl.constexpr):
    words = _load_words(qs, rows, g, gmask, G, 4, MASKED)  # [BN, NG, 4]
    scale = _load_reversed(d, rows, g, gmask, G, MASKED).to(tl.float32)  # [BN, NG]
    return words, words, scale, scale, scale, scale


@triton.jit
def dp4a_load(p0, p1, p2, p3, p4, rows, g, gmask, G):
    """d fp16 [N, G], reverse group order."""
    r2, g2, m2, m3, o4, osb = dq.index(rows, g, gmask, G)
    wd = dq.ld(p0 + o4, m3)
    s0 = dq.ld(p1 + r2 * G + (G - 1 - g2), m2).to(tl.float32)
    return wd, wd, s0, s0, s0, s0


@triton.jit
def dp4a_group(acc, words, extra, s0, m0, s1, m1, xw, xs, g, gmask, EMU: tl.constexpr):
    """d (dx S - 8 X)."""
    si, si1 = dq.nibble_sums(nib.dp4a_bytes, words, extra, xw, g, gmask, EMU, False)
    dx, x_all, x_lo, x_hi = dq.group_stats(xs, g, gmask)
    acc += s0 * (dx * si.to(tl.float32) - 8.0 * x_all)
    return acc


@triton.jit
def mm_ptrs(p0, p1, p2, p3, p4, rows, g_lo, G, NG: tl.constexpr):
    """qs int32 [N, 4G], d fp16 [N, G] in reverse group order, read at increasing addresses
    (`mm_load` flips each row's NG scales in registers): Triton then streams them with the words
    (8-byte cp.async) where the reversed index gave 2-byte loads outside the pipeline, each using
    2 of a 32-byte sector (ncu). H200, A/B in one call (BENCHMARKS.md session 21), us:
    22016x4096 at 16 rows 56.6 -> 35.1, 12288x4096 at 32 rows 30.5 -> 25.8."""
    r2, g2, o4, o1, osb = mq.index(rows, g_lo, G, NG)
    wp = p0 + o4
    sp = p1 + r2 * G + (G - g_lo - NG) + tl.arange(0, NG)[None, :]  # increasing: 16-byte loads
    return wp, wp, sp, sp, sp


@triton.jit
def mm_load(wp, hp, sp, dp, mp):
    wd = mq.load_words(wp, sp, 4)  # [BN, NG, 4] int32
    s = tl.flip(tl.load(sp), 1)  # [BN, NG] in group order
    return wd, wd, s, s, s


@triton.jit
def mm_advance(wp, hp, sp, dp, mp, NG: tl.constexpr):
    """The scales run backwards."""
    return wp + NG * 4, hp + NG * 4, sp + -NG, dp + NG // 8, mp + NG // 8


@triton.jit
def mm_deq(wd, hi, s, d, m, DT: tl.constexpr, EMU: tl.constexpr):
    """(u - 8) d."""
    d = d.to(tl.float32)[:, :, None]
    sc0 = d
    mn0 = 8.0 * d
    return mq.deq_nibbles(nib.quant, wd, hi, sc0, mn0, sc0, mn0, DT, EMU, MM_ASM, False)


HOOKS = TritonHooks(
    load_tile=load_tile, field=nib.field, dp4a_load=dp4a_load, dp4a_group=dp4a_group,
    mm_ptrs=mm_ptrs, mm_load=mm_load, mm_advance=mm_advance, mm_deq=mm_deq,
    h2_word=nib.h2_word, quant=nib.quant,
)  # fmt: skip
