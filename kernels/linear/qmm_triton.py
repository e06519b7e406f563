"""Triton fused dequant x GEMM for 2..MM_MAX_T activation rows (`kernels/plan.py`) (batched decode, speculative
verify, short prefill chunks).

Each program owns BN weight rows and BM activation rows and walks K in steps of NG scale
groups of 32 elements. The K loop is software-pipelined by Triton (`num_stages`): the packed
weight words, scales and the x tile of the next steps stream into shared memory (cp.async)
while the current step computes. A step decodes the weight tile `[BN, NG * 32]` in
registers: each thread holds whole 32-element groups of a row (4 int32 words, layout in
`kernels/quant/planes.py`: element 4 s + w of a group is field s of word w) and decodes
a word's 8 fields two at a time in packed fp16 (`(word & 0x000F000F) | 0x64006400` is the
pair (1024 + field s, 1024 + field s + 4), one subtract and one f16x2 fma apply the zero
point, scale and min: ~2 instructions per weight, see `_deq_asm`), then arranges them in K
order so that the tile is stored to shared memory in 16-byte vectors without bank conflicts
and the x tile needs no permutation. One `tl.dot` per step multiplies the two on the tensor
cores (weights as the A operand), so every weight byte is read from memory once per BM rows.
Q5_K, Q8_0, bf16/fp32 activations and the interpreter use the plain fp32 decode.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

import torch
import triton
import triton.language as tl

from localllm.kernels.linear.gemv_core_triton import _write_out, plane_args
from localllm.kernels.linear.half2_triton import _decode_asm, _high_asm, _pack
from localllm.kernels.quant import kernel_facts
from localllm.kernels.scratch import ZeroScratch


@triton.jit
def _join8(f0, f1, f2, f3, f4, f5, f6, f7):
    """Eight [..] -> [.., 2, 2, 2], all in the registers of the thread holding [..]: position
    4 a + 2 b + c of the new dims holds f_(4 c + 2 b + a) (field index bit-reversed)."""
    return tl.join(tl.join(tl.join(f0, f1), tl.join(f2, f3)),
                   tl.join(tl.join(f4, f5), tl.join(f6, f7)))  # fmt: skip


@triton.jit
def _nib(wd, S: tl.constexpr, hi, HB: tl.constexpr):
    """Field S of int32 words: the nibble, plus HB high bits from `hi` (bits HB S ..)."""
    u = (wd >> (4 * S)) & 15
    if HB > 0:
        u = u | (((hi >> (HB * S)) & ((1 << HB) - 1)) << 4)
    return u


@triton.jit
def _affine(u, scale, shift, DT: tl.constexpr):
    return (u.to(tl.float32) * scale - shift).to(DT)


@triton.jit
def _plane_ptrs(FMT: tl.constexpr, p0, p1, p2, p3, p4, rows, g_lo, G, NG: tl.constexpr):
    """Pointers of the first K step (groups g [NG]) into every plane of rows [BN] (int64):
    (words [BN, NG, 4 | 8], high bits [BN, NG, 4], per-group scale pairs as int16 [BN, NG],
    per-super-block d and dmin [BN, NG]); unused entries repeat another pointer. The K loop
    then only advances them."""
    r2 = rows[:, None]
    g = g_lo + tl.arange(0, NG)  # [NG]
    g2 = g[None, :]
    # word planes as 2-D [BN, NG * 4 | 8] (contiguous along K, so the loads' lanes run along K
    # and every thread's decoded elements are contiguous in K); `_load_raw` reshapes them
    o4 = r2 * (G * 4) + g_lo * 4 + tl.arange(0, NG * 4)[None, :]
    o1 = r2 * G + g2  # one entry (or int16 pair) per group
    osb = r2 * (G // 8) + g2 // 8  # one entry per 256-element super-block
    if FMT == 0:  # q8_0: qs int32 [N, 8G], d fp16 [N, G]
        wp = p0 + r2 * (G * 8) + g_lo * 8 + tl.arange(0, NG * 8)[None, :]
        sp = p1 + o1
        hp, dp, mp = wp, sp, sp
    elif FMT == 1:  # q4_0: qs int32 [N, 4G], d fp16 [N, G] in reverse group order
        wp = p0 + o4
        sp = p1 + r2 * G + (G - 1 - g2)
        hp, dp, mp = wp, sp, sp
    elif FMT == 2 or FMT == 3:  # q4_k/q5_k: sm (scale, min) bytes [N, 2G], d/dmin [N, G/8]
        wp = p0 + o4
        sp = p1.to(tl.pointer_type(tl.int16)) + o1
        dp = p2 + osb
        mp = p3 + osb
        hp = p4 + o4 if FMT == 3 else wp  # q5_k: qh uint8 [N, 4G]
    elif FMT >= 5:  # awq: qs int32 [N, 4G], s fp16 / z uint8 [N, G / R]
        R: tl.constexpr = 4 if FMT == 5 else 2
        oq = r2 * (G // R) + g2 // R
        wp = p0 + o4
        sp = p1 + oq
        mp = p2 + oq
        hp, dp = wp, sp
    else:  # q6_k: ql int32 [N, 4G], qh int16 [N, 4G], sc int8 pairs [N, 2G], d [N, G/8]
        wp = p0 + o4
        hp = p1 + o4
        sp = p2.to(tl.pointer_type(tl.int16)) + o1
        dp = p3 + osb
        mp = dp
    return wp, hp, sp, dp, mp


@triton.jit
def _load_raw(FMT: tl.constexpr, wp, hp, sp, dp, mp):
    """The packed planes of one K step."""
    BN: tl.constexpr = sp.shape[0]
    NG: tl.constexpr = sp.shape[1]
    WPG: tl.constexpr = 8 if FMT == 0 else 4
    wd = tl.reshape(tl.load(wp), [BN, NG, WPG])  # [BN, NG, 4 | 8] int32
    s = tl.load(sp)  # [BN, NG]
    if FMT == 3 or FMT == 4:
        hi = tl.reshape(tl.load(hp), [BN, NG, 4]).to(tl.int32)
    else:
        hi = wd
    if FMT >= 2 and FMT <= 4:
        d = tl.load(dp)
    else:
        d = s
    if FMT == 2 or FMT == 3 or FMT >= 5:  # awq: m is the zero point
        m = tl.load(mp)
    else:
        m = d
    return wd, hi, s, d, m


def _deq_asm(zp: int, high: str) -> str:
    """PTX: the 8 fields of word $8 as fp16 (q - zp) * scale + shift, in pairs (field s,
    field s + 4) = ($2s, $2s+1), one f16x2 register each; `high` reads the extra bits from $9
    (`half2_triton._decode_asm`), $10 / $11 the (scale, shift) of fields 0..3 (low
    halves) and 4..7 (high halves) as fp16x2."""
    return f"""{{
    .reg .b32 t0, t1, t2, t3, h0, h1, h2, h3, v, c0, c1, c16, e2;
    {_decode_asm(zp, high).replace("$w", "$8")}
    fma.rn.f16x2 t0, t0, $10, $11;
    fma.rn.f16x2 t1, t1, $10, $11;
    fma.rn.f16x2 t2, t2, $10, $11;
    fma.rn.f16x2 t3, t3, $10, $11;
    mov.b32 {{$0, $1}}, t0;
    mov.b32 {{$2, $3}}, t1;
    mov.b32 {{$4, $5}}, t2;
    mov.b32 {{$6, $7}}, t3;
}}"""


_DEQ_Q4_0 = tl.constexpr(_deq_asm(8, ""))
_DEQ_Q4_K = tl.constexpr(_deq_asm(0, ""))
_DEQ_Q6_K = tl.constexpr(
    _deq_asm(
        32, _high_asm("prmt.b32 e2, $9, $9, 0x1100;", (4, 6, 0, 2), "0x00300030", "0x03000300")
    )
)
_DEQ_CONSTRAINTS = tl.constexpr("=h,=h,=h,=h,=h,=h,=h,=h,r,r,r,r")


@triton.jit
def _deq_word_h2(FMT: tl.constexpr, wd, hi, sc0, mn0, sc1, mn1):
    """The 8 fields (fp16, [BN, NG, 4] each) of every word, decoded and scaled in f16x2."""
    scale = _pack(sc0.to(tl.float16), sc1.to(tl.float16))  # [BN, NG, 1] int32
    if (
        FMT == 2 or FMT >= 5
    ):  # q4_k: - dmin m, awq: - s z (q4_0, q6_k: the zero point is in the asm)
        shift = _pack((-mn0).to(tl.float16), (-mn1).to(tl.float16))
    else:
        shift = tl.zeros_like(scale)
    if FMT == 1:
        asm: tl.constexpr = _DEQ_Q4_0
    elif FMT == 2 or FMT >= 5:
        asm: tl.constexpr = _DEQ_Q4_K
    else:
        asm: tl.constexpr = _DEQ_Q6_K
    f0, f4, f1, f5, f2, f6, f3, f7 = tl.inline_asm_elementwise(
        asm, _DEQ_CONSTRAINTS, [wd, hi, scale, shift], dtype=(tl.float16,) * 8, is_pure=True, pack=1
    )
    return f0, f1, f2, f3, f4, f5, f6, f7


@triton.jit
def _deq_tile(FMT: tl.constexpr, wd, hi, s, d, m, DT: tl.constexpr, EMU: tl.constexpr):
    """Weights [BN, NG * 32] (dtype DT) of one K step (`_load_raw`) in K order: every word's
    fields are decoded and joined in the registers of the thread that loaded it."""
    BN: tl.constexpr = wd.shape[0]
    NG: tl.constexpr = wd.shape[1]
    if FMT == 0:  # q8_0: byte s of word 4 h + w is element 16 h + 4 s + w
        d = d.to(tl.float32)[:, :, None]  # [BN, NG, 1]
        b0 = (((wd << 24) >> 24).to(tl.float32) * d).to(DT)
        b1 = (((wd << 16) >> 24).to(tl.float32) * d).to(DT)
        b2 = (((wd << 8) >> 24).to(tl.float32) * d).to(DT)
        b3 = ((wd >> 24).to(tl.float32) * d).to(DT)
        w = tl.join(tl.join(b0, b1), tl.join(b2, b3))  # [BN, NG, 8 (4h + w), 2, 2] (s bit 0, 1)
        w = tl.permute(tl.reshape(w, [BN, NG, 2, 4, 2, 2]), (0, 1, 2, 5, 4, 3))  # [.., h, s, w]
    else:
        if FMT == 1:  # q4_0: (u - 8) d
            d = d.to(tl.float32)[:, :, None]
            sc0 = d
            mn0 = 8.0 * d
            sc1 = sc0
            mn1 = mn0
            HB: tl.constexpr = 0
        elif FMT == 2 or FMT == 3:  # q4_k / q5_k: u d sc - dmin m
            sm = s.to(tl.int32)  # [BN, NG]: scale | min << 8
            dd = d.to(tl.float32)
            dm = m.to(tl.float32)
            sc0 = (dd * (sm & 255).to(tl.float32))[:, :, None]
            mn0 = (dm * ((sm >> 8) & 255).to(tl.float32))[:, :, None]
            sc1 = sc0
            mn1 = mn0
            if FMT == 3:  # bit s of qh byte w = 5th bit of field s
                HB: tl.constexpr = 1
            else:
                HB: tl.constexpr = 0
        elif FMT >= 5:  # awq: (u - z) s
            sc0 = s.to(tl.float32)[:, :, None]
            mn0 = sc0 * m.to(tl.float32)[:, :, None]
            sc1 = sc0
            mn1 = mn0
            HB: tl.constexpr = 0
        else:  # q6_k: (u - 32) d sc, sc per 16 elements (fields 0-3 | 4-7)
            HB: tl.constexpr = 2
            sc = s.to(tl.int32)  # [BN, NG]: two int8
            dd = d.to(tl.float32)
            sc0 = (dd * ((sc << 24) >> 24).to(tl.float32))[:, :, None]
            sc1 = (dd * (sc >> 8).to(tl.float32))[:, :, None]
            mn0 = 32.0 * sc0
            mn1 = 32.0 * sc1
        if EMU:  # plain Triton ops (the interpreter runs no inline asm; q5_k: fp32 path)
            w = _join8(
                _affine(_nib(wd, 0, hi, HB), sc0, mn0, DT), _affine(_nib(wd, 1, hi, HB), sc0, mn0, DT),
                _affine(_nib(wd, 2, hi, HB), sc0, mn0, DT), _affine(_nib(wd, 3, hi, HB), sc0, mn0, DT),
                _affine(_nib(wd, 4, hi, HB), sc1, mn1, DT), _affine(_nib(wd, 5, hi, HB), sc1, mn1, DT),
                _affine(_nib(wd, 6, hi, HB), sc1, mn1, DT), _affine(_nib(wd, 7, hi, HB), sc1, mn1, DT),
            )  # [BN, NG, 4, 2, 2, 2]  # fmt: skip
        else:  # packed fp16 decode: 2-3 instructions per weight, pairs (s, s + 4) in one register
            w = _join8(*_deq_word_h2(FMT, wd, hi, sc0, mn0, sc1, mn1))
        # [BN, NG, 4 (word w), 2, 2, 2 (field bits 0, 1, 2)] -> [.., field, w]: element 4 f + w
        w = tl.permute(w, (0, 1, 5, 4, 3, 2))
    return tl.reshape(w, [BN, NG * 32])


@triton.jit
def _step(FMT: tl.constexpr, acc, x, wd, hi, s, d, m, EMU: tl.constexpr, PREC: tl.constexpr,
          SWAP: tl.constexpr):  # fmt: skip
    """acc += one K step: x [BM, NG * 32] and the decoded weight tile on the tensor cores."""
    emu: tl.constexpr = EMU or x.dtype != tl.float16 or FMT == 3
    wt = _deq_tile(FMT, wd, hi, s, d, m, x.dtype, emu)  # [BN, NG * 32]
    if SWAP:
        acc = tl.dot(wt, tl.trans(x), acc, input_precision=PREC)  # [BN, BM]
    else:
        acc = tl.dot(x, tl.trans(wt), acc, input_precision=PREC)  # [BM, BN]
    return acc


@triton.jit
def _qmm_kernel(
    x_ptr, out_ptr, bias_ptr, p0, p1, p2, p3, p4, res_ptr, cnt_ptr,
    T, N, G, stride_xm, stride_om, groups_per_split,
    FMT: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, NG: tl.constexpr,
    HAS_BIAS: tl.constexpr, ATOMIC: tl.constexpr, PREC: tl.constexpr, SWAP: tl.constexpr,
    EMU: tl.constexpr, STAGES: tl.constexpr,
):  # fmt: skip
    """out [T, N] (+)= x [T, K] @ W^T (+ bias), K = 32 G; program (n, m, s) owns weight rows
    [n BN, n BN + BN), x rows [m BM, m BM + BM) and 32-element groups
    [s groups_per_split, (s + 1) groups_per_split) (NG divides both G and groups_per_split).
    ATOMIC (split K): out is a zeroed fp32 workspace the splits add into; the last split of a
    tile to finish (a counter per tile) stores the tile to res [T, N] in res's dtype and zeroes
    the workspace tile and the counter again, so no zeroing or conversion kernel is needed."""
    pid_m = tl.program_id(0)  # M blocks of one weight tile run side by side: it is read from
    pid_n = tl.program_id(1)  # memory once and from L2 by the others
    pid_k = tl.program_id(2)
    offs_n = pid_n * BN + tl.arange(0, BN)  # [BN]
    mask_n = offs_n < N
    rows = (offs_n % N).to(tl.int64)  # clamped rows: weight loads need no mask
    offs_m = pid_m * BM + tl.arange(0, BM)  # [BM]
    mask_m = offs_m < T
    xrow = x_ptr + offs_m.to(tl.int64)[:, None] * stride_xm  # [BM, 1]
    g_lo = pid_k * groups_per_split
    g_hi = tl.minimum(g_lo + groups_per_split, G)
    if SWAP:  # weights as the MMA's A operand (M = weight rows), x^T as B
        acc = tl.zeros([BN, BM], dtype=tl.float32)
    else:
        acc = tl.zeros([BM, BN], dtype=tl.float32)
    wp, hp, sp, dp, mp = _plane_ptrs(FMT, p0, p1, p2, p3, p4, rows, g_lo, G, NG)
    xp = xrow + (g_lo * 32 + tl.arange(0, NG * 32))[None, :]  # [BM, NG * 32]
    WPG: tl.constexpr = 8 if FMT == 0 else 4  # int32 words per group
    # q4_0 scales run backwards; awq's scale / zero planes hold one entry per R groups, the
    # k-quants' d / dmin one per 8 (NG is a multiple of either)
    RQ: tl.constexpr = (4 if FMT == 5 else 2) if FMT >= 5 else 8
    SSTEP: tl.constexpr = -NG if FMT == 1 else (NG // RQ if FMT >= 5 else NG)
    n_steps = tl.cdiv(g_hi - g_lo, NG)  # the host makes NG divide groups_per_split and G
    # Triton's pipeliner keeps STAGES - 1 steps of loads in flight (cp.async into shared
    # memory); the x tile goes to the MMA from there untouched (the weights are decoded in
    # K order)
    for _ in tl.range(n_steps, num_stages=STAGES):
        x = tl.load(xp, mask=mask_m[:, None], other=0.0)  # [BM, NG * 32]
        wd, hi, s, d, m = _load_raw(FMT, wp, hp, sp, dp, mp)
        acc = _step(FMT, acc, x, wd, hi, s, d, m, EMU, PREC, SWAP)
        xp += NG * 32
        wp += NG * WPG
        hp += NG * 4
        sp += SSTEP
        dp += NG // RQ
        mp += NG // RQ
    if SWAP:
        acc = tl.trans(acc)  # [BM, BN]
    optrs = out_ptr + offs_m[:, None] * stride_om + offs_n[None, :]
    omask = mask_m[:, None] & mask_n[None, :]
    _write_out(acc, optrs, omask, bias_ptr, offs_n, mask_n, pid_k, HAS_BIAS, ATOMIC)
    if ATOMIC:  # the last split of this tile converts it (release ours, acquire the others')
        tl.debug_barrier()
        cnt = cnt_ptr + pid_m * tl.num_programs(1) + pid_n
        if tl.atomic_add(cnt, 1, sem="acq_rel", scope="gpu") == tl.num_programs(2) - 1:
            tile = tl.load(optrs, mask=omask, other=0.0, cache_modifier=".cg")
            tl.store(res_ptr + offs_m[:, None] * stride_om + offs_n[None, :],
                     tile.to(res_ptr.dtype.element_ty), mask=omask)  # fmt: skip
            tl.store(optrs, tl.zeros_like(tile), mask=omask)
            tl.atomic_xchg(cnt, 0)


@dataclass(frozen=True)
class MMConfig:
    bm: int  # activation rows per program (>= 16, a power of 2)
    bn: int  # weight rows per program
    ng: int  # 32-element groups per K step
    split: int = 1  # programs along K (fp32 atomics when > 1)
    warps: int = 4
    stages: int = 3  # software pipeline depth (stages - 1 K steps of loads in flight)
    swap: bool = False  # weights as the A operand of the MMA (out^T = W x^T)


def _largest_ng(ng: int, groups: int) -> int:
    """The largest power of 2 <= ng dividing the group count (K = 32 * groups)."""
    while groups % ng:
        ng //= 2
    return ng


BIG_SMEM = 160 * 1024  # shared memory per block (H100/H200: 227 KB; RTX 30xx/40xx: 99 KB)


def mm_config(fmt: str, n: int, k: int, t: int, num_sms: int, smem: int = BIG_SMEM) -> MMConfig:
    """Heuristic from the H200 sweeps (scripts/probe_qmm.py, weights from memory, CUDA-graph
    timing; benchmarks/probe_qmm_session4.jsonl, probe_qmm_t128.jsonl). Up to 64 rows: one M
    block covers them all (every weight tile is decoded once), 64 weight rows x 256 K per step
    as the MMA's A operand (swap), 4 warps, a 3-stage pipeline; 128 weight rows for very tall
    matrices at 32+ rows where shared memory allows (28672x4096 Q4_K, 32 rows: 55 vs 70 us);
    split K until the grid has 1.5 programs per SM. 65..128 rows (batched decode of many
    streams, the prefill graph of a short turn after a cached prefix): one 128-row block and
    two warpgroups, split K only up to one program per SM (128 rows, Q4_K: 28672x4096 120 vs
    208 us with two 64-row blocks of 4 warps, 6144x4096 40 vs 83 us, 4096x14336 74 vs 143 us)."""
    groups = k // 32
    big = t > 64
    bm = 128 if big else max(16, triton.next_power_of_2(t))
    ng = _largest_ng(8, groups)
    bn = 128 if n >= 16384 and bm >= 32 and smem >= BIG_SMEM else 64
    ctas = triton.cdiv(n, bn)
    split = 1
    while (ctas * split * 2 <= num_sms if big else 2 * ctas * split < 3 * num_sms) and groups // (
        ng * split * 2
    ) >= 2:
        split *= 2
    return MMConfig(bm, bn, ng, split, warps=8 if big else 4, stages=3, swap=True)


def _smaller(cfg: MMConfig) -> MMConfig | None:
    """The next config to try when `cfg` needs more shared memory than the GPU has."""
    if cfg.stages > 2:
        return replace(cfg, stages=cfg.stages - 1)
    if cfg.bn > 32:
        return replace(cfg, bn=cfg.bn // 2)
    if cfg.bm > 16:
        return replace(cfg, bm=cfg.bm // 2)
    return None


_FITTED: dict[tuple, MMConfig] = {}  # (format, dtype, config) -> a config that fits this GPU


def qmm_launch(
    x: torch.Tensor,  # [T, K] fp16 / bf16 / fp32, K a multiple of 32
    planes: list[torch.Tensor],
    fmt: str,
    n: int,
    bias: torch.Tensor | None,
    cfg: MMConfig,
) -> torch.Tensor:  # [T, N] in x.dtype
    key = (fmt, x.dtype, cfg)
    cfg = _FITTED.get(key, cfg)
    while True:
        try:
            out = _launch(x, planes, fmt, n, bias, cfg)
        except triton.runtime.errors.OutOfResources:
            smaller = _smaller(cfg)
            if smaller is None:
                raise
            cfg = _FITTED[key] = smaller
            continue
        return out


def split_groups(fmt: str, cfg: MMConfig, groups: int) -> tuple[int, int, int]:
    """(NG groups per K step, groups per split, splits) of a launch over `groups` 32-element
    groups: NG divides both; a step covers whole super-blocks (min_k // 32 groups: the d/dmin
    pointers of the k-quants step by NG / 8)."""
    ng = _largest_ng(max(cfg.ng, kernel_facts(fmt).min_k // 32), groups)
    per_split = triton.cdiv(triton.cdiv(groups, ng), cfg.split) * ng
    return ng, per_split, triton.cdiv(groups, per_split)


def kernel_constexprs(fmt: str, cfg: MMConfig, ng: int, atomic: bool, has_bias: bool,
                      x_dtype: torch.dtype) -> dict[str, object]:  # fmt: skip
    """The constexpr arguments of `_qmm_kernel` for one launch."""
    return dict(
        FMT=kernel_facts(fmt).code, BM=cfg.bm, BN=cfg.bn, NG=ng, HAS_BIAS=has_bias,
        ATOMIC=atomic, PREC="ieee" if x_dtype == torch.float32 else "tf32", SWAP=cfg.swap,
        EMU=os.environ.get("TRITON_INTERPRET") == "1", STAGES=cfg.stages,
    )  # fmt: skip


def _launch(x, planes, fmt, n, bias, cfg: MMConfig) -> torch.Tensor:
    t, k = x.shape
    groups = k // 32
    ng, per_split, split = split_groups(fmt, cfg, groups)
    out = torch.empty((t, n), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(t, cfg.bm), triton.cdiv(n, cfg.bn), split)
    # split K: fp32 atomics into a persistent zeroed workspace, converted in the kernel
    acc = _WORKSPACE.get(x.device, t * n).view(t, n) if split > 1 else out
    cnt = _COUNTERS.get(x.device, grid[0] * grid[1]) if split > 1 else out
    _qmm_kernel[grid](
        x, acc, bias if bias is not None else acc, *plane_args(planes), out, cnt,
        t, n, groups, x.stride(0), acc.stride(0), per_split,
        **kernel_constexprs(fmt, cfg, ng, split > 1, bias is not None, x.dtype),
        num_warps=cfg.warps,
    )  # fmt: skip
    return out


_WORKSPACE = ZeroScratch(torch.float32)  # split-K partial sums [T, N]
_COUNTERS = ZeroScratch(torch.int32)  # per output tile: how many K splits have added their part
