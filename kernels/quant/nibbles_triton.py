"""The decode functions of plain 4-bit words (no extra bits), shared by Q4_0 and Q4_K (and any
format whose quants are one nibble: field s of word w = bits 4 s .. 4 s + 3)."""

from __future__ import annotations

import triton
import triton.language as tl

from localllm.kernels.quant.h2_asm import word_asm
from localllm.kernels.quant.ops_triton import bits, unit

H2_ASM = tl.constexpr(word_asm(8, ""))  # h2_center 8: |q - 8| <= 8


@triton.jit
def field(words, extra, S: tl.constexpr):
    """1 + u / 16 of field S (the GEMV's `field`)."""
    return unit(bits(words, 4 * S, 4, 19))


@triton.jit
def quant(w, e, S: tl.constexpr):
    """The unsigned quant u of field S, int32."""
    return (w >> (4 * S)) & 15


@triton.jit
def h2_word(acc, w, e, x0, x1, x2, x3):
    """acc (fp16x2 as int32) += the word's 8 fields (q - 8) times the activation pairs."""
    return tl.inline_asm_elementwise(H2_ASM, "=r,r,r,r,r,r,r", [acc, w, x0, x1, x2, x3],
                                     dtype=tl.int32, is_pure=True, pack=1)  # fmt: skip


@triton.jit
def dp4a_bytes(wd, e):
    """A packed word -> (lo, hi): byte j of lo = field 2 j, of hi = field 2 j + 1, unsigned."""
    lo = wd & 0x0F0F0F0F
    hi = (wd >> 4) & 0x0F0F0F0F
    return lo, hi
