"""Integer GEMV for one activation row: int8 activations x packed weights with `dp4a`.

The activations are quantized per 32 elements (`quant_act`: int8 q, scale dx, and dx * sum(q)
over the group and its halves), in the byte order of the weight words they meet. A packed
4-bit word (`quant/planes.py`: field s of word w = element 4 s + w) splits with one AND and one
shift + AND into two words of 4 unsigned bytes (its low nibbles = fields 0, 2, 4, 6 and its
high nibbles = 1, 3, 5, 7; Q5_K/Q6_K OR their extra bits in), and each meets one int32 of
activations in a `dp4a` (4 multiply-adds into an int32): ~5 instructions per 8 weights,
against ~30 for the packed-fp16 GEMV. Integer group sums become fp32 once per group and row,
e.g. d (dx S - 8 X) for q4_0, d sc dx S - dmin m X for q4_k, with S = sum(u * q) of the
integer dot products and X = dx * sum(q) from the quantizer. The format-specific parts (the
loads, the byte split, the group formula) are each format's `dp4a_load` and `dp4a_group`
(`kernels/quant/q*_triton.py`, built on `quant/dp4a_ops_triton.py`), passed to the kernels as
constexpr arguments (`format_constexprs`).
This is llama.cpp's MMVQ idea in Triton; the activation rounding (|error| <= dx / 2 per
element) is the same as its q8_1 path. EMU = 1 runs plain integer Triton ops instead of the
PTX `dp4a` (the interpreter executes no inline asm).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from localllm.kernels.device import interpreting
from localllm.kernels.linear.gemv_core_triton import _write_out, plane_args
from localllm.kernels.pdl import pdl_args, pdl_trigger, pdl_wait
from localllm.kernels.quant import kernel_facts, triton_hooks


@triton.jit
def _dp4a_dot(xw, xs, p0, p1, p2, p3, p4, rows, G, g_lo, g_hi, LOAD: tl.constexpr,
              GROUP: tl.constexpr, BN: tl.constexpr, NG: tl.constexpr, EVEN: tl.constexpr,
              EMU: tl.constexpr, PDL: tl.constexpr):  # fmt: skip
    """fp32 [BN]: weight rows `rows` [BN] (int64) dotted with the int8 activations (xw: the
    row's int32 words, xs: its group stats) over groups [g_lo, g_hi); LOAD and GROUP: the
    format's `dp4a_load` and `dp4a_group`; EVEN: NG divides g_hi - g_lo (no masks); PDL: wait
    for the previous kernel after the first weight loads (`kernels/pdl.py`)."""
    res = _dp4a_dot_rows(xw, xs, xw, xs, 0, 0, 0, 1, p0, p1, p2, p3, p4, rows, G, g_lo, g_hi,
                         LOAD, GROUP, BN, NG, 1, EVEN, EMU, PDL)  # fmt: skip
    return res[0]


@triton.jit
def _row_ptrs(xw, xs, sxw, sxs, r, T):
    """Activation row r's words and stats; rows past T re-read row T - 1 (in bounds, their
    results are not stored)."""
    i = tl.minimum(r, T - 1).to(tl.int64)
    return xw + i * sxw, xs + i * sxs


@triton.jit
def _group_mask(g, g_hi, EVEN: tl.constexpr):
    """Which groups g [NG] of a step exist: a constant (the loads lose their masks and the
    zeroing of masked-off lanes) when the steps cover the groups evenly."""
    if EVEN:
        return tl.full(g.shape, 1, tl.int1)
    return g < g_hi


@triton.jit
def _groups_rows(a0, a1, a2, a3, a4, a5, a6, a7, w, e, s0, m0, s1, m1, xw0, xs0, xw1, xs1,
                 xw2, xs2, xw3, xs3, xw4, xs4, xw5, xs5, xw6, xs6, xw7, xs7, g, gm,
                 GROUP: tl.constexpr, RB: tl.constexpr, EMU: tl.constexpr):  # fmt: skip
    """One K step: each of the RB activation rows adds its dot products with the step's
    weight tile to its accumulator."""
    a0 = GROUP(a0, w, e, s0, m0, s1, m1, xw0, xs0, g, gm, EMU)
    if RB > 1:
        a1 = GROUP(a1, w, e, s0, m0, s1, m1, xw1, xs1, g, gm, EMU)
    if RB > 2:
        a2 = GROUP(a2, w, e, s0, m0, s1, m1, xw2, xs2, g, gm, EMU)
    if RB > 3:
        a3 = GROUP(a3, w, e, s0, m0, s1, m1, xw3, xs3, g, gm, EMU)
    if RB > 4:
        a4 = GROUP(a4, w, e, s0, m0, s1, m1, xw4, xs4, g, gm, EMU)
    if RB > 5:
        a5 = GROUP(a5, w, e, s0, m0, s1, m1, xw5, xs5, g, gm, EMU)
    if RB > 6:
        a6 = GROUP(a6, w, e, s0, m0, s1, m1, xw6, xs6, g, gm, EMU)
    if RB > 7:
        a7 = GROUP(a7, w, e, s0, m0, s1, m1, xw7, xs7, g, gm, EMU)
    return a0, a1, a2, a3, a4, a5, a6, a7


@triton.jit
def _dp4a_dot_rows(xw0, xs0, xw, xs, sxw, sxs, r0, T, p0, p1, p2, p3, p4, rows, G, g_lo, g_hi,
                   LOAD: tl.constexpr, GROUP: tl.constexpr, BN: tl.constexpr, NG: tl.constexpr,
                   RB: tl.constexpr, EVEN: tl.constexpr, EMU: tl.constexpr,
                   PDL: tl.constexpr):  # fmt: skip
    """fp32 [BN] x 8 (the first RB meaningful): weight rows `rows` [BN] (int64) dotted with
    activation rows r0 .. r0 + RB - 1 (xw0 / xs0: row r0's int32 words and group stats; the
    others from the bases xw / xs and row strides sxw / sxs) over groups [g_lo, g_hi), with
    one read of the weight tile: each step's loaded words meet every row's activations (the
    format's byte split is common to the rows and computed once). LOAD and GROUP: the format's
    `dp4a_load` and `dp4a_group`; EVEN: NG divides g_hi - g_lo. PDL: the first step's weight
    loads are issued before waiting for the previous kernel (weights are constant; the
    activations come after). The loads of step i + 1 are in flight while step i computes."""
    xw1, xs1, xw2, xs2, xw3, xs3 = xw0, xs0, xw0, xs0, xw0, xs0
    xw4, xs4, xw5, xs5, xw6, xs6, xw7, xs7 = xw0, xs0, xw0, xs0, xw0, xs0, xw0, xs0
    if RB > 1:
        xw1, xs1 = _row_ptrs(xw, xs, sxw, sxs, r0 + 1, T)
    if RB > 2:
        xw2, xs2 = _row_ptrs(xw, xs, sxw, sxs, r0 + 2, T)
    if RB > 3:
        xw3, xs3 = _row_ptrs(xw, xs, sxw, sxs, r0 + 3, T)
    if RB > 4:
        xw4, xs4 = _row_ptrs(xw, xs, sxw, sxs, r0 + 4, T)
    if RB > 5:
        xw5, xs5 = _row_ptrs(xw, xs, sxw, sxs, r0 + 5, T)
    if RB > 6:
        xw6, xs6 = _row_ptrs(xw, xs, sxw, sxs, r0 + 6, T)
    if RB > 7:
        xw7, xs7 = _row_ptrs(xw, xs, sxw, sxs, r0 + 7, T)
    a0 = tl.zeros([NG, BN], dtype=tl.float32)  # per-group partials of each row, summed at the end
    a1, a2, a3, a4, a5, a6, a7 = a0, a0, a0, a0, a0, a0, a0
    n_steps = tl.cdiv(tl.maximum(g_hi - g_lo, 0), NG)
    g = g_lo + tl.arange(0, NG)  # [NG]
    if RB == 1:
        gm = _group_mask(g, g_hi, EVEN)
    else:
        gm = g < g_hi
    w, e, s0, m0, s1, m1 = LOAD(p0, p1, p2, p3, p4, rows, g, gm, G)
    pdl_wait(PDL)
    if RB == 1:
        # the last step peeled off (nothing to prefetch: constant masks when EVEN), the loop
        # unrolled by two (no register copies of the prefetched tile): one-row Q4_0 / Q6_K
        # GEMVs 4-12% faster on an H200 (scripts/ab_dp4a.py; BENCHMARKS.md, session 14)
        for _ in tl.range(n_steps - 1, loop_unroll_factor=2):
            gn = g + NG
            nw, ne, ns0, nm0, ns1, nm1 = LOAD(p0, p1, p2, p3, p4, rows, gn,
                                              _group_mask(gn, g_hi, EVEN), G)  # fmt: skip
            a0 = GROUP(a0, w, e, s0, m0, s1, m1, xw0, xs0, g, _group_mask(g, g_hi, EVEN), EMU)
            w, e, s0, m0, s1, m1 = nw, ne, ns0, nm0, ns1, nm1
            g = gn
        a0 = GROUP(a0, w, e, s0, m0, s1, m1, xw0, xs0, g, _group_mask(g, g_hi, EVEN), EMU)
    else:
        # several rows: the plain loop (peeled, it ran 3-12% slower at 5 rows; unrolled, it
        # spills)
        for _ in range(n_steps):
            gn = g + NG
            nw, ne, ns0, nm0, ns1, nm1 = LOAD(p0, p1, p2, p3, p4, rows, gn, gn < g_hi, G)
            a0, a1, a2, a3, a4, a5, a6, a7 = _groups_rows(
                a0, a1, a2, a3, a4, a5, a6, a7, w, e, s0, m0, s1, m1, xw0, xs0, xw1, xs1, xw2,
                xs2, xw3, xs3, xw4, xs4, xw5, xs5, xw6, xs6, xw7, xs7, g, g < g_hi, GROUP, RB,
                EMU)  # fmt: skip
            w, e, s0, m0, s1, m1 = nw, ne, ns0, nm0, ns1, nm1
            g = gn
    return (tl.sum(a0, axis=0), tl.sum(a1, axis=0), tl.sum(a2, axis=0), tl.sum(a3, axis=0),
            tl.sum(a4, axis=0), tl.sum(a5, axis=0), tl.sum(a6, axis=0), tl.sum(a7, axis=0))  # fmt: skip


@triton.jit
def _dp4a_kernel(
    xq_ptr, xs_ptr, out_ptr, bias_ptr, p0, p1, p2, p3, p4,
    T, N, G, per_split, stride_xw, stride_xs, stride_om,
    LOAD: tl.constexpr, GROUP: tl.constexpr, BN: tl.constexpr, NG: tl.constexpr, RB: tl.constexpr,
    EVEN: tl.constexpr, ATOMIC: tl.constexpr, HAS_BIAS: tl.constexpr, EMU: tl.constexpr,
    PDL: tl.constexpr = False,
):  # fmt: skip
    """out [T, N] (+)= dequant(xq, xs) [T, K] @ W^T: program (m, n, k) owns activation rows
    [m RB, m RB + RB), weight rows [n BN, n BN + BN) and groups [k per_split, (k + 1)
    per_split) (groups of the weight layout: 32 elements, 16 for Q8_0; EVEN: NG divides G,
    hence every program's groups). The row blocks of one weight tile are neighbours in launch
    order (they share it through L2)."""
    pdl_trigger(PDL)
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_k = tl.program_id(2)
    offs_n = pid_n * BN + tl.arange(0, BN)  # [BN]
    mask_n = offs_n < N
    rows = (offs_n % N).to(tl.int64)  # clamped: unmasked weight loads
    xw = xq_ptr.to(tl.pointer_type(tl.int32))
    g_lo = pid_k * per_split
    g_hi = tl.minimum(g_lo + per_split, G)
    r0 = pid_m * RB
    if RB == 1:
        res = _dp4a_dot(xw + r0.to(tl.int64) * stride_xw, xs_ptr + r0.to(tl.int64) * stride_xs,
                        p0, p1, p2, p3, p4, rows, G, g_lo, g_hi, LOAD, GROUP, BN, NG, EVEN, EMU,
                        PDL)  # fmt: skip
        optrs = out_ptr + r0.to(tl.int64) * stride_om + offs_n
        _write_out(res, optrs, mask_n, bias_ptr, offs_n, mask_n, pid_k, HAS_BIAS, ATOMIC)
    else:
        xw0 = xw + r0.to(tl.int64) * stride_xw
        xs0 = xs_ptr + r0.to(tl.int64) * stride_xs
        res = _dp4a_dot_rows(xw0, xs0, xw, xs_ptr, stride_xw, stride_xs, r0, T, p0, p1, p2, p3,
                             p4, rows, G, g_lo, g_hi, LOAD, GROUP, BN, NG, RB, EVEN, EMU,
                             PDL)  # fmt: skip
        for r in tl.static_range(RB):
            optrs = out_ptr + (r0 + r).to(tl.int64) * stride_om + offs_n
            ok = mask_n & (offs_n * 0 + r0 + r < T)  # [BN]: scalar masks trip the interpreter
            _write_out(res[r], optrs, ok, bias_ptr, offs_n, mask_n, pid_k, HAS_BIAS, ATOMIC)


@triton.jit
def _dp4a_rope_kernel(
    xq_ptr, xs_ptr, out_ptr, bias_ptr, pa0, pa1, pa2, pa3, pa4, pb0, pb1, pb2, pb3, pb4,
    POS, CS, SLOT, KC, VC,
    GA, GB, pairs_a, head0, stride_xw, stride_xs, stride_om, stride_cs,
    stride_cb, stride_ch, stride_ct, n_q_heads, n_kv_heads,
    LOAD_A: tl.constexpr, GROUP_A: tl.constexpr, LOAD_B: tl.constexpr, GROUP_B: tl.constexpr,
    NG: tl.constexpr, EVEN: tl.constexpr, HEAD_DIM: tl.constexpr, PAIRS: tl.constexpr,
    BLOCK_SIZE: tl.constexpr, INTERLEAVED: tl.constexpr, HAS_BIAS: tl.constexpr,
    EMU: tl.constexpr, PDL: tl.constexpr = False,
):  # fmt: skip
    """The QKV projection of decode tokens with RoPE and the KV store in its epilogue (float
    caches), over one or two weights (A, then B: q+k beside a differently quantized v) that
    hold heads head0, head0 + 1, .. of the q | k | v output. Program (j, t) computes the 2
    PAIRS rows of RoPE pairs j PAIRS .. j PAIRS + PAIRS - 1 (pairs numbered within their head
    and heads in order, A's first; PAIRS divides HEAD_DIM / 2, so a program's pairs share a
    head; a pair is (2i, 2i + 1) interleaved, (i, i + D/2) neox) for token t, rounds them to
    the output dtype, rotates q and k heads as rope_store_kv does, writes them to out [T, N]
    and k / v to the cache slot."""
    HALF: tl.constexpr = HEAD_DIM // 2
    pdl_trigger(PDL)
    j = tl.program_id(0) * PAIRS
    t = tl.program_id(1).to(tl.int64)
    in_a = j < pairs_a
    jl = tl.where(in_a, j, j - pairs_a)  # first pair within its weight
    hl = jl // HALF  # head within its weight
    i = jl % HALF + tl.arange(0, PAIRS)  # [P] pair index within the head
    two = tl.arange(0, 2)
    if INTERLEAVED:
        o = 2 * i[:, None] + two[None, :]  # [P, 2] columns within the head
    else:
        o = i[:, None] + HALF * two[None, :]
    rows = tl.reshape(hl * HEAD_DIM + o, [2 * PAIRS]).to(tl.int64)  # [2P] rows of the weight
    # the epilogue's step inputs (position, slot: uploaded before the step's first kernel) and
    # RoPE table, read before the PDL wait (in `_dp4a_dot`), off the kernel's tail
    pos = tl.load(POS + t).to(tl.int64)
    slot = tl.load(SLOT + t + o * 0).to(tl.int64)  # [P, 2]: scalar masks trip the interpreter
    c = tl.load(CS + pos * stride_cs + i)  # [P]
    s = tl.load(CS + pos * stride_cs + HALF + i)
    xw = xq_ptr.to(tl.pointer_type(tl.int32)) + t * stride_xw
    xs = xs_ptr + t * stride_xs
    if in_a:
        res = _dp4a_dot(xw, xs, pa0, pa1, pa2, pa3, pa4, rows, GA, 0, GA, LOAD_A, GROUP_A,
                        2 * PAIRS, NG, EVEN, EMU, PDL)  # fmt: skip
    else:
        res = _dp4a_dot(xw, xs, pb0, pb1, pb2, pb3, pb4, rows, GB, 0, GB, LOAD_B, GROUP_B,
                        2 * PAIRS, NG, EVEN, EMU, PDL)  # fmt: skip
    res = tl.reshape(res, [PAIRS, 2])
    h = head0 + tl.where(in_a, hl, hl + pairs_a // HALF)  # head in q | k | v
    col = h * HEAD_DIM + o  # [P, 2] output columns
    if HAS_BIAS:
        res += tl.load(bias_ptr + col).to(tl.float32)
    res = res.to(out_ptr.dtype.element_ty).to(tl.float32)  # what an unfused GEMV would store
    x0, x1 = tl.split(res)  # [P] each: the pairs' first and second rows
    rot = tl.join(x0 * c - x1 * s, x0 * s + x1 * c)  # [P, 2]
    val = tl.where(h < n_q_heads + n_kv_heads, rot, res).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + t * stride_om + col, val)
    h = h + o * 0
    is_k = (h >= n_q_heads) & (h < n_q_heads + n_kv_heads)
    is_v = h >= n_q_heads + n_kv_heads
    kvh = tl.where(is_k, h - n_q_heads, h - n_q_heads - n_kv_heads)
    base = (tl.maximum(slot, 0) // BLOCK_SIZE) * stride_cb + kvh * stride_ch
    base += (tl.maximum(slot, 0) % BLOCK_SIZE) * stride_ct
    ok = slot >= 0  # padding rows of a graph (slot -1) store nothing
    tl.store(KC + base + o, val.to(KC.dtype.element_ty), mask=ok & is_k)
    tl.store(VC + base + o, val.to(VC.dtype.element_ty), mask=ok & is_v)


@dataclass(frozen=True)
class Dp4aConfig:
    bn: int = 4  # weight rows per program (all in each thread's registers)
    gpt: int = 1  # groups per thread per K step
    warps: int = 2
    split: int = 1  # programs along K (fp32 atomics when > 1)
    rb: int = 0  # activation rows per program (0: `row_block(T)`)
    regs: int = 0  # register cap per thread (ptxas maxnreg; 0: the compiler's choice)


# at 5+ activation rows (a verify step), the weight rows per program and a cap of registers per
# thread (0: none) by (format, fewest and most weight rows N), first match; others 4 rows
# uncapped. Q4_0 and the 4096-row Q4_K matrices measured faster with 8 rows (Q6_K: 4).
# Uncapped, the 5-row programs of tall Q4_K take 255 registers (8 warps per SM, latency-bound:
# session 14's ncu); capped they run 12 warps and spill ~340 B a thread to L1. H200, 5 rows,
# weights from memory (scripts/probe_dp4a_regs.py, BENCHMARKS.md session 21), us: Q4_K
# 28672x4096 32.5 -> 29.2 and 5120x4096 10.6 -> 9.1 (8 rows uncapped -> 4 capped), Q6_K
# 1024x4096 6.5 -> 4.5 (4 rows uncapped -> 2 capped); the 4096-row Q4_K matrices lost under a
# cap (4096x14336 15.2 -> 18.7 at 4 rows, 4096x4096 6.2 -> 6.8), the Q6_K LM head / down and
# Q4_0 22016x4096 moved within 3%; Q5_K 4096x4096 at 4 rows: 11.3 uncapped, 9.4 at 168, 8.2 at
# 128 (session 24; the 1-row config: 4.5)
VERIFY_REGS = 168
_VERIFY_TILES = (
    ("q4_0", 1, 1 << 30, 8, 0),
    ("q4_k", 4097, 1 << 30, 4, VERIFY_REGS),
    ("q4_k", 1, 4096, 8, 0),
    ("q6_k", 1, 1024, 2, VERIFY_REGS),
    ("q5_k", 1, 4096, 4, 128),
)


def _verify_tile(fmt: str, n: int) -> tuple[int, int]:
    """(weight rows per program, register cap) of a launch at 5+ activation rows."""
    tiles = ((bn, regs) for f, lo, hi, bn, regs in _VERIFY_TILES if f == fmt and lo <= n <= hi)
    return next(tiles, (4, 0))


# one activation row: (config above 8192 weight rows, config for 1025..8192 rows) per format,
# from the H200 sweep of the peeled / unrolled loop (session 14, scripts/sweep_dp4a.py --cold;
# 7B-8B shapes, us before -> after): Q4_0 keeps 8 rows per program and two groups per thread
# (22016x4096 14.3 -> 13.0, 4096x11008 8.1 -> 7.3, 4096x4096 4.1 -> 3.4), the K-quants and Q8_0
# take 4 rows and 4 warps below 8192 rows (Q4_K 4096x4096 4.1 -> 3.2, Q6_K 4096x14336 15.1 ->
# 14.5, Q8_0 4096x4096 6.3 -> 5.0)
_ONE_ROW: dict[str, tuple[Dp4aConfig, Dp4aConfig]] = {
    "q4_0": (Dp4aConfig(8, 2, 1), Dp4aConfig(8, 2, 2)),
    "q4_k": (Dp4aConfig(4, 1, 1), Dp4aConfig(4, 1, 4)),
    "q6_k": (Dp4aConfig(4, 1, 1), Dp4aConfig(4, 1, 4)),
    "q8_0": (Dp4aConfig(4, 1, 1), Dp4aConfig(4, 1, 4)),
}
_ONE_ROW_OTHER = (Dp4aConfig(4, 1, 1), Dp4aConfig(2, 1, 2))


def dp4a_config(fmt: str, n: int, k: int, num_sms: int, rows: int = 1) -> Dp4aConfig:
    """From the H200 sweeps with weights read from memory (scripts/sweep_dp4a.py --cold): one
    row by format (`_ONE_ROW`; tall matrices such as gate+up and the LM head: 4 rows and one
    warp, 1.07-1.2x over 2 rows), 2 rows and 4 warps for <= 1024 rows; split K only when the
    rows leave SMs idle (a split costs a zeroing and a conversion kernel). Several activation
    rows (`rows`: scripts/sweep_dp4a_rows.py --alts, T = 2, 3, 5): more weight rows per program
    (4; at 5+ activation rows `_VERIFY_TILES`, which also caps the registers where a cap
    measured faster) share each activation load (1.1-1.5x faster than the one-row config at 5
    rows)."""
    if rows > 1:
        bn, regs = _verify_tile(fmt, n) if rows >= 5 else (4, 0)
        cfg = Dp4aConfig(bn, 1, 1 if n > 8192 else 2, regs=regs)
    elif n <= 1024:
        cfg = Dp4aConfig(2, 1, 4)
    else:
        tall, short = _ONE_ROW.get(fmt, _ONE_ROW_OTHER)
        cfg = tall if n > 8192 else short
    ctas = triton.cdiv(n, cfg.bn)
    if ctas >= num_sms:
        return cfg
    groups = k // kernel_facts(fmt).group
    steps = triton.cdiv(groups, 32)  # one warp: 32 groups per K step
    return Dp4aConfig(cfg.bn, 1, 1, min(steps, triton.cdiv(2 * num_sms, ctas)))


def split_groups(cfg: Dp4aConfig, groups: int) -> tuple[int, int, int]:
    """(NG groups per K step, groups per split, splits) of a launch over `groups` groups."""
    ng = min(32 * cfg.warps * cfg.gpt, triton.next_power_of_2(groups))
    per_split = triton.cdiv(triton.cdiv(groups, ng), cfg.split) * ng
    return ng, per_split, triton.cdiv(groups, per_split)


def fitting_warps(warps: int, ng: int) -> int:
    """Warps of a launch whose K steps hold `ng` groups: no more lanes than groups. Spare warps
    would take rows of the tile, in a layout other than the accumulators', and every K step
    would convert it through shared memory (small K: 32 groups, K <= 1024, with the 2-warp
    configs)."""
    return max(1, min(warps, ng // 32))


def format_constexprs(fmt: str, suffix: str = "") -> dict[str, object]:
    """The format's constexpr arguments of the dp4a kernels (`suffix`: "_A"/"_B" of the
    two weights of `_dp4a_rope_kernel`)."""
    hooks = triton_hooks(fmt)
    return {"LOAD" + suffix: hooks.dp4a_load, "GROUP" + suffix: hooks.dp4a_group}


def even_steps(ng: int, *groups: int) -> bool:
    """The EVEN constexpr: K steps of ng groups cover every weight's groups exactly (the
    one-row loop's loads then need no masks)."""
    return all(g % ng == 0 for g in groups)


def kernel_constexprs(fmt: str, bn: int, ng: int, groups: int, rb: int, atomic: bool,
                      has_bias: bool, emu: bool) -> dict[str, object]:  # fmt: skip
    """The constexpr arguments of `_dp4a_kernel` for one launch over `groups` groups."""
    return dict(**format_constexprs(fmt), BN=bn, NG=ng, RB=rb, EVEN=even_steps(ng, groups),
                ATOMIC=atomic, HAS_BIAS=has_bias, EMU=emu)  # fmt: skip


# activation rows one program can take (`_dp4a_dot_rows` holds one accumulator per row)
MAX_ROW_BLOCK = 8


def row_block(t: int) -> int:
    """Activation rows per program: all T rows in one block up to MAX_ROW_BLOCK, else the
    fewest equal blocks (12 rows: 2 x 6)."""
    blocks = triton.cdiv(max(t, 1), MAX_ROW_BLOCK)
    return triton.cdiv(max(t, 1), blocks)


def dp4a_launch(
    xq: torch.Tensor,  # int8 [T, K] (quant_act, the format's `act_layout`)
    xs: torch.Tensor,  # fp32 [T, K / 32, 4]
    planes: list[torch.Tensor],
    fmt: str,
    n: int,
    bias: torch.Tensor | None,
    cfg: Dp4aConfig,
    out_dtype: torch.dtype,
) -> torch.Tensor:  # [T, N] in out_dtype
    t, k = xq.shape
    f = kernel_facts(fmt)
    if k % f.min_k or not xq.is_contiguous() or not xs.is_contiguous():
        raise ValueError(f"dp4a: K={k} must be a multiple of {f.min_k}, inputs contiguous")
    groups = k // f.group
    ng, per_split, split = split_groups(cfg, groups)
    dtype = torch.float32 if split > 1 else out_dtype
    out = (torch.zeros if split > 1 else torch.empty)((t, n), device=xq.device, dtype=dtype)
    if t == 0:
        return out.to(out_dtype)
    rb = min(cfg.rb, t) if cfg.rb else row_block(t)
    grid = (triton.cdiv(t, rb), triton.cdiv(n, cfg.bn), split)
    _dp4a_kernel[grid](
        xq, xs, out, bias if bias is not None else out, *plane_args(planes),
        t, n, groups, per_split, k // 4, xs.stride(0), out.stride(0),
        **kernel_constexprs(fmt, cfg.bn, ng, groups, rb, split > 1, bias is not None,
                            interpreting()),
        num_warps=fitting_warps(cfg.warps, ng), num_stages=1, **pdl_args(xq.device),
        **({"maxnreg": cfg.regs} if cfg.regs else {}),
    )  # fmt: skip
    return out if split == 1 else out.to(out_dtype)


@dataclass(frozen=True)
class RopeConfig:
    """A `_dp4a_rope_kernel` launch: RoPE pairs per program (2 weight rows each; a divisor of
    head_dim / 2), warps, and at most `ng` groups per K step."""

    pairs: int = 1
    warps: int = 2
    ng: int = 64


# the fused QKV launch by the format of its first weight, else ROPE_CONFIG (one pair per program,
# 2 warps, 64-group K steps: the first fused version's). H200, session 24: one token with the
# weights read from memory (scripts/probe_qkv_rope.py, 12 configs), us, and end to end (tg128,
# A/B in one call): llama2-7b's Q4_0 q|k|v 10.08 -> 8.74 at 2 pairs, 2 warps, 128 groups (the
# plain GEMV of the same weights: 7.48), 674.5 -> 689.9 tok/s; llama3-8b's Q4_K q|k + Q6_K v
# measured 6.69 -> 6.28 alone but lost end to end with it (572 -> 548 tok/s), so keeps the first
ROPE_CONFIG = RopeConfig()
_ROPE_CONFIGS = {"q4_0": RopeConfig(pairs=2, warps=2, ng=128)}


def rope_config(fmt: str) -> RopeConfig:
    """The fused QKV launch's config for a first weight of format `fmt`."""
    return _ROPE_CONFIGS.get(fmt, ROPE_CONFIG)


def dp4a_rope_launch(
    xq: torch.Tensor,  # int8 [T, K] (quant_act, the `act_layout` of every weight)
    xs: torch.Tensor,  # fp32 [T, K / 32, 4]
    weights: list[tuple[str, int, list[torch.Tensor]]],  # 1 or 2 of (fmt, rows, planes)
    bias: torch.Tensor | None,  # [N] of the whole q | k | v output
    out: torch.Tensor,  # [T, N] q | k | v output (unit column stride)
    head0: int,  # the first head of the first weight in q | k | v
    n_q_heads: int,
    n_kv_heads: int,
    head_dim: int,
    positions: torch.Tensor,  # int [T]
    cos_sin: torch.Tensor,  # fp32 [max_pos, head_dim]: cos | sin halves
    interleaved: bool,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,  # [blocks, Hkv, block_size, D], float
    slot_mapping: torch.Tensor,  # int [T], -1 = store nothing
    cfg: RopeConfig | None = None,  # None: rope_config of the first weight's format
) -> None:
    """The dp4a GEMV of one or two consecutive QKV weights (whole heads each) in one launch,
    with RoPE and the paged KV store in its epilogue."""
    t, k = xq.shape
    if not 1 <= len(weights) <= 2 or out.stride(-1) != 1 or head_dim % 2:
        raise ValueError("dp4a_rope: one or two weights, a unit-stride output, an even head_dim")
    cfg = cfg or rope_config(weights[0][0])
    if cfg.pairs < 1 or (head_dim // 2) % cfg.pairs or cfg.pairs & (cfg.pairs - 1):
        raise ValueError(f"dp4a_rope: {cfg.pairs} pairs per program must be a power of two "
                         f"dividing head_dim / 2 = {head_dim // 2}")  # fmt: skip
    for fmt, n, _ in weights:
        if k % kernel_facts(fmt).min_k or n % head_dim:
            raise ValueError(f"dp4a_rope: K={k}, N={n}, head_dim={head_dim} do not fit {fmt}")
    if t == 0:
        return
    (fa, na, pa), (fb, _, pb) = weights[0], weights[-1]

    def groups(fmt: str) -> int:
        return k // kernel_facts(fmt).group

    pairs = sum(n for _, n, _ in weights) // 2
    consts = rope_constexprs(fa, fb, k, head_dim, k_cache.shape[2], interleaved,
                             bias is not None, cfg)  # fmt: skip
    _dp4a_rope_kernel[(pairs // cfg.pairs, t)](
        xq, xs, out, bias if bias is not None else out, *plane_args(pa), *plane_args(pb), positions, cos_sin,
        slot_mapping, k_cache, v_cache, groups(fa), groups(fb), na // 2, head0, k // 4,
        xs.stride(0), out.stride(0), cos_sin.stride(0), *k_cache.stride()[:3], n_q_heads,
        n_kv_heads, **consts, num_warps=fitting_warps(cfg.warps, rope_ng(fa, fb, k, cfg)),
        num_stages=1, **pdl_args(xq.device),
    )  # fmt: skip


def rope_ng(fa: str, fb: str, k: int, cfg: RopeConfig) -> int:
    """Groups per K step of a `_dp4a_rope_kernel` launch (its NG): at most cfg.ng, a power of
    2 no larger than either weight's group count needs."""
    return min(cfg.ng, triton.next_power_of_2(min(k // kernel_facts(f).group for f in (fa, fb))))


def rope_constexprs(fa: str, fb: str, k: int, head_dim: int, block_size: int, interleaved: bool,
                    has_bias: bool, cfg: RopeConfig) -> dict[str, object]:  # fmt: skip
    """The constexpr arguments of `_dp4a_rope_kernel` for weights of formats fa, fb over K
    = `k` inputs (its launch and `scripts/ptx_snapshot.py`'s case)."""
    ga, gb = k // kernel_facts(fa).group, k // kernel_facts(fb).group
    ng = rope_ng(fa, fb, k, cfg)
    return dict(
        **format_constexprs(fa, "_A"), **format_constexprs(fb, "_B"), NG=ng,
        EVEN=even_steps(ng, ga, gb), HEAD_DIM=head_dim, PAIRS=cfg.pairs, BLOCK_SIZE=block_size,
        INTERLEAVED=bool(interleaved), HAS_BIAS=has_bias, EMU=interpreting(),
    )  # fmt: skip
