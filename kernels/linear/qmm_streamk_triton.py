"""The fused dequant x GEMM of `qmm_triton.py` on a stream-K schedule: a fixed number of
programs (`MMConfig.streamk`, e.g. one per SM) share the launch's (output tile, K step)
iterations evenly, in tile order, so no wave is left part-empty.

Why: at 65-128 rows the dispatch runs one 128-row block per weight tile, one program per SM,
and several llama shapes leave SMs idle in their last wave (H200, 132 SMs: llama3-8b's QKV
96 programs, 73% of one wave; its gate+up 224, 85% of two; `scripts/wave_fill_configs.py`).
More, smaller programs (split K, narrower tiles) lost to their per-program cost (session 38:
the QKV with 4 K splits 49.9 vs 41.8 us). Here the program count stays at the SM count.

Each program walks its iteration range backwards as segments, one per output tile it touches:
a segment runs the K steps [k0, k1) of its tile through the same pipelined loop as
`_qmm_kernel` (the format's `mm_ptrs` / `mm_load` / `mm_advance` / `mm_deq`), then
- a segment with the tile's last step (k1 = n_steps) owns the tile: it adds the partial tiles
  of the tile's first k0 steps, waiting for each one's flag, and stores the tile (+ bias);
- the other kind, the first steps of a tile that a range ends in (one per program at most),
  stores its fp32 partial tile to the program's slot and raises the program's flag.
Walking backwards, a program does its flagged part first and the parts it owns last, so owners
seldom wait: the parts they need were their lower neighbours' first segments. Programs take
tickets in the order they start and a range follows the ticket, so a program waits only on
programs that have started and never wait before raising their flag: no deadlock, whatever
the occupancy (the Triton interpreter runs programs in order, lower tickets first). Each
split tile costs one plain store and one load of its partial, summed in K order (the result
is deterministic). Session 42's form added parts with fp32 atomics into a zeroed workspace
that the last part converted and zeroed again (4 passes over a partial tile, 2 of them
atomic): 128 x 128 Q4_K tiles lost to the plain grid with it.

Tested against the reference (the interpreter, and on the GPU on 7-8B shapes); timed by
`scripts/probe_qmm.py --configs` with a `streamk` field (`scripts/wave_fill_configs.py
--streamk`). `qmm_triton.mm_config` picks it at 65..128 rows where the format's
`Tuning.streamk_waves` says (Q4_0, Q4_K, Q6_K from 0.7 to 2 waves of plain programs: faster
on every 7-8B shape timed, H100, BENCHMARKS session 45).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from localllm.kernels.linear.gemv_core_triton import _write_out, plane_args
from localllm.kernels.linear.qmm_triton import (
    _COUNTERS,
    MMConfig,
    _load_step,
    _tile_rows,
    kernel_constexprs,
    split_groups,
)
from localllm.kernels.pdl import pdl_args, pdl_enter
from localllm.kernels.scratch import Scratch


@triton.jit
def _qmm_streamk_kernel(
    x_ptr, part_ptr, bias_ptr, p0, p1, p2, p3, p4, out_ptr, flag_ptr,
    T, N, G, stride_xm, stride_om, n_steps, per_prog, total, tiles_m, programs,
    PTRS: tl.constexpr, LOAD: tl.constexpr, ADVANCE: tl.constexpr, DEQ: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, NG: tl.constexpr,
    HAS_BIAS: tl.constexpr, ATOMIC: tl.constexpr, PREC: tl.constexpr, SWAP: tl.constexpr,
    EMU: tl.constexpr, STAGES: tl.constexpr, SEGS: tl.constexpr, PREFETCH: tl.constexpr = False,
    AHEAD: tl.constexpr = False, PDL: tl.constexpr = False,
):  # fmt: skip
    """out [T, N] = x [T, K] @ W^T (+ bias), K = 32 G: the program of ticket p runs iterations
    [p per_prog, (p + 1) per_prog) of `total` = tiles x n_steps, iteration i being K step
    i % n_steps of tile i // n_steps; tile = n * tiles_m + m (the M blocks of one weight tile
    are neighbours, as in `_qmm_kernel`'s grid). It walks its range backwards, a segment per
    tile. part: fp32 [programs, BM, BN], a partial tile per program; flag: zeroed int32
    [programs + 1], "program p's partial tile is stored", then the ticket counter. SEGS: the
    most tiles a range can touch (cdiv(per_prog, n_steps) + 1), its segments unrolled.
    ATOMIC, PREFETCH, AHEAD: unused (`kernel_constexprs`)."""
    pdl_enter(PDL)
    # tickets in start order: a program waits only on lower tickets, which have started
    p = tl.atomic_add(flag_ptr + programs, 1)
    if p == programs - 1:  # the last ticket: the counter is zero again for the next launch
        tl.atomic_xchg(flag_ptr + programs, 0)
    idx = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]  # [BM, BN]
    lo = p * per_prog
    it = tl.minimum(lo + per_prog, total)
    for _seg in tl.static_range(SEGS):  # unrolled: a loop here costs 232-336 B of spills (3.9)
        if it > lo:
            tile = (it - 1) // n_steps
            base = tile * n_steps
            k0 = tl.maximum(lo, base) - base
            k1 = it - base
            offs_n, mask_n, rows, offs_m, mask_m = _tile_rows(tile // tiles_m, tile % tiles_m, N,
                                                              T, BN, BM)  # fmt: skip
            g_lo = k0 * NG
            if SWAP:
                acc = tl.zeros([BN, BM], dtype=tl.float32)
            else:
                acc = tl.zeros([BM, BN], dtype=tl.float32)
            wp, hp, sp, dp, mp = PTRS(p0, p1, p2, p3, p4, rows, g_lo, G, NG)
            xp = x_ptr + offs_m.to(tl.int64)[:, None] * stride_xm
            xp += (g_lo * 32 + tl.arange(0, NG * 32))[None, :]  # [BM, NG * 32]
            for _ in tl.range(k1 - k0, num_stages=STAGES):
                x = tl.load(xp, mask=mask_m[:, None], other=0.0)  # [BM, NG * 32]
                acc, wp, hp, sp, dp, mp = _load_step(LOAD, ADVANCE, DEQ, acc, x, wp, hp, sp, dp,
                                                     mp, NG, EMU, PREC, SWAP)  # fmt: skip
                xp += NG * 32
            if SWAP:
                acc = tl.trans(acc)  # [BM, BN]
            if k1 < n_steps:  # the tile's first steps (a range's last tile): left for its owner
                tl.store(part_ptr + p * (BM * BN) + idx, acc)
                tl.debug_barrier()  # all threads' stores, then the flag (release)
                tl.atomic_xchg(flag_ptr + p, 1, sem="release", scope="gpu")
            else:  # the tile's last steps: the owner adds the lower tickets' parts, in K order
                q_lo = base // per_prog  # the tickets holding steps [0, k0), all below p
                for q in range(q_lo, tl.where(k0 > 0, (base + k0 - 1) // per_prog + 1, q_lo)):
                    ready = tl.atomic_add(flag_ptr + q, 0, sem="acquire", scope="gpu")
                    while ready == 0:
                        ready = tl.atomic_add(flag_ptr + q, 0, sem="acquire", scope="gpu")
                    acc += tl.load(part_ptr + q * (BM * BN) + idx, cache_modifier=".cg")
                    tl.atomic_xchg(flag_ptr + q, 0)
                om = offs_m[:, None] * stride_om + offs_n[None, :]
                _write_out(acc, out_ptr + om, mask_m[:, None] & mask_n[None, :], bias_ptr,
                           offs_n, mask_n, 0, HAS_BIAS, False)  # fmt: skip
            it = base + k0


def streamk_launch(x, planes, fmt, n, bias, cfg: MMConfig) -> tuple[torch.Tensor, object]:
    """(the output [T, N] in x's dtype, the compiled kernel) of `cfg.streamk` programs; cfg.split
    is ignored (the schedule splits K where a tile's iterations fall to two programs)."""
    t, k = x.shape
    groups = k // 32
    ng, _, _ = split_groups(fmt, cfg.ng, 1, groups)
    n_steps = groups // ng
    tiles_m = triton.cdiv(t, cfg.bm)
    tiles = tiles_m * triton.cdiv(n, cfg.bn)
    total = tiles * n_steps
    per_prog = triton.cdiv(total, min(cfg.streamk, total))
    programs = triton.cdiv(total, per_prog)
    out = torch.empty((t, n), device=x.device, dtype=x.dtype)
    part = _PARTS.get(x.device, programs * cfg.bm * cfg.bn)
    flag = _COUNTERS.get(x.device, programs + 1)
    kernel = _qmm_streamk_kernel[(programs,)](
        x, part, bias if bias is not None else part, *plane_args(planes), out, flag,
        t, n, groups, x.stride(0), out.stride(0), n_steps, per_prog, total, tiles_m, programs,
        **kernel_constexprs(fmt, cfg, ng, True, bias is not None, x.dtype),
        SEGS=triton.cdiv(per_prog, n_steps) + 1, num_warps=cfg.warps, **pdl_args(x.device),
    )  # fmt: skip
    return out, kernel


_PARTS = Scratch(torch.float32)  # a partial output tile per program [programs, BM, BN]
