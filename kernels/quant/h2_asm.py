"""PTX builders of the packed-fp16 (f16x2) decode of 4-bit words (the Marlin/ExLlama trick),
used by the formats' `h2_word` (the half2 GEMV, `linear/half2_triton.py`) and `MM_ASM` (the
fused GEMM, `linear/qmm_triton.py`). `(word & 0x000F000F) | 0x64006400` is the fp16 pair
(1024 + field s, 1024 + field s + 4), `word & 0x00F000F0` the same times 16 for fields s + 1
and s + 5 (scaled back by the fma that removes the bias); one packed subtract/fma leaves
`q - z`. (lop3 with immLut 0xEA is (a & b) | c.)"""

from __future__ import annotations

import numpy as np


def _h16(v: float) -> str:
    """fp16 bits of v, twice, as a PTX 32-bit hex immediate."""
    b = int(np.array(v, dtype=np.float16).view(np.uint16))
    return f"0x{b:04X}{b:04X}"


def decode_asm(z: int, high: str) -> str:
    """PTX lines leaving q - z of the fields (s, s + 4) of word $w as fp16 pairs in t0..t3
    (s = 0..3); `high` ORs the extra bits into t0..t3 (already placed at the fields' bits 4, 5 /
    8, 9). The caller declares the registers and names the word operand `$w`."""
    return f"""mov.b32 c0, {_h16(1024 + z)};
    mov.b32 c1, {_h16(-(64 + z))};
    mov.b32 c16, 0x2C002C00;
    shr.u32 v, $w, 8;
    lop3.b32 t0, $w, 0x000F000F, 0x64006400, 0xEA;
    lop3.b32 t1, $w, 0x00F000F0, 0x64006400, 0xEA;
    lop3.b32 t2, v, 0x000F000F, 0x64006400, 0xEA;
    lop3.b32 t3, v, 0x00F000F0, 0x64006400, 0xEA;
    {high}
    sub.rn.f16x2 t0, t0, c0;
    fma.rn.f16x2 t1, t1, c16, c1;
    sub.rn.f16x2 t2, t2, c0;
    fma.rn.f16x2 t3, t3, c16, c1;"""


def word_asm(z: int, high: str) -> str:
    """PTX: $0 = $1 + sum over the 8 fields of word $2 of (q - z) * x as fp16x2; $3..$6 the
    activation pairs of fields (0, 4), (1, 5), (2, 6), (3, 7); `high` reads the extra bits
    from $7 (`decode_asm`)."""
    return f"""{{
    .reg .b32 a, t0, t1, t2, t3, h0, h1, h2, h3, v, c0, c1, c16, e2;
    {decode_asm(z, high).replace("$w", "$2")}
    fma.rn.f16x2 a, t0, $3, $1;
    fma.rn.f16x2 a, t1, $4, a;
    fma.rn.f16x2 a, t2, $5, a;
    fma.rn.f16x2 a, t3, $6, a;
    mov.b32 $0, a;
}}"""


def deq_asm(zp: int, high: str) -> str:
    """PTX: the 8 fields of word $8 as fp16 (q - zp) * scale + shift, in pairs (field s,
    field s + 4) = ($2s, $2s+1), one f16x2 register each; `high` reads the extra bits from $9
    (`decode_asm`), $10 / $11 the (scale, shift) of fields 0..3 (low halves) and 4..7 (high
    halves) as fp16x2."""
    return f"""{{
    .reg .b32 t0, t1, t2, t3, h0, h1, h2, h3, v, c0, c1, c16, e2;
    {decode_asm(zp, high).replace("$w", "$8")}
    fma.rn.f16x2 t0, t0, $10, $11;
    fma.rn.f16x2 t1, t1, $10, $11;
    fma.rn.f16x2 t2, t2, $10, $11;
    fma.rn.f16x2 t3, t3, $10, $11;
    mov.b32 {{$0, $1}}, t0;
    mov.b32 {{$2, $3}}, t1;
    mov.b32 {{$4, $5}}, t2;
    mov.b32 {{$6, $7}}, t3;
}}"""


def high_asm(spread: str, shifts: tuple[int, int, int, int], m_lo: str, m_hi: str) -> str:
    """OR extra bits into t0..t3: e2 = `spread` of the extra operand, then (e2 << shift) & mask
    per pair."""
    lines = [spread]
    for i, s in enumerate(shifts):
        mask = m_lo if i % 2 == 0 else m_hi
        lines += [f"shl.b32 h{i}, e2, {s};", f"and.b32 h{i}, h{i}, {mask};",
                  f"or.b32 t{i}, t{i}, h{i};"]  # fmt: skip
    return "\n    ".join(lines)


# Q6_K's extra bits (int16 per word, bits 2s, 2s + 1 = the top bits of field s): the PRMT
# copies byte 1 (fields 4..7) to byte 2 (and drops the sign extension); `$e` names the operand
def q6_high(operand: str) -> str:
    return high_asm(f"prmt.b32 e2, {operand}, {operand}, 0x1100;", (4, 6, 0, 2), "0x00300030",
                    "0x03000300")  # fmt: skip
