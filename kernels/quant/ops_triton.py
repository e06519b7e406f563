"""Triton primitives the formats' decode functions (`q*_triton.py`) and the kernel families
build on: bit fields, the float-mantissa trick, fp16 pairs in an int32, register splits."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def bits(words, LO: tl.constexpr, WIDTH: tl.constexpr, DST: tl.constexpr):
    """Bits [LO, LO + WIDTH) of each int32 moved to [DST, DST + WIDTH); all others 0."""
    if LO > DST:
        f = words >> (LO - DST)
    elif LO < DST:
        f = words << (DST - LO)
    else:
        f = words
    return f & (((1 << WIDTH) - 1) << DST)


@triton.jit
def unit(mantissa):
    """int32 with only mantissa bits set -> float32 1 + mantissa / 2^23, in [1, 2)."""
    return (mantissa | 0x3F800000).to(tl.float32, bitcast=True)


@triton.jit
def split4(t):
    """[A, B, 4] -> four [A, B] (in-thread: the 4 come from one 16-byte load)."""
    a, b = tl.split(tl.reshape(t, (t.shape[0], t.shape[1], 2, 2)))  # a: 0, 2; b: 1, 3
    t0, t2 = tl.split(a)
    t1, t3 = tl.split(b)
    return t0, t1, t2, t3


@triton.jit
def lo16(v):
    """fp16 in bits 0..15 of int32 v."""
    return (v & 0xFFFF).to(tl.int16).to(tl.float16, bitcast=True)


@triton.jit
def hi16(v):
    """fp16 in bits 16..31 of int32 v."""
    return (v >> 16).to(tl.int16).to(tl.float16, bitcast=True)


@triton.jit
def pack16(lo, hi):
    """Two fp16 tensors -> int32 (lo in bits 0..15)."""
    lo16 = lo.to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
    return lo16 | (hi.to(tl.int16, bitcast=True).to(tl.int32) << 16)
