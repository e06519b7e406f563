"""The fused dequant x GEMM of `qmm_triton.py` on a stream-K schedule: a fixed number of
programs (`MMConfig.streamk`, e.g. one per SM) share the launch's (output tile, K step)
iterations evenly, in tile order, so no wave is left part-empty.

Why: at 65-128 rows the dispatch runs one 128-row block per weight tile, one program per SM,
and several llama shapes leave SMs idle in their last wave (H200, 132 SMs: llama3-8b's QKV
96 programs, 73% of one wave; its gate+up 224, 85% of two; `scripts/wave_fill_configs.py`).
More, smaller programs (split K, narrower tiles) lost to their per-program cost (session 38:
the QKV with 4 K splits 49.9 vs 41.8 us). Here the program count stays at the SM count.

Each program walks its iteration range as segments, one per output tile it touches: a segment
runs the K steps [k0, k1) of its tile through the same pipelined loop as `_qmm_kernel` (the
format's `mm_ptrs` / `mm_load` / `mm_advance` / `mm_deq`), then
- stores the tile straight to the output when it holds all of the tile's K steps;
- else adds its partial sums into the zeroed fp32 workspace, then adds its step count to the
  tile's counter; the segment that completes the count converts the workspace tile to the
  output and zeroes the tile and its counter again (the split-K epilogue of `_qmm_kernel`, with
  a count of steps instead of splits, since a tile's segments vary in number and length).

Tested against the reference (the interpreter, and on the GPU on 7-8B shapes); timed by
`scripts/probe_qmm.py --configs` with a `streamk` field (`scripts/wave_fill_configs.py
--streamk`). `qmm_triton.mm_config` picks it at 65..128 rows where the format's
`Tuning.streamk_waves` says (Q4_0 past one wave, Q6_K; BENCHMARKS session 42).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from localllm.kernels.linear.gemv_core_triton import _write_out, plane_args
from localllm.kernels.linear.qmm_triton import (
    _COUNTERS,
    _WORKSPACE,
    MMConfig,
    _finish_tile,
    _load_step,
    _tile_rows,
    kernel_constexprs,
    split_groups,
)
from localllm.kernels.pdl import pdl_args, pdl_enter


@triton.jit
def _qmm_streamk_kernel(
    x_ptr, ws_ptr, bias_ptr, p0, p1, p2, p3, p4, out_ptr, cnt_ptr,
    T, N, G, stride_xm, stride_om, n_steps, per_prog, total, tiles_m,
    PTRS: tl.constexpr, LOAD: tl.constexpr, ADVANCE: tl.constexpr, DEQ: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, NG: tl.constexpr,
    HAS_BIAS: tl.constexpr, ATOMIC: tl.constexpr, PREC: tl.constexpr, SWAP: tl.constexpr,
    EMU: tl.constexpr, STAGES: tl.constexpr, SEGS: tl.constexpr, PREFETCH: tl.constexpr = False,
    AHEAD: tl.constexpr = False, PDL: tl.constexpr = False,
):  # fmt: skip
    """out [T, N] = x [T, K] @ W^T (+ bias), K = 32 G: program p runs iterations
    [p per_prog, (p + 1) per_prog) of `total` = tiles x n_steps, iteration i being K step
    i % n_steps of tile i // n_steps; tile = n * tiles_m + m (the M blocks of one weight tile
    are neighbours, as in `_qmm_kernel`'s grid). ws: the zeroed fp32 workspace [T, N]; cnt: a
    zeroed int32 counter per tile. SEGS: the most tiles a program's range can touch
    (cdiv(per_prog, n_steps) + 1), its segments unrolled. ATOMIC, PREFETCH, AHEAD: unused
    (`kernel_constexprs`)."""
    pdl_enter(PDL)
    it = tl.program_id(0) * per_prog
    end = tl.minimum(it + per_prog, total)
    for _seg in tl.static_range(SEGS):  # unrolled: a loop here costs 232-336 B of spills (3.9)
        if it < end:
            tile = it // n_steps
            k0 = it % n_steps
            k1 = tl.minimum(n_steps, k0 + end - it)
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
            om = offs_m[:, None] * stride_om + offs_n[None, :]
            omask = mask_m[:, None] & mask_n[None, :]
            if (k0 == 0) & (k1 == n_steps):  # the whole tile: stored as it is
                _write_out(acc, out_ptr + om, omask, bias_ptr, offs_n, mask_n, k0, HAS_BIAS, False)
            else:  # a part: into the workspace; the part that completes the tile converts it
                _write_out(acc, ws_ptr + om, omask, bias_ptr, offs_n, mask_n, k0, HAS_BIAS, True)
                _finish_tile(ws_ptr + om, out_ptr, offs_m, offs_n, stride_om, omask, cnt_ptr + tile,
                             k1 - k0, n_steps - (k1 - k0))  # fmt: skip
            it += k1 - k0


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
    programs = min(cfg.streamk, total)
    per_prog = triton.cdiv(total, programs)
    out = torch.empty((t, n), device=x.device, dtype=x.dtype)
    ws = _WORKSPACE.get(x.device, t * n).view(t, n)
    cnt = _COUNTERS.get(x.device, tiles)
    kernel = _qmm_streamk_kernel[(triton.cdiv(total, per_prog),)](
        x, ws, bias if bias is not None else ws, *plane_args(planes), out, cnt,
        t, n, groups, x.stride(0), ws.stride(0), n_steps, per_prog, total, tiles_m,
        **kernel_constexprs(fmt, cfg, ng, True, bias is not None, x.dtype),
        SEGS=triton.cdiv(per_prog, n_steps) + 1, num_warps=cfg.warps, **pdl_args(x.device),
    )  # fmt: skip
    return out, kernel
