"""Q5_K's Triton decode functions (planes: `q5_k.py`; what each is for: `base.py`): Q4_K's
(`q4_k_triton.py`) plus a 5th bit per field (qh: one byte per word, bit s = field s)."""

from __future__ import annotations

import triton
import triton.language as tl

from localllm.kernels.quant import dp4a_ops_triton as dq
from localllm.kernels.quant import mm_ops_triton as mq
from localllm.kernels.quant import q4_k_triton as q4k
from localllm.kernels.quant.base import TritonHooks
from localllm.kernels.quant.h2_asm import high_asm, word_asm
from localllm.kernels.quant.loads_triton import _load_words
from localllm.kernels.quant.ops_triton import bits, unit

# e2 = e | e << 12 puts field s + 4 at bit 16 + s
H2_ASM = tl.constexpr(
    word_asm(
        16,
        high_asm(
            "shl.b32 e2, $7, 12;\n    or.b32 e2, e2, $7;", (4, 7, 2, 5), "0x00100010", "0x01000100"
        ),
    )
)


@triton.jit
def load_tile(qs, sm, d, dmin, qh, rows, g, gmask, G, MASKED: tl.constexpr):
    words = _load_words(qs, rows, g, gmask, G, 4, MASKED)  # [BN, NG, 4]
    high = _load_words(qh, rows, g, gmask, G, 4, MASKED).to(tl.int32)  # bytes [BN, NG, 4]
    scale, mins = q4k.k_affine(sm, d, dmin, rows, g, gmask, G, MASKED)
    return words, high, scale, mins, scale, mins


@triton.jit
def field(words, extra, S: tl.constexpr):
    """Nibble + 1 high bit per field (extra: one byte per word)."""
    return unit(bits(words, 4 * S, 4, 18) | bits(extra, S, 1, 22))


@triton.jit
def quant(w, e, S: tl.constexpr):
    q = (w >> (4 * S)) & 15
    q |= ((e >> S) & 1) << 4
    return q


@triton.jit
def h2_word(acc, w, e, x0, x1, x2, x3):
    return tl.inline_asm_elementwise(H2_ASM, "=r,r,r,r,r,r,r,r", [acc, w, x0, x1, x2, x3, e],
                                     dtype=tl.int32, is_pure=True, pack=1)  # fmt: skip


@triton.jit
def dp4a_bytes(wd, e):
    """Nibbles with the 5th bits: bit 2 j -> bit 8 j + 4 (and 2 j + 1 -> 8 j + 4), one multiply
    spreads them."""
    lo = wd & 0x0F0F0F0F
    hi = (wd >> 4) & 0x0F0F0F0F
    lo |= ((e & 0x55) * 0x410410) & 0x10101010
    hi |= ((e & 0xAA) * 0x208208) & 0x10101010
    return lo, hi


@triton.jit
def dp4a_load(p0, p1, p2, p3, p4, rows, g, gmask, G):
    r2, g2, m2, m3, o4, osb = dq.index(rows, g, gmask, G)
    wd = dq.ld(p0 + o4, m3)
    s0, m0 = q4k.k_dp4a_affine(p1, p2, p3, r2, g2, m2, m3, osb, G)
    e = dq.ld(p4 + o4, m3).to(tl.int32)  # qh: one byte per word
    return wd, e, s0, m0, s0, m0


@triton.jit
def dp4a_group(acc, words, extra, s0, m0, s1, m1, xw, xs, g, gmask, EMU: tl.constexpr):
    """d sc dx S - dmin m X."""
    si, si1 = dq.nibble_sums(dp4a_bytes, words, extra, xw, g, gmask, EMU, False)
    dx, x_all, x_lo, x_hi = dq.group_stats(xs, g, gmask)
    acc += s0 * dx * si.to(tl.float32) - m0 * x_all
    return acc


@triton.jit
def mm_ptrs(p0, p1, p2, p3, p4, rows, g_lo, G, NG: tl.constexpr):
    """Q4_K's planes, and qh uint8 [N, 4G]."""
    wp, sp, dp, mp, o4 = q4k.k_mm_ptrs(p0, p1, p2, p3, rows, g_lo, G, NG)
    return wp, p4 + o4, sp, dp, mp


@triton.jit
def mm_load(wp, hp, sp, dp, mp):
    wd = mq.load_words(wp, sp, 4)  # [BN, NG, 4] int32
    s = tl.load(sp)  # [BN, NG]
    hi = mq.load_words(hp, sp, 4).to(tl.int32)
    d = tl.load(dp)
    m = tl.load(mp)
    return wd, hi, s, d, m


@triton.jit
def mm_deq(wd, hi, s, d, m, DT: tl.constexpr, EMU: tl.constexpr):
    """u d sc - dmin m, always in plain Triton (no packed-fp16 PTX for the 5th bit)."""
    sc0, mn0 = q4k.k_mm_affine(s, d, m)
    return mq.deq_nibbles(quant, wd, hi, sc0, mn0, sc0, mn0, DT, True, None, True)


HOOKS = TritonHooks(
    load_tile=load_tile, field=field, dp4a_load=dp4a_load, dp4a_group=dp4a_group,
    mm_ptrs=mm_ptrs, mm_load=mm_load, mm_advance=q4k.mm_advance, mm_deq=mm_deq,
    h2_word=h2_word, quant=quant,
)  # fmt: skip
