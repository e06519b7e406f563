"""Q8_0's Triton decode functions (planes: `q8_0.py`; what each is for: `base.py`). Its words
hold 4 signed bytes: 16-element groups in the GEMV's layout, a scale per 2 of them."""

from __future__ import annotations

import triton
import triton.language as tl

from localllm.kernels.quant import dp4a_ops_triton as dq
from localllm.kernels.quant import mm_ops_triton as mq
from localllm.kernels.quant.base import TritonHooks
from localllm.kernels.quant.loads_triton import _ld, _load_words
from localllm.kernels.quant.ops_triton import bits, split4, unit

SIGN_FLIP = tl.constexpr(-0x7F7F7F80)  # int32 0x80808080: int8 q -> unsigned q + 128 per byte


@triton.jit
def load_tile(qs, d, p2, p3, p4, rows, g, gmask, G, MASKED: tl.constexpr):
    """16-element groups (4 words of 4 bytes), one scale per 2 groups."""
    words = _load_words(qs, rows, g, gmask, G, 4, MASKED) ^ SIGN_FLIP  # [BN, NG, 4]
    dptr = d + rows[:, None] * (G // 2) + (g // 2)[None, :]
    scale = _ld(dptr, gmask[None, :], MASKED).to(tl.float32)  # [BN, NG]
    return words, words, scale, scale, scale, scale


@triton.jit
def field(words, extra, S: tl.constexpr):
    """Bytes, sign bit flipped at load (u = q + 128)."""
    return unit(bits(words, 8 * S, 8, 15))


@triton.jit
def dp4a_load(p0, p1, p2, p3, p4, rows, g, gmask, G):
    """d fp16 [N, G / 2] (16-element groups)."""
    r2, g2, m2, m3, o4, osb = dq.index(rows, g, gmask, G)
    wd = dq.ld(p0 + o4, m3)
    s0 = dq.ld(p1 + r2 * (G // 2) + g2 // 2, m2).to(tl.float32)
    return wd, wd, s0, s0, s0, s0


@triton.jit
def dp4a_group(acc, words, extra, s0, m0, s1, m1, xw, xs, g, gmask, EMU: tl.constexpr):
    """Signed bytes ("w8" activations): d dx S; one activation group (and scale) per two
    weight groups."""
    w0, w1, w2, w3 = split4(words)
    s = tl.zeros(w0.shape, dtype=tl.int32)
    a0, a1, a2, a3 = dq.act_words(xw, g, gmask, 0, 4)
    s = dq.dp4a(s, w0, a0, EMU, True)
    s = dq.dp4a(s, w1, a1, EMU, True)
    s = dq.dp4a(s, w2, a2, EMU, True)
    s = dq.dp4a(s, w3, a3, EMU, True)
    dx = tl.load(xs + (g // 2) * 4, mask=gmask, other=0.0)[:, None]
    acc += s0 * dx * s.to(tl.float32)
    return acc


@triton.jit
def mm_ptrs(p0, p1, p2, p3, p4, rows, g_lo, G, NG: tl.constexpr):
    """qs int32 [N, 8G] (8 words per 32 elements), d fp16 [N, G]."""
    r2, g2, o4, o1, osb = mq.index(rows, g_lo, G, NG)
    wp = p0 + r2 * (G * 8) + g_lo * 8 + tl.arange(0, NG * 8)[None, :]
    sp = p1 + o1
    return wp, wp, sp, sp, sp


@triton.jit
def mm_load(wp, hp, sp, dp, mp):
    wd = mq.load_words(wp, sp, 8)  # [BN, NG, 8] int32
    s = tl.load(sp)  # [BN, NG]
    return wd, wd, s, s, s


@triton.jit
def mm_advance(wp, hp, sp, dp, mp, NG: tl.constexpr):
    return wp + NG * 8, hp + NG * 4, sp + NG, dp + NG // 8, mp + NG // 8


@triton.jit
def mm_deq(wd, hi, s, d, m, DT: tl.constexpr, EMU: tl.constexpr):
    """Byte s of word 4 h + w is element 16 h + 4 s + w."""
    BN: tl.constexpr = wd.shape[0]
    NG: tl.constexpr = wd.shape[1]
    d = d.to(tl.float32)[:, :, None]  # [BN, NG, 1]
    b0 = (((wd << 24) >> 24).to(tl.float32) * d).to(DT)
    b1 = (((wd << 16) >> 24).to(tl.float32) * d).to(DT)
    b2 = (((wd << 8) >> 24).to(tl.float32) * d).to(DT)
    b3 = ((wd >> 24).to(tl.float32) * d).to(DT)
    w = tl.join(tl.join(b0, b1), tl.join(b2, b3))  # [BN, NG, 8 (4h + w), 2, 2] (s bit 0, 1)
    w = tl.permute(tl.reshape(w, [BN, NG, 2, 4, 2, 2]), (0, 1, 2, 5, 4, 3))  # [.., h, s, w]
    return tl.reshape(w, [BN, NG * 32])


HOOKS = TritonHooks(
    load_tile=load_tile, field=field, dp4a_load=dp4a_load, dp4a_group=dp4a_group,
    mm_ptrs=mm_ptrs, mm_load=mm_load, mm_advance=mm_advance, mm_deq=mm_deq,
)  # fmt: skip
