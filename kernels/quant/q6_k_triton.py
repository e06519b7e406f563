"""Q6_K's Triton decode functions (planes: `q6_k.py`; what each is for: `base.py`): a nibble
plus 2 high bits per field (qh: one int16 per word, bits 2 s, 2 s + 1 = field s), q = u - 32,
and two scales per group (16 elements each: fields 0..3 and 4..7)."""

from __future__ import annotations

import triton
import triton.language as tl

from localllm.kernels.quant import dp4a_ops_triton as dq
from localllm.kernels.quant import mm_ops_triton as mq
from localllm.kernels.quant.base import TritonHooks
from localllm.kernels.quant.h2_asm import deq_asm, q6_high, word_asm
from localllm.kernels.quant.loads_triton import _load_pair, _load_super, _load_words
from localllm.kernels.quant.ops_triton import bits, unit

H2_ASM = tl.constexpr(word_asm(32, q6_high("$7")))
MM_ASM = tl.constexpr(deq_asm(32, q6_high("$9")))


@triton.jit
def load_tile(ql, qh, sc, d, p4, rows, g, gmask, G, MASKED: tl.constexpr):
    words = _load_words(ql, rows, g, gmask, G, 4, MASKED)  # [BN, NG, 4]
    high = _load_words(qh, rows, g, gmask, G, 4, MASKED).to(tl.int32)  # int16 [BN, NG, 4]
    sc0, sc1 = _load_pair(sc, rows, g, gmask, G, MASKED)  # int8 [BN, NG]: elements 0..15, 16..31
    dd = _load_super(d, rows, g, gmask, G, MASKED).to(tl.float32)  # [BN, NG]
    s0 = dd * sc0.to(tl.float32)
    s1 = dd * sc1.to(tl.float32)
    return words, high, s0, s0, s1, s1


@triton.jit
def field(words, extra, S: tl.constexpr):
    """Nibble + 2 high bits per field (extra: one int16 per word)."""
    return unit(bits(words, 4 * S, 4, 17) | bits(extra, 2 * S, 2, 21))


@triton.jit
def quant(w, e, S: tl.constexpr):
    q = (w >> (4 * S)) & 15
    q |= ((e >> (2 * S)) & 3) << 4
    return q


@triton.jit
def h2_word(acc, w, e, x0, x1, x2, x3):
    return tl.inline_asm_elementwise(H2_ASM, "=r,r,r,r,r,r,r,r", [acc, w, x0, x1, x2, x3, e],
                                     dtype=tl.int32, is_pure=True, pack=1)  # fmt: skip


@triton.jit
def dp4a_bytes(wd, e):
    """Nibbles with the top two bits: nibble j of e (fields 2 j, 2 j + 1) -> low nibble of
    byte j."""
    lo = wd & 0x0F0F0F0F
    hi = (wd >> 4) & 0x0F0F0F0F
    s = (e & 0xF) | ((e & 0xF0) << 4) | ((e & 0xF00) << 8) | ((e & 0xF000) << 12)
    lo |= (s << 4) & 0x30303030
    hi |= (s << 2) & 0x30303030
    return lo, hi


@triton.jit
def dp4a_load(p0, p1, p2, p3, p4, rows, g, gmask, G):
    """qh int16 [N, 4G], sc int8 pairs [N, 2G], d [N, G / 8]."""
    r2, g2, m2, m3, o4, osb = dq.index(rows, g, gmask, G)
    wd = dq.ld(p0 + o4, m3)
    e = dq.ld(p1 + o4, m3).to(tl.int32)
    sc0, sc1 = dq.pair(p2, r2, g2, m3, G)
    dd = dq.ld(p3 + osb, m2).to(tl.float32)
    s0 = dd * sc0.to(tl.float32)
    s1 = dd * sc1.to(tl.float32)
    return wd, e, s0, s0, s1, s1


@triton.jit
def dp4a_group(acc, words, extra, s0, m0, s1, m1, xw, xs, g, gmask, EMU: tl.constexpr):
    """d sc0 (dx S0 - 32 X0) + d sc1 (dx S1 - 32 X1) over the 16-element halves (bytes 0, 1
    of each word are elements 0..15, bytes 2, 3 16..31)."""
    si, si1 = dq.nibble_sums(dp4a_bytes, words, extra, xw, g, gmask, EMU, True)
    dx, x_all, x_lo, x_hi = dq.group_stats(xs, g, gmask)
    acc += s0 * (dx * si.to(tl.float32) - 32.0 * x_lo)
    acc += s1 * (dx * si1.to(tl.float32) - 32.0 * x_hi)
    return acc


@triton.jit
def mm_ptrs(p0, p1, p2, p3, p4, rows, g_lo, G, NG: tl.constexpr):
    """ql int32 [N, 4G], qh int16 [N, 4G], sc int8 pairs as int16 [N, G], d [N, G / 8]."""
    r2, g2, o4, o1, osb = mq.index(rows, g_lo, G, NG)
    wp = p0 + o4
    hp = p1 + o4
    sp = p2.to(tl.pointer_type(tl.int16)) + o1
    dp = p3 + osb
    return wp, hp, sp, dp, dp


@triton.jit
def mm_load(wp, hp, sp, dp, mp):
    wd = mq.load_words(wp, sp, 4)  # [BN, NG, 4] int32
    s = tl.load(sp)  # [BN, NG]
    hi = mq.load_words(hp, sp, 4).to(tl.int32)
    d = tl.load(dp)
    return wd, hi, s, d, d


@triton.jit
def mm_advance(wp, hp, sp, dp, mp, NG: tl.constexpr):
    return wp + NG * 4, hp + NG * 4, sp + NG, dp + NG // 8, mp + NG // 8


@triton.jit
def mm_deq(wd, hi, s, d, m, DT: tl.constexpr, EMU: tl.constexpr):
    """(u - 32) d sc, sc per 16 elements (fields 0-3 | 4-7)."""
    sc = s.to(tl.int32)  # [BN, NG]: two int8
    dd = d.to(tl.float32)
    sc0 = (dd * ((sc << 24) >> 24).to(tl.float32))[:, :, None]
    sc1 = (dd * (sc >> 8).to(tl.float32))[:, :, None]
    mn0 = 32.0 * sc0
    mn1 = 32.0 * sc1
    return mq.deq_nibbles(quant, wd, hi, sc0, mn0, sc1, mn1, DT, EMU, MM_ASM, False)


HOOKS = TritonHooks(
    load_tile=load_tile, field=field, dp4a_load=dp4a_load, dp4a_group=dp4a_group,
    mm_ptrs=mm_ptrs, mm_load=mm_load, mm_advance=mm_advance, mm_deq=mm_deq,
    h2_word=h2_word, quant=quant,
)  # fmt: skip
