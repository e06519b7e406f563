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
point, scale and min: ~2 instructions per weight, see `quant/h2_asm.deq_asm`), then arranges them in K
order so that the tile is stored to shared memory in 16-byte vectors without bank conflicts
and the x tile needs no permutation. With `MMConfig.prefetch` the scales of the next step are
loaded into registers a step ahead (they are 2-byte loads that `cp.async` cannot pipeline, so
otherwise each step waits for them). One `tl.dot` per step multiplies the two on the tensor
cores (weights as the A operand), so every weight byte is read from memory once per BM rows.
On sm_90 Triton waits for that wgmma before the loop goes on (`wgmma.wait_group 0` in the
loop), so a warpgroup decodes the next tile only after its MMA. With `MMConfig.ahead` the loop
decodes step i + 1's tile after issuing step i's MMA. Compiled without the JIT's integer
specialization, ptxas moved that decode before the wait (session 38). Compiled as a launch is
(`scripts/sass_qmm.py`, Triton 3.6), every HGMMA of a swapped tile has its own wait (ptxas
C7515, session 18), and at most 14 instructions sit beside the last one, ahead or not. Timed on
an H200 (weights from memory, the same tile with and without it; benchmarks/session39) it loses
at 32 rows (+20% to +98%) and on most shapes at 64-128 (Q4_K 28672x4096 at 100 rows 120.4 ->
125.3 us; with it the 128 x 64 tiles of 100-128 rows fit only 2 stages), and wins clearly only
on Q4_0 4096x11008 (llama2-7b's down projection) at 64-128 rows, -10% to -12% (elsewhere at
most -6%). No dispatch picks it.
With `MMConfig.streamk` the launch runs `qmm_streamk_triton.py` instead: that many programs
share the (tile, K step) work, so no wave is left part-empty (`mm_config` picks it at 65..128
rows where a format's `Tuning.streamk_waves` says, `_streamk`).
Q5_K, Q8_0, bf16/fp32 activations and the interpreter use the plain fp32 decode. The
format-specific parts (plane pointers, loads, the decode) are each format's `mm_ptrs`,
`mm_load`, `mm_advance`, `mm_deq` (`kernels/quant/q*_triton.py`, built on
`quant/mm_ops_triton.py`), passed to the kernel as constexpr arguments (`kernel_constexprs`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import torch
import triton
import triton.language as tl

from localllm.kernels.device import interpreting
from localllm.kernels.linear.gemv_core_triton import _write_out, plane_args
from localllm.kernels.pdl import pdl_args, pdl_enter
from localllm.kernels.quant import kernel_facts, triton_hooks
from localllm.kernels.scratch import ZeroScratch


@triton.jit
def _step(DEQ: tl.constexpr, acc, x, wd, hi, s, d, m, EMU: tl.constexpr, PREC: tl.constexpr,
          SWAP: tl.constexpr):  # fmt: skip
    """acc += one K step: x [BM, NG * 32] and the weight tile decoded by the format's `mm_deq`
    (DEQ; plain Triton for non-fp16 x) on the tensor cores."""
    return _dot(acc, x, _decode(DEQ, wd, hi, s, d, m, x.dtype, EMU), PREC, SWAP)


@triton.jit
def _load_step(LOAD: tl.constexpr, ADVANCE: tl.constexpr, DEQ: tl.constexpr, acc, x, wp, hp,
               sp, dp, mp, NG: tl.constexpr, EMU: tl.constexpr, PREC: tl.constexpr,
               SWAP: tl.constexpr):  # fmt: skip
    """acc += one K step: the weight tile at the format's plane pointers (wp .. mp, `LOAD`)
    times x [BM, NG * 32] (`_step`); returns acc and the pointers moved on a step (`ADVANCE`)."""
    wd, hi, s, d, m = LOAD(wp, hp, sp, dp, mp)
    acc = _step(DEQ, acc, x, wd, hi, s, d, m, EMU, PREC, SWAP)
    wp, hp, sp, dp, mp = ADVANCE(wp, hp, sp, dp, mp, NG)
    return acc, wp, hp, sp, dp, mp


@triton.jit
def _decode(DEQ: tl.constexpr, wd, hi, s, d, m, DT: tl.constexpr, EMU: tl.constexpr):
    """The weight tile [BN, NG * 32] in DT, by the format's `mm_deq` (its plain Triton decode
    for other than fp16, and in the interpreter)."""
    return DEQ(wd, hi, s, d, m, DT, EMU or DT != tl.float16)


@triton.jit
def _dot(acc, x, wt, PREC: tl.constexpr, SWAP: tl.constexpr):
    """acc += x [BM, NG * 32] times a decoded weight tile wt [BN, NG * 32] (see `_step`)."""
    if SWAP:
        acc = tl.dot(wt, tl.trans(x), acc, input_precision=PREC)  # [BN, BM]
    else:
        acc = tl.dot(x, tl.trans(wt), acc, input_precision=PREC)  # [BM, BN]
    return acc


@triton.jit
def _tile_rows(pid_n, pid_m, N, T, BN: tl.constexpr, BM: tl.constexpr):
    """Output tile (pid_n, pid_m)'s weight rows and x rows: offs_n [BN], its mask, the rows
    clamped into the weight (int64: weight loads need no mask), offs_m [BM], its mask."""
    offs_n = pid_n * BN + tl.arange(0, BN)
    mask_n = offs_n < N
    rows = (offs_n % N).to(tl.int64)
    offs_m = pid_m * BM + tl.arange(0, BM)
    return offs_n, mask_n, rows, offs_m, offs_m < T


@triton.jit
def _finish_tile(ws_ptrs, out_ptr, offs_m, offs_n, stride_om, omask, cnt, add, last):
    """After a program's part of a tile went into the zeroed fp32 workspace (ws_ptrs): add
    `add` to the tile's counter (release ours, acquire the others'); the program that finds
    `last` there completes the tile: it stores it to out [T, N] (row stride stride_om) in
    out's dtype and zeroes the workspace tile and the counter again."""
    tl.debug_barrier()
    if tl.atomic_add(cnt, add, sem="acq_rel", scope="gpu") == last:
        tile = tl.load(ws_ptrs, mask=omask, other=0.0, cache_modifier=".cg")
        tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :],
                 tile.to(out_ptr.dtype.element_ty), mask=omask)  # fmt: skip
        tl.store(ws_ptrs, tl.zeros_like(tile), mask=omask)
        tl.atomic_xchg(cnt, 0)


@triton.jit
def _qmm_kernel(
    x_ptr, out_ptr, bias_ptr, p0, p1, p2, p3, p4, res_ptr, cnt_ptr,
    T, N, G, stride_xm, stride_om, groups_per_split,
    PTRS: tl.constexpr, LOAD: tl.constexpr, ADVANCE: tl.constexpr, DEQ: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, NG: tl.constexpr,
    HAS_BIAS: tl.constexpr, ATOMIC: tl.constexpr, PREC: tl.constexpr, SWAP: tl.constexpr,
    EMU: tl.constexpr, STAGES: tl.constexpr, PREFETCH: tl.constexpr = False,
    AHEAD: tl.constexpr = False, PDL: tl.constexpr = False,
):  # fmt: skip
    """out [T, N] (+)= x [T, K] @ W^T (+ bias), K = 32 G; program (n, m, s) owns weight rows
    [n BN, n BN + BN), x rows [m BM, m BM + BM) and 32-element groups
    [s groups_per_split, (s + 1) groups_per_split) (NG divides both G and groups_per_split).
    ATOMIC (split K): out is a zeroed fp32 workspace the splits add into; the last split of a
    tile to finish (a counter per tile) stores the tile to res [T, N] in res's dtype and zeroes
    the workspace tile and the counter again, so no zeroing or conversion kernel is needed.
    PTRS, LOAD, ADVANCE, DEQ: the format's `mm_ptrs`, `mm_load`, `mm_advance`, `mm_deq`."""
    pdl_enter(PDL)
    pid_m = tl.program_id(0)  # M blocks of one weight tile run side by side: it is read from
    pid_n = tl.program_id(1)  # memory once and from L2 by the others
    pid_k = tl.program_id(2)
    offs_n, mask_n, rows, offs_m, mask_m = _tile_rows(pid_n, pid_m, N, T, BN, BM)
    xrow = x_ptr + offs_m.to(tl.int64)[:, None] * stride_xm  # [BM, 1]
    g_lo = pid_k * groups_per_split
    g_hi = tl.minimum(g_lo + groups_per_split, G)
    if SWAP:  # weights as the MMA's A operand (M = weight rows), x^T as B
        acc = tl.zeros([BN, BM], dtype=tl.float32)
    else:
        acc = tl.zeros([BM, BN], dtype=tl.float32)
    wp, hp, sp, dp, mp = PTRS(p0, p1, p2, p3, p4, rows, g_lo, G, NG)
    xp = xrow + (g_lo * 32 + tl.arange(0, NG * 32))[None, :]  # [BM, NG * 32]
    n_steps = tl.cdiv(g_hi - g_lo, NG)  # the host makes NG divide groups_per_split and G
    # Triton's pipeliner keeps STAGES - 1 steps of loads in flight (cp.async into shared
    # memory); the x tile goes to the MMA from there untouched (the weights are decoded in
    # K order)
    if AHEAD:  # step 0's weight tile decoded before the loop
        wd, hi, s, d, m = LOAD(wp, hp, sp, dp, mp)
        wt = _decode(DEQ, wd, hi, s, d, m, x_ptr.dtype.element_ty, EMU)  # [BN, NG * 32]
    if PREFETCH:  # the scales of step 0 (LOAD's unused word loads are dead code)
        _, _, s, d, m = LOAD(wp, hp, sp, dp, mp)
    for i in tl.range(n_steps, num_stages=STAGES):
        x = tl.load(xp, mask=mask_m[:, None], other=0.0)  # [BM, NG * 32]
        if AHEAD:  # step i's MMA, then step i + 1's tile decoded (the last step redecodes its
            # own): the decode has no dependence on the MMA, so ptxas runs it before the wait
            more = i + 1 < n_steps
            wn, hn, sn, dn, mn = ADVANCE(wp, hp, sp, dp, mp, NG)
            wp, hp = tl.where(more, wn, wp), tl.where(more, hn, hp)
            sp, dp, mp = tl.where(more, sn, sp), tl.where(more, dn, dp), tl.where(more, mn, mp)
            wd, hi, s, d, m = LOAD(wp, hp, sp, dp, mp)
            acc = _dot(acc, x, wt, PREC, SWAP)
            wt = _decode(DEQ, wd, hi, s, d, m, x.dtype, EMU)
        elif PREFETCH:
            wd, hi, _, _, _ = LOAD(wp, hp, sp, dp, mp)
            wn, hn, sn, dn, mn = ADVANCE(wp, hp, sp, dp, mp, NG)
            more = i + 1 < n_steps  # the last step reloads its own scales
            _, _, s2, d2, m2 = LOAD(wn, hn, tl.where(more, sn, sp), tl.where(more, dn, dp),
                                    tl.where(more, mn, mp))  # fmt: skip
            acc = _step(DEQ, acc, x, wd, hi, s, d, m, EMU, PREC, SWAP)
            s, d, m = s2, d2, m2
            wp, hp, sp, dp, mp = wn, hn, sn, dn, mn
        else:
            acc, wp, hp, sp, dp, mp = _load_step(LOAD, ADVANCE, DEQ, acc, x, wp, hp, sp, dp, mp,
                                                 NG, EMU, PREC, SWAP)  # fmt: skip
        xp += NG * 32
    if SWAP:
        acc = tl.trans(acc)  # [BM, BN]
    optrs = out_ptr + offs_m[:, None] * stride_om + offs_n[None, :]
    omask = mask_m[:, None] & mask_n[None, :]
    _write_out(acc, optrs, omask, bias_ptr, offs_n, mask_n, pid_k, HAS_BIAS, ATOMIC)
    if ATOMIC:  # the last split of this tile converts it
        _finish_tile(optrs, res_ptr, offs_m, offs_n, stride_om, omask,
                     cnt_ptr + pid_m * tl.num_programs(1) + pid_n, 1, tl.num_programs(2) - 1)  # fmt: skip


@dataclass(frozen=True)
class MMConfig:
    bm: int  # activation rows per program (>= 16, a power of 2)
    bn: int  # weight rows per program
    ng: int  # 32-element groups per K step
    split: int = 1  # programs along K (fp32 atomics when > 1)
    warps: int = 4
    stages: int = 3  # software pipeline depth (stages - 1 K steps of loads in flight)
    swap: bool = False  # weights as the A operand of the MMA (out^T = W x^T)
    prefetch: bool = False  # scales of the next K step loaded into registers a step ahead
    ahead: bool = False  # the next K step's weight tile decoded beside this step's MMA
    streamk: int = 0  # > 0: this many programs share the (tile, K step) work (qmm_streamk_triton)


def _largest_ng(ng: int, groups: int) -> int:
    """The largest power of 2 <= ng dividing the group count (K = 32 * groups)."""
    while groups % ng:
        ng //= 2
    return ng


def mm_smem(fmt: str, cfg: MMConfig, arch: int) -> int:
    """Shared memory of a launch with fp16 / bf16 x on sm_`arch`, bytes, as Triton 3.6-3.9
    allocates it (`scripts/check_consumer_configs.py` compiles every choice and checks the
    real figure; within 2% on sm_86 / sm_89, 11% on sm_90). sm_8x: `stages - 1` buffers of
    the x tile and of the packed weight tile in flight, and the decoded [BN, NG * 32] fp16
    operand of the MMA. sm_90 (wgmma): `stages` x buffers, and a swapped config's decoded
    weights reach the MMA from registers (A operand), so they take no shared memory."""
    facts = kernel_facts(fmt)
    group_bytes = 4 * facts.qbits + 2  # packed bytes per 32 weights: quants, scales (GGUF's)
    ng = max(cfg.ng, 8) if facts.min_k == 256 else cfg.ng  # as `_launch` runs it
    x_tile, w_tile, decoded = cfg.bm * ng * 32 * 2, cfg.bn * ng * group_bytes, cfg.bn * ng * 64
    if arch >= 90:
        return cfg.stages * x_tile + (cfg.stages - 1) * w_tile + (0 if cfg.swap else decoded)
    return (cfg.stages - 1) * (x_tile + w_tile) + decoded


# 17..64 rows, (groups per K step, stages) from the deepest pipeline down: `_wave_config`
# takes the first whose programs are all resident at once (H100 sweeps at 32 and 64 rows,
# weights read from memory, benchmarks/session17/probe_qmm_*_h100.jsonl); the 33..64-row
# split-K tiles below 16384 rows also try 4 groups at 4 stages before 3 stages (H200,
# benchmarks/session18: Q4_0 4096x4096 19.6 us vs 23.8 at 8 groups, 2 splits, 3 stages)
WAVE_STEPS = ((8, 4), (8, 3), (4, 3), (8, 2), (4, 2))
SPLIT_WAVE_STEPS = ((8, 4), (8, 3), (4, 4), (4, 3), (8, 2), (4, 2))
MAX_WAVE_SPLIT = 8  # K splits of a 33..64-row launch
# up to 16 rows, sm_90: 16 x 64 programs resident per SM with the scale prefetch, by registers
# (130-142 a thread of 128 compiled for sm_90, 65536 / (128 x 142) = 3; benchmarks/session19:
# 8 rows, Q4_0 22016x4096, 344 programs, 45.0 us with it vs 57.2; 28672x4096, 448, 63.0 vs 57.6)
PREFETCH_RESIDENT = 3


def _per_sm(fmt: str, cfg: MMConfig, smem: int, arch: int) -> int:
    """Programs of `cfg` resident on one SM by shared memory (1 KB reserved per block)."""
    return (smem + 1024) // (mm_smem(fmt, cfg, arch) + 1024)


def _wave_split(n: int, groups: int, bn: int, ng: int, num_sms: int) -> int:
    """K splits of a 33..64-row tile below 16384 rows: the most (a power of 2, at most
    `MAX_WAVE_SPLIT`) that keep the grid within two programs per SM and each split at least
    two K steps long."""
    tiles, split = triton.cdiv(n, bn), 1
    while (split * 2 <= MAX_WAVE_SPLIT and tiles * split * 2 <= 2 * num_sms
           and groups // (ng * split * 2) >= 2):  # fmt: skip
        split *= 2
    return split


def _wave_config(
    fmt: str, n: int, groups: int, bm: int, num_sms: int, smem: int, arch: int
) -> MMConfig | None:
    """17..64 rows in one block of bm = 32 / 64 rows. A program's K loop has little work per
    step to hide its loads behind, so the latency is hidden by a deep pipeline and by other
    programs on the SM: take the deepest pipeline at which all programs are resident at once
    (programs per SM from `mm_smem`). Matrices of 16384+ rows: 64 then 128 weight rows as the
    A operand (swap), no split K. Below 16384 rows (64-row blocks only): 64 weight rows as the
    A operand and split K (`_wave_split`), two warpgroups where that leaves at most one
    program per SM (not measured on sm_86 / sm_89, where `scripts/check_consumer_configs.py`
    finds 95 spilling `_qmm_kernel` configs with this rule against 143 with session 17's
    32-row tiles). The scale prefetch is on for sm_90 tiles of up to 64 weight rows of
    formats without a per-group min (H200, 64 rows: Q4_0 4096x4096 19.7 vs 20.5 us with it,
    12288x4096 37.6 vs 40.8; Q4_K 4096x14336 49.3 vs 50.5 without it, 6144x4096 31.0 vs 31.8);
    it costs registers (on sm_86 / sm_89, where these tiles already take 255, it made 38
    configs spill; not measured there). Where no config fits one wave: for 64-row blocks the
    fewest waves (Q6_K 128256x4096: 331 vs 356 us), for 32-row blocks None (split K,
    `mm_config`).
    H100, weights read from memory, us, against the previous heuristic (`probe_qmm.py
    --confirm`): 64 rows, 22016x4096 Q4_0 51.6 vs 92.2; Q4_K 28672x4096 72.1 vs 85.6 (128 x
    256, 2 stages); 32 rows, Q4_0 22016x4096 49.5 vs 100.8. H200, 64 rows, the split-K tiles
    against the 32 x 64 tiles without split (x as the A operand) they replaced
    (benchmarks/session18): Q4_K 4096x14336 49.3 vs 67.5 us (4 splits, 2 stages), Q6_K
    4096x14336 50.8 vs 79.4, Q4_0 4096x11008 34.8 vs 47.2 (4 groups a step, 4 splits, 4
    stages), 12288x4096 37.8 vs 40.3, 4096x4096 19.6 vs 20.8, Q4_K 6144x4096 30.9 vs 33.6."""
    facts = kernel_facts(fmt)
    min_ng, prefetch = facts.min_k // 32, arch >= 90 and not facts.has_min
    tall = n >= 16384
    best: tuple[int, MMConfig] | None = None
    for ng, stages in WAVE_STEPS if tall else SPLIT_WAVE_STEPS:
        ng = _largest_ng(max(ng, min_ng), groups)
        for bn in (64, 128) if tall else (64,):
            split = 1 if tall else _wave_split(n, groups, bn, ng, num_sms)
            programs = triton.cdiv(n, bn) * split
            cfg = MMConfig(bm, bn, ng, split, warps=8 if programs <= num_sms and not tall else 4,
                           stages=stages, swap=True, prefetch=prefetch and bn <= 64)  # fmt: skip
            per_sm = _per_sm(fmt, cfg, smem, arch)
            if per_sm == 0:
                continue
            waves = triton.cdiv(programs, per_sm * num_sms)
            if waves == 1:
                return cfg
            if best is None or waves < best[0]:
                best = (waves, cfg)
    return best[1] if best is not None and bm == 64 else None


# every eager launch asks (the 17..64-row search costs ~40 us of Python); configs are frozen
@functools.lru_cache(maxsize=4096)
def mm_config(fmt: str, n: int, k: int, t: int, num_sms: int, smem: int, arch: int) -> MMConfig:
    """The launch config of the fused GEMM for `t` rows of a [n, k] weight of format `fmt`:
    `plain_mm_config`, on a stream-K schedule at 65..128 rows where the format's measured wave
    span says (`_streamk`)."""
    cfg = plain_mm_config(fmt, n, k, t, num_sms, smem, arch)
    if t <= 64:
        return cfg
    programs = triton.cdiv(n, cfg.bn) * triton.cdiv(t, cfg.bm) * cfg.split
    return _streamk(fmt, cfg, programs, num_sms, smem, arch)


def plain_mm_config(fmt: str, n: int, k: int, t: int, num_sms: int, smem: int,
                    arch: int) -> MMConfig:  # fmt: skip
    """Heuristic from the H200 sweeps (scripts/probe_qmm.py, weights from memory, CUDA-graph
    timing; benchmarks/probe_qmm_session4.jsonl, probe_qmm_t128.jsonl, session18/). Up to 32
    rows: one M block covers them all (every weight tile is decoded once), 64 weight rows x
    256 K per step as the MMA's A operand (swap), 4 warps, a 3-stage pipeline; 128 weight rows
    for very tall matrices where shared memory allows (28672x4096 Q4_K, 32 rows: 55 vs 70 us);
    split K until the grid has 1.5 programs per SM. On sm_90 the scale prefetch is on for
    4-bit formats up to 16 rows where all programs stay resident with it (`PREFETCH_RESIDENT`;
    H200, 8 rows: Q4_0 22016x4096, 344 programs, 45.0 vs 57.2 us; Q4_K 4096x14336 at 16 rows,
    4 splits, 28.8 vs 33.3; off for Q4_0 28672x4096, 448 programs, 57.6 vs 63.0 with it, and
    for Q6_K, 34.4 vs 42.0) and for
    all formats at 17..32 rows, 4-bit ones with a 4-stage pipeline where all programs stay
    resident (32 rows: Q4_K 4096x14336 40.0 vs 48.6, Q4_0 4096x4096 15.3 vs 18.7; Q6_K kept 3
    stages, 36.9 vs 37.3). 65..128 rows (batched decode of many streams, the prefill graph of
    a short turn after a cached prefix): one 128-row block and two warpgroups, split K only up
    to one program per SM (128 rows, Q4_K: 28672x4096 120 vs 208 us with two 64-row blocks of
    4 warps, 6144x4096 40 vs 83 us, 4096x14336 74 vs 143 us). 33..64 rows, and 17..32 rows
    of matrices of 16384+ rows: `_wave_config`. `smem` is the GPU's shared memory per block:
    128 weight rows only where the measured 32 x 128 tile fits with its 3 stages (not in 99
    KB), and a config that needs more (`mm_smem`) steps down as `_smaller` does (2 stages,
    then fewer weight rows): on the H200 the 128 x 128 tiles of 65+ rows run 2 stages, and so
    do most tiles on 99 KB RTX 30xx/40xx."""
    groups = k // 32
    big = t > 64
    bm = 128 if big else max(16, triton.next_power_of_2(t))
    if bm == 64 or bm == 32 and n >= 16384:
        wave = _wave_config(fmt, n, groups, bm, num_sms, smem, arch)
        if wave is not None:
            return wave
    ng = _largest_ng(8, groups)
    tall = MMConfig(32, 128, ng, stages=3)  # the measured tall tile, with its full pipeline
    bn = 128 if n >= 16384 and bm >= 32 and mm_smem(fmt, tall, arch) <= smem else 64
    cfg = MMConfig(bm, bn, ng, warps=8 if big else 4, stages=3, swap=True)
    while mm_smem(fmt, cfg, arch) > smem and (smaller := _smaller(cfg)) is not None:
        cfg = smaller
    ctas = triton.cdiv(n, cfg.bn) * triton.cdiv(t, cfg.bm)
    split = 1

    def wants_more(split: int) -> bool:  # too few programs, and K left to split
        few = ctas * split * 2 <= num_sms if big else 2 * ctas * split < 3 * num_sms
        return few and groups // (cfg.ng * split * 2) >= 2

    while wants_more(split):
        split *= 2
    cfg = replace(cfg, split=split)
    if big or arch < 90 or cfg.bn > 64:
        return cfg
    four_bit = kernel_facts(fmt).qbits == 4
    if bm == 32:  # the scale prefetch; 4-bit formats: 4 stages if all programs stay resident
        cfg = replace(cfg, prefetch=True)
        deeper = replace(cfg, stages=4)
        if (
            four_bit
            and cfg.stages == 3
            and _per_sm(fmt, deeper, smem, arch) * num_sms >= ctas * split
        ):
            cfg = deeper
    elif four_bit and ctas * split <= PREFETCH_RESIDENT * num_sms:  # up to 16 rows
        cfg = replace(cfg, prefetch=True)
    return cfg


def _streamk(
    fmt: str, cfg: MMConfig, programs: int, num_sms: int, smem: int, arch: int
) -> MMConfig:
    """A 65..128-row config of `programs` programs, on a stream-K schedule (as many programs
    as are resident at once share its (tile, K step) work, `qmm_streamk_triton.py`) where
    those programs take (lo, hi] waves, `Tuning.streamk_waves` of the format. The plain grid
    leaves SMs idle in a part-filled last wave (Q4_0 12288x4096 at 100 rows: 192 programs on
    132 SMs, 72.0 -> 48.2 us on an H100) or pays split K's atomics on every tile (Q6_K
    4096x14336, 64 tiles x 2 splits: 78.5 -> 66.4 us; Q4_K 6144x4096, 96 programs: 40.8 ->
    31.0; BENCHMARKS session 45). A grid of whole waves without split K has nothing to
    balance (an RTX 4090's 128 programs of 128 x 32 tiles at 100 rows on 128 SMs): it stays
    plain. Not measured on sm_86 / sm_89, where the same wave count picks it
    (`scripts/check_consumer_configs.py` compiles those launches)."""
    span = kernel_facts(fmt).tuning.streamk_waves
    slots = _per_sm(fmt, cfg, smem, arch) * num_sms
    whole_waves = cfg.split == 1 and slots > 0 and programs % slots == 0
    if span is None or slots == 0 or whole_waves or not span[0] < programs / slots <= span[1]:
        return cfg
    return replace(cfg, split=1, streamk=slots)


def _smaller(cfg: MMConfig) -> MMConfig | None:
    """The next config to try when `cfg` needs more shared memory than the GPU has."""
    if cfg.stages > 2:
        return replace(cfg, stages=cfg.stages - 1)
    if cfg.bn > 32:
        return replace(cfg, bn=cfg.bn // 2)
    if cfg.bm > 16:
        return replace(cfg, bm=cfg.bm // 2)
    return None


def _roomier(cfg: MMConfig) -> list[MMConfig]:
    """The configs to try, in order, when `cfg`'s program spills registers: twice the warps over
    the same tile (each thread holds half as much of it), first with at least 3 stages (the
    freed registers carry a deeper pipeline: Triton 3.9, H200, 64 x 128 tiles of gate+up at 64
    rows 90.7 -> 83.1 us, of the LM head 418.7 -> 327.0 us), then with its own."""
    if cfg.warps >= 8:
        return []
    wide = replace(cfg, warps=cfg.warps * 2)
    return [replace(wide, stages=3), wide] if cfg.stages < 3 else [wide]


# local memory a thread may spill to before a config is retried with more warps: the tuned
# Triton 3.6 picks spill up to 72 B (64-row 64 x 128 tiles: 48-64 B, measured faster than
# 8 warps: an H200 decoded 64 streams 11% slower with them widened), Triton 3.9's ptxas
# spills the same tiles 432-784 B (BENCHMARKS.md, session 20)
SPILL_TOLERANCE = 128


def _spills(kernel: object) -> bool:
    """Whether a launched Triton kernel spills more than SPILL_TOLERANCE bytes a thread (its
    `n_spills` counts 4-byte words of local memory; False when unknown: the interpreter
    returns no compiled kernel)."""
    return 4 * (getattr(kernel, "n_spills", 0) or 0) > SPILL_TOLERANCE


# (format, dtype, config) -> the config launched for it on this GPU and Triton (fitted at the
# key's first launch: smaller where it did not fit, wider where it spilled)
_FITTED: dict[tuple, MMConfig] = {}


def qmm_launch(
    x: torch.Tensor,  # [T, K] fp16 / bf16 / fp32, K a multiple of 32
    planes: list[torch.Tensor],
    fmt: str,
    n: int,
    bias: torch.Tensor | None,
    cfg: MMConfig,
) -> torch.Tensor:  # [T, N] in x.dtype
    """The GEMM with `cfg`, or with the config it was fitted to on this GPU and compiler: a
    smaller one where it needs more shared memory than the GPU has, and, at its first launch,
    twice the warps (`_roomier`) where its program spills more than SPILL_TOLERANCE and that
    one does not. The register budget of a tile depends on the Triton build: Triton 3.9's
    sm_90 ptxas spills the 4-warp 32 x 128 tiles that 3.6's keeps in registers (432-472 B a
    thread; BENCHMARKS.md, session 20). The engine's warm-up runs before CUDA-graph capture
    make these first launches. One check serves every launch of the key (format, dtype,
    config), whatever its shape."""
    key = (fmt, x.dtype, cfg)
    first = key not in _FITTED
    cfg = _FITTED.get(key, cfg)
    while True:
        try:
            out, kernel = _launch(x, planes, fmt, n, bias, cfg)
        except triton.runtime.errors.OutOfResources:
            smaller = _smaller(cfg)
            if smaller is None:
                raise
            cfg = _FITTED[key] = smaller
            continue
        break
    if first:
        _FITTED[key] = cfg
        for roomier in _roomier(cfg) if _spills(kernel) else []:
            try:
                out2, kernel2 = _launch(x, planes, fmt, n, bias, roomier)
            except triton.runtime.errors.OutOfResources:
                continue
            if not _spills(kernel2):
                _FITTED[key] = roomier
                return out2
    return out


def split_groups(fmt: str, ng: int, split: int, groups: int) -> tuple[int, int, int]:
    """(NG groups per K step, groups per split, splits) of a launch over `groups` 32-element
    groups asking for steps of `ng` groups and `split` splits (the `mm_*` functions of a
    format, here and in `dequant_triton`): NG divides both; a step covers whole super-blocks
    (min_k // 32 groups: the d/dmin pointers of the k-quants step by NG / 8)."""
    ng = _largest_ng(max(ng, kernel_facts(fmt).min_k // 32), groups)
    per_split = triton.cdiv(triton.cdiv(groups, ng), split) * ng
    return ng, per_split, triton.cdiv(groups, per_split)


def kernel_constexprs(fmt: str, cfg: MMConfig, ng: int, atomic: bool, has_bias: bool,
                      x_dtype: torch.dtype) -> dict[str, object]:  # fmt: skip
    """The constexpr arguments of `_qmm_kernel` for one launch."""
    hooks = triton_hooks(fmt)
    return dict(
        PTRS=hooks.mm_ptrs, LOAD=hooks.mm_load, ADVANCE=hooks.mm_advance, DEQ=hooks.mm_deq,
        BM=cfg.bm, BN=cfg.bn, NG=ng, HAS_BIAS=has_bias,
        ATOMIC=atomic, PREC="ieee" if x_dtype == torch.float32 else "tf32", SWAP=cfg.swap,
        EMU=interpreting(), STAGES=cfg.stages,
        PREFETCH=cfg.prefetch, AHEAD=cfg.ahead,
    )  # fmt: skip


def _launch(x, planes, fmt, n, bias, cfg: MMConfig) -> tuple[torch.Tensor, object]:
    """(the output, the compiled kernel Triton launched)."""
    if cfg.streamk:
        from localllm.kernels.linear.qmm_streamk_triton import streamk_launch

        return streamk_launch(x, planes, fmt, n, bias, cfg)
    t, k = x.shape
    groups = k // 32
    ng, per_split, split = split_groups(fmt, cfg.ng, cfg.split, groups)
    out = torch.empty((t, n), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(t, cfg.bm), triton.cdiv(n, cfg.bn), split)
    # split K: fp32 atomics into a persistent zeroed workspace, converted in the kernel
    acc = _WORKSPACE.get(x.device, t * n).view(t, n) if split > 1 else out
    cnt = _COUNTERS.get(x.device, grid[0] * grid[1]) if split > 1 else out
    kernel = _qmm_kernel[grid](
        x, acc, bias if bias is not None else acc, *plane_args(planes), out, cnt,
        t, n, groups, x.stride(0), acc.stride(0), per_split,
        **kernel_constexprs(fmt, cfg, ng, split > 1, bias is not None, x.dtype),
        num_warps=cfg.warps, **pdl_args(x.device),
    )  # fmt: skip
    return out, kernel


_WORKSPACE = ZeroScratch(torch.float32)  # split-K partial sums [T, N]
_COUNTERS = ZeroScratch(torch.int32)  # per output tile: how many K splits have added their part
