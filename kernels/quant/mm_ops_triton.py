"""Triton pieces of the formats' fused-GEMM functions (`mm_ptrs`, `mm_load`, `mm_advance`,
`mm_deq`; the kernel: `linear/qmm_triton.py`). The GEMM holds [BN, NG] tiles of 32-element
groups, each thread whole groups of a row; `mm_deq` returns the weights [BN, NG * 32] in K
order, every word's fields decoded and joined in the registers of the thread that loaded it."""

from __future__ import annotations

import triton
import triton.language as tl

from localllm.kernels.quant.ops_triton import pack16


@triton.jit
def index(rows, g_lo, G, NG: tl.constexpr):
    """Offsets into the planes of rows [BN] (int64) for groups g_lo + [0, NG): (r2 [BN, 1],
    g2 [1, NG], o4 [BN, NG * 4] into a word plane (4 words per group, 2-D and contiguous along
    K, so the loads' lanes run along K), o1 [BN, NG] one entry (or int16 pair) per group, osb
    [BN, NG] one entry per 256-element super-block)."""
    r2 = rows[:, None]
    g = g_lo + tl.arange(0, NG)  # [NG]
    g2 = g[None, :]
    o4 = r2 * (G * 4) + g_lo * 4 + tl.arange(0, NG * 4)[None, :]
    o1 = r2 * G + g2
    osb = r2 * (G // 8) + g2 // 8
    return r2, g2, o4, o1, osb


@triton.jit
def load_words(wp, sp, WPG: tl.constexpr):
    """Words [BN, NG, WPG] of one K step from the 2-D pointers wp [BN, NG * WPG] (BN, NG: the
    shape of the per-group pointers sp)."""
    BN: tl.constexpr = sp.shape[0]
    NG: tl.constexpr = sp.shape[1]
    return tl.reshape(tl.load(wp), [BN, NG, WPG])


@triton.jit
def join8(f0, f1, f2, f3, f4, f5, f6, f7):
    """Eight [..] -> [.., 2, 2, 2], all in the registers of the thread holding [..]: position
    4 a + 2 b + c of the new dims holds f_(4 c + 2 b + a) (field index bit-reversed)."""
    return tl.join(tl.join(tl.join(f0, f1), tl.join(f2, f3)),
                   tl.join(tl.join(f4, f5), tl.join(f6, f7)))  # fmt: skip


@triton.jit
def _affine(u, scale, shift, DT: tl.constexpr):
    return (u.to(tl.float32) * scale - shift).to(DT)


_DEQ_CONSTRAINTS = tl.constexpr("=h,=h,=h,=h,=h,=h,=h,=h,r,r,r,r")


@triton.jit
def _deq_word_h2(wd, hi, sc0, mn0, sc1, mn1, ASM: tl.constexpr, SHIFT: tl.constexpr):
    """The 8 fields (fp16, [BN, NG, 4] each) of every word, decoded and scaled in f16x2 by the
    format's `h2_asm.deq_asm` (zero point and extra bits in the asm; SHIFT: subtract mn)."""
    scale = pack16(sc0.to(tl.float16), sc1.to(tl.float16))  # [BN, NG, 1] int32
    if SHIFT:
        shift = pack16((-mn0).to(tl.float16), (-mn1).to(tl.float16))
    else:
        shift = tl.zeros_like(scale)
    f0, f4, f1, f5, f2, f6, f3, f7 = tl.inline_asm_elementwise(
        ASM, _DEQ_CONSTRAINTS, [wd, hi, scale, shift], dtype=(tl.float16,) * 8, is_pure=True, pack=1
    )
    return f0, f1, f2, f3, f4, f5, f6, f7


@triton.jit
def deq_nibbles(QUANT: tl.constexpr, wd, hi, sc0, mn0, sc1, mn1, DT: tl.constexpr,
                EMU: tl.constexpr, ASM: tl.constexpr, SHIFT: tl.constexpr):  # fmt: skip
    """Weights [BN, NG * 32] (dtype DT) of 4-bit words wd [BN, NG, 4] (extra bits hi) in K
    order: field s of word w is `QUANT(wd, hi, s)`, weight (u * sc - mn) with (sc0, mn0)
    [BN, NG, 1] for fields 0..3, (sc1, mn1) for 4..7. EMU: plain Triton ops (the interpreter,
    non-fp16 x, formats without ASM), else the packed-fp16 PTX ASM (2-3 instructions per
    weight, pairs (s, s + 4) in one register; SHIFT as in `_deq_word_h2`)."""
    BN: tl.constexpr = wd.shape[0]
    NG: tl.constexpr = wd.shape[1]
    if EMU:
        w = join8(
            _affine(QUANT(wd, hi, 0), sc0, mn0, DT), _affine(QUANT(wd, hi, 1), sc0, mn0, DT),
            _affine(QUANT(wd, hi, 2), sc0, mn0, DT), _affine(QUANT(wd, hi, 3), sc0, mn0, DT),
            _affine(QUANT(wd, hi, 4), sc1, mn1, DT), _affine(QUANT(wd, hi, 5), sc1, mn1, DT),
            _affine(QUANT(wd, hi, 6), sc1, mn1, DT), _affine(QUANT(wd, hi, 7), sc1, mn1, DT),
        )  # [BN, NG, 4, 2, 2, 2]  # fmt: skip
    else:
        w = join8(*_deq_word_h2(wd, hi, sc0, mn0, sc1, mn1, ASM, SHIFT))
    # [BN, NG, 4 (word w), 2, 2, 2 (field bits 0, 1, 2)] -> [.., field, w]: element 4 f + w
    w = tl.permute(w, (0, 1, 5, 4, 3, 2))
    return tl.reshape(w, [BN, NG * 32])
