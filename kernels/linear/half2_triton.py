"""Packed-fp16 (half2) T=1 GEMV for fp16 activations: ~2 instructions per 4-bit weight.

Same tile as `gemv_core_triton._vec` (words [BN, NG, 4] of one group of 32 elements per
row and thread), but a word's 8 fields are decoded two at a time into one 32-bit register of
two fp16 (the Marlin/ExLlama trick, `quant/h2_asm.py`; the PTX of a word is the format's
`h2_word`, its plain-Triton twin is built from the format's `quant`):
`(word & 0x000F000F) | 0x64006400` is the fp16 pair
(1024 + field s, 1024 + field s + 4), `word & 0x00F000F0` the same times 16 for fields s + 1
and s + 5 (scaled back by the fma that removes the bias). One packed subtract/fma leaves
`q - Z` (Z centers the quants: |q - Z| <= 32), one packed fma multiplies it with the
matching pair of activations (element 4s + w, element 16 + 4s + w) and accumulates the
group in fp16x2: the low half collects elements 0..15 of the group, the high half 16..31
(the two Q6_K scales). Per group and row the fp16 sums become fp32 once:
    sum(weight * x) = sc0 * P0 + sc1 * P1 + (sc * (Z - zp) - min) * X
with zp the format's zero point and X the fp32 sum of the group's activations.
Formats: Q4_0, Q4_K, Q5_K, Q6_K (Q8_0 keeps the fp32 path: |q| <= 128 overflows fp16 sums).
H2 = 2 runs the PTX (sm_80+: lop3, f16x2 fma); H2 = 1 runs the same arithmetic in plain
Triton fp16 ops for the interpreter (inline asm does not run there) and for testing.
"""

from __future__ import annotations

import triton
import triton.language as tl

from localllm.kernels.quant.loads_triton import _ld
from localllm.kernels.quant.ops_triton import hi16 as _hi
from localllm.kernels.quant.ops_triton import lo16 as _lo
from localllm.kernels.quant.ops_triton import pack16 as _pack
from localllm.kernels.quant.ops_triton import split4 as _split4

_PRMT_LO = tl.constexpr("prmt.b32 $0, $1, $2, 0x5410;")  # (low half of $1, low half of $2)
_PRMT_HI = tl.constexpr("prmt.b32 $0, $1, $2, 0x7632;")  # (high half of $1, high half of $2)
_ADD2 = tl.constexpr("add.rn.f16x2 $0, $1, $2;")


@triton.jit
def _q_emul(QUANT: tl.constexpr, w, e, S: tl.constexpr, Z: tl.constexpr):
    """q - Z of field S as fp16 (plain Triton, for H2 == 1; QUANT: the format's `quant`)."""
    return (QUANT(w, e, S) - Z).to(tl.float16)


@triton.jit
def _word(H2_WORD: tl.constexpr, QUANT: tl.constexpr, acc, w, e, x0, x1, x2, x3,
          H2: tl.constexpr, Z: tl.constexpr):  # fmt: skip
    """acc (fp16x2 as int32 [BN, NG]) += the word's 8 fields times pairs x0..x3 [1, NG]: the
    format's `h2_word` PTX (H2 == 2), or its plain-Triton twin from `quant`."""
    if H2 == 2:
        acc = H2_WORD(acc, w, e, x0, x1, x2, x3)
    else:
        a0 = _lo(acc)
        a1 = _hi(acc)
        a0 += _q_emul(QUANT, w, e, 0, Z) * _lo(x0) + _q_emul(QUANT, w, e, 1, Z) * _lo(x1)
        a0 += _q_emul(QUANT, w, e, 2, Z) * _lo(x2) + _q_emul(QUANT, w, e, 3, Z) * _lo(x3)
        a1 += _q_emul(QUANT, w, e, 4, Z) * _hi(x0) + _q_emul(QUANT, w, e, 5, Z) * _hi(x1)
        a1 += _q_emul(QUANT, w, e, 6, Z) * _hi(x2) + _q_emul(QUANT, w, e, 7, Z) * _hi(x3)
        acc = _pack(a0, a1)
    return acc


@triton.jit
def _pair(a, b, HALF: tl.constexpr, H2: tl.constexpr):
    """int32 (fp16 half HALF of a, fp16 half HALF of b), [1, NG]: one PRMT."""
    if H2 == 2:
        if HALF == 0:
            p = tl.inline_asm_elementwise(_PRMT_LO, "=r,r,r", [a, b],
                                          dtype=tl.int32, is_pure=True, pack=1)  # fmt: skip
        else:
            p = tl.inline_asm_elementwise(_PRMT_HI, "=r,r,r", [a, b],
                                          dtype=tl.int32, is_pure=True, pack=1)  # fmt: skip
    elif HALF == 0:
        p = (a & 0xFFFF) | (b << 16)
    else:
        p = ((a >> 16) & 0xFFFF) | (b & -65536)
    return p


@triton.jit
def _add2(a, b, H2: tl.constexpr):
    """fp16x2 a + b (int32 bits)."""
    if H2 == 2:
        s = tl.inline_asm_elementwise(_ADD2, "=r,r,r", [a, b],
                                      dtype=tl.int32, is_pure=True, pack=1)  # fmt: skip
    else:
        s = _pack(_lo(a) + _lo(b), _hi(a) + _hi(b))
    return s


@triton.jit
def _sum16(r0, r1, r2, r3, r4, r5, r6, r7, r8, r9, r10, r11, r12, r13, r14, r15,
           H2: tl.constexpr):  # fmt: skip
    """fp32 sum of the 32 fp16 in 16 int32: a packed fp16x2 tree, then one fp32 add."""
    a = _add2(_add2(_add2(r0, r1, H2), _add2(r2, r3, H2), H2),
              _add2(_add2(r4, r5, H2), _add2(r6, r7, H2), H2), H2)  # fmt: skip
    b = _add2(_add2(_add2(r8, r9, H2), _add2(r10, r11, H2), H2),
              _add2(_add2(r12, r13, H2), _add2(r14, r15, H2), H2), H2)  # fmt: skip
    s = _add2(a, b, H2)
    return _lo(s).to(tl.float32) + _hi(s).to(tl.float32)


@triton.jit
def _x_chunk(xw, g, gmask, C: tl.constexpr, MASKED: tl.constexpr):
    """int32 pairs 4C..4C+3 (elements 8C..8C+7) of each group g, four [1, NG]."""
    j = tl.arange(0, 4)
    ptr = xw + (g[:, None] * 16 + (4 * C) + j[None, :])[None, :, :]  # [1, NG, 4]
    return _split4(_ld(ptr, gmask[None, :, None], MASKED))


@triton.jit
def _words_sum(H2_WORD: tl.constexpr, QUANT: tl.constexpr, words, extra, xw, g, gmask,
               H2: tl.constexpr, Z: tl.constexpr, MASKED: tl.constexpr):  # fmt: skip
    """fp16x2 group sums (int32 [BN, NG]) and fp32 X [1, NG] of the group's activations."""
    r0, r1, r2, r3 = _x_chunk(xw, g, gmask, 0, MASKED)  # int32 regs j = element pairs 2j, 2j+1
    r4, r5, r6, r7 = _x_chunk(xw, g, gmask, 1, MASKED)
    r8, r9, r10, r11 = _x_chunk(xw, g, gmask, 2, MASKED)
    r12, r13, r14, r15 = _x_chunk(xw, g, gmask, 3, MASKED)
    w0, w1, w2, w3 = _split4(words)
    e0, e1, e2, e3 = _split4(extra)
    # word w, field s: element 4s + w = half w % 2 of reg 2s + w // 2 (s + 4: reg 8 + 2s + ..)
    acc = tl.zeros(w0.shape, dtype=tl.int32)
    acc = _word(H2_WORD, QUANT, acc, w0, e0, _pair(r0, r8, 0, H2), _pair(r2, r10, 0, H2), _pair(r4, r12, 0, H2),
                _pair(r6, r14, 0, H2), H2, Z)  # fmt: skip
    acc = _word(H2_WORD, QUANT, acc, w1, e1, _pair(r0, r8, 1, H2), _pair(r2, r10, 1, H2), _pair(r4, r12, 1, H2),
                _pair(r6, r14, 1, H2), H2, Z)  # fmt: skip
    acc = _word(H2_WORD, QUANT, acc, w2, e2, _pair(r1, r9, 0, H2), _pair(r3, r11, 0, H2), _pair(r5, r13, 0, H2),
                _pair(r7, r15, 0, H2), H2, Z)  # fmt: skip
    acc = _word(H2_WORD, QUANT, acc, w3, e3, _pair(r1, r9, 1, H2), _pair(r3, r11, 1, H2), _pair(r5, r13, 1, H2),
                _pair(r7, r15, 1, H2), H2, Z)  # fmt: skip
    x_sum = _sum16(r0, r1, r2, r3, r4, r5, r6, r7, r8, r9, r10, r11, r12, r13, r14, r15, H2)
    return acc, x_sum


@triton.jit
def _vec_h2(acc, H2_WORD: tl.constexpr, QUANT: tl.constexpr, words, extra, sc0, mn0, sc1, mn1,
            g, gmask, xb, QB: tl.constexpr, QC: tl.constexpr, HAS_MIN: tl.constexpr,
            H2: tl.constexpr, Z: tl.constexpr, MASKED: tl.constexpr):  # fmt: skip
    """acc [BN, NG] += per-group dot products of fp16 x with the tile (formats with a
    `KernelFacts.h2_center`, Z)."""
    xw = xb.to(tl.pointer_type(tl.int32))  # fp16 pairs
    p, x_sum = _words_sum(H2_WORD, QUANT, words, extra, xw, g, gmask, H2, Z, MASKED)
    acc += sc0 * _lo(p).to(tl.float32) + sc1 * _hi(p).to(tl.float32)
    ZP: tl.constexpr = QC - QB  # the format's zero point: q_true = q - ZP
    if HAS_MIN:  # sc0 == sc1 and mn0 == mn1
        acc += (sc0 * (Z - ZP) - mn0) * x_sum
    elif Z != ZP:
        acc += (sc0 * (Z - ZP)) * x_sum
    return acc
