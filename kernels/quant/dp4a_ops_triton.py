"""Triton pieces of the formats' dp4a functions (`dp4a_load`, `dp4a_group`; the kernel:
`linear/dp4a_triton.py`). The dp4a GEMV holds [NG, BN] tiles: groups along the lanes, rows in
each thread's registers (they share its activations). The int8 activations of a group are int32
words (`xw`) in the byte order of the format's `act_layout`, with four fp32 per group (`xs`:
dx, and dx * sum(q) over the group, its elements 0..15 and 16..31; `fused/quant_act.py`)."""

from __future__ import annotations

import triton
import triton.language as tl

from localllm.kernels.quant.ops_triton import split4


def _rows_first(version: str) -> bool:
    """Whether `index` builds its tiles rows first (see `ROWS_FIRST`) under this Triton."""
    major, minor = (int(p) for p in version.split(".")[:2])
    return (major, minor) >= (3, 7)


# The dp4a GEMV wants the lanes along the groups of a [NG, BN] weight tile and its rows in each
# thread's registers (the layout of the accumulators and activations: no layout conversion in
# the K loop). Triton lays a load out from its pointers' contiguity, and the tile's pointers
# are equally (non-)contiguous along groups and rows; 3.6 breaks that tie towards the first
# dimension, 3.7 and later towards the last. Built [NG, BN] under 3.7-3.9, the tiles put lanes
# over the rows, and every K step converted them through shared memory (sm_90 SASS: the
# one-row Q4_K loop 72 -> 107-128 registers with shared-memory round trips, Q4_0 255 registers
# and spills). So under 3.7+ the pointers are built [BN, NG] and `ld` transposes the loaded
# tile (a relabelling of registers). `tests/test_kernels_dp4a_layout.py` compiles the loops.
ROWS_FIRST = tl.constexpr(_rows_first(triton.__version__))


@triton.jit
def _byte(v, I: tl.constexpr, SIGNED: tl.constexpr):  # noqa: E741
    if SIGNED:
        b = (v << (24 - 8 * I)) >> 24
    else:
        b = (v >> (8 * I)) & 255
    return b


@triton.jit
def dp4a(acc, a, b, EMU: tl.constexpr, SIGNED: tl.constexpr = False):
    """acc + sum over the 4 bytes of a (unsigned, or signed if SIGNED) times those of b
    (signed), int32. EMU: plain Triton integer ops (the interpreter runs no inline asm)."""
    if EMU:
        for i in tl.static_range(4):
            acc += _byte(a, i, SIGNED) * _byte(b, i, True)
    elif SIGNED:
        acc = tl.inline_asm_elementwise("dp4a.s32.s32 $0, $1, $2, $3;", "=r,r,r,r", [a, b, acc],
                                        dtype=tl.int32, is_pure=True, pack=1)  # fmt: skip
    else:
        acc = tl.inline_asm_elementwise("dp4a.u32.s32 $0, $1, $2, $3;", "=r,r,r,r", [a, b, acc],
                                        dtype=tl.int32, is_pure=True, pack=1)  # fmt: skip
    return acc


@triton.jit
def ld(ptr, mask):
    """Load a tile of pointers from `index` as [NG, BN(, k)] (see ROWS_FIRST)."""
    x = tl.load(ptr, mask=mask, other=0)
    if ROWS_FIRST:
        if len(x.shape) == 3:
            x = tl.permute(x, (1, 0, 2))
        else:
            x = tl.trans(x)
    return x


@triton.jit
def index(rows, g, gmask, G):
    """Offsets of the planes of groups g [NG] of rows [BN], for `ld`: (r2 [1, BN], g2 [NG, 1],
    masks m2 [NG, 1] and m3 [NG, 1, 1], o4 [NG, BN, 4] into a plane of 4 entries per group, osb
    [NG, BN] into a plane of one entry per 256-element super-block); under ROWS_FIRST the
    first two dimensions of each are swapped (r2 [BN, 1], o4 [BN, NG, 4], ..)."""
    if ROWS_FIRST:
        r2 = rows[:, None]  # [BN, 1]
        g2 = g[None, :]  # [1, NG]
        m2 = gmask[None, :]
        m3 = gmask[None, :, None]
    else:
        r2 = rows[None, :]  # [1, BN]
        g2 = g[:, None]  # [NG, 1]
        m2 = gmask[:, None]
        m3 = gmask[:, None, None]
    o4 = (r2 * (G * 4) + g2 * 4)[:, :, None] + tl.arange(0, 4)[None, None, :]  # [NG, BN, 4]
    osb = r2 * (G // 8) + g2 // 8  # one entry per 256-element super-block
    return r2, g2, m2, m3, o4, osb


@triton.jit
def pair(p, r2, g2, m3, G):
    """Two [NG, BN] from a plane with two bytes per group (r2, g2, m3 from `index`). Loaded as
    [NG, BN, 2], so Triton gives them the thread layout of the words (an int16 load, contiguous
    along the groups, would get another one and a shared-memory conversion every step)."""
    o = (r2 * (G * 2) + g2 * 2)[:, :, None] + tl.arange(0, 2)[None, None, :]
    return tl.split(ld(p + o, m3))


@triton.jit
def act_words(xw, g, gmask, OFF: tl.constexpr, STRIDE: tl.constexpr):
    """Four int32 [NG, 1]: words OFF..OFF+3 of each group g (STRIDE words per group)."""
    ptr = xw + (g[:, None] * STRIDE + OFF + tl.arange(0, 4)[None, :])[:, None, :]  # [NG, 1, 4]
    return split4(tl.load(ptr, mask=gmask[:, None, None], other=0))


@triton.jit
def group_stats(xs, g, gmask):
    """The four fp32 [NG, 1] of each group: dx, X, X of elements 0..15, X of 16..31."""
    xp = xs + (g * 4)[:, None, None] + tl.arange(0, 4)[None, None, :]  # [NG, 1, 4]
    return split4(tl.load(xp, mask=gmask[:, None, None], other=0.0))


@triton.jit
def _word_dot(BYTES: tl.constexpr, acc, wd, e, xl, xh, EMU: tl.constexpr):
    lo, hi = BYTES(wd, e)
    return dp4a(dp4a(acc, lo, xl, EMU), hi, xh, EMU)


@triton.jit
def nibble_sums(BYTES: tl.constexpr, words, extra, xw, g, gmask, EMU: tl.constexpr,
                HALVES: tl.constexpr):  # fmt: skip
    """Integer dot products [NG, BN] of 4-bit words [NG, BN, 4] (with extra bits) and the "w4"
    activations of their groups: (S, S1) with HALVES (S: elements 0..15 = bytes 0, 1 of each
    word, S1: 16..31), else (S, 0). BYTES(word, extra) -> (lo, hi): the format's fields 2 j
    and 2 j + 1 as unsigned bytes j."""
    w0, w1, w2, w3 = split4(words)
    s = tl.zeros(w0.shape, dtype=tl.int32)
    s1 = s
    e0, e1, e2, e3 = split4(extra)
    l0, l1, l2, l3 = act_words(xw, g, gmask, 0, 8)  # low nibbles' activations
    h0, h1, h2, h3 = act_words(xw, g, gmask, 4, 8)  # high nibbles'
    if HALVES:
        s = _word_dot(BYTES, s, w0, e0, l0 & 0xFFFF, h0 & 0xFFFF, EMU)
        s = _word_dot(BYTES, s, w1, e1, l1 & 0xFFFF, h1 & 0xFFFF, EMU)
        s = _word_dot(BYTES, s, w2, e2, l2 & 0xFFFF, h2 & 0xFFFF, EMU)
        s = _word_dot(BYTES, s, w3, e3, l3 & 0xFFFF, h3 & 0xFFFF, EMU)
        s1 = _word_dot(BYTES, s1, w0, e0, l0 & -65536, h0 & -65536, EMU)
        s1 = _word_dot(BYTES, s1, w1, e1, l1 & -65536, h1 & -65536, EMU)
        s1 = _word_dot(BYTES, s1, w2, e2, l2 & -65536, h2 & -65536, EMU)
        s1 = _word_dot(BYTES, s1, w3, e3, l3 & -65536, h3 & -65536, EMU)
    else:
        s = _word_dot(BYTES, s, w0, e0, l0, h0, EMU)
        s = _word_dot(BYTES, s, w1, e1, l1, h1, EMU)
        s = _word_dot(BYTES, s, w2, e2, l2, h2, EMU)
        s = _word_dot(BYTES, s, w3, e3, l3, h3, EMU)
    return s, s1
