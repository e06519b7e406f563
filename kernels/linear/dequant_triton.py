"""Dequantize a packed weight into a dense [N, K] fp16 / bf16 matrix (fp32 for the reference
path): the prefill path (more than `plan.MM_MAX_T` rows), where cuBLAS then multiplies on the
tensor cores.

Prefill of an 8B model re-dequantizes every weight per step, writing ~14 GB of fp16 for a
512-token chunk: the kernel has to run at copy bandwidth. Each program owns BN weight rows and
K/split of their columns, and walks them in steps of NG 32-element groups with the format's
fused-GEMM functions (`mm_ptrs`, `mm_load`, `mm_advance`, `mm_deq`; `kernels/quant/base.py`):
a thread decodes whole 32-element groups of a row in packed fp16 (~2 instructions per weight)
into K order, so each group's 64 bytes leave it as one contiguous run (vector stores where the
shapes' alignment lets Triton prove it; the old per-field decode wrote 8-byte pieces 64 bytes
apart). Many programs per SM keep the loads in flight (a software
pipeline, `stages`, measured no faster). Configs: `dequant_config` (shapes, the GPU's SMs).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from localllm.kernels.device import device_props, interpreting
from localllm.kernels.linear.gemv_core_triton import plane_args
from localllm.kernels.linear.qlinear import QuantWeight
from localllm.kernels.linear.qmm_triton import split_groups
from localllm.kernels.quant import triton_hooks


@triton.jit
def _dequant_kernel(
    out_ptr, p0, p1, p2, p3, p4, N, G, groups_per_split,
    PTRS: tl.constexpr, LOAD: tl.constexpr, ADVANCE: tl.constexpr, DEQ: tl.constexpr,
    BN: tl.constexpr, NG: tl.constexpr, EMU: tl.constexpr, STAGES: tl.constexpr,
):  # fmt: skip
    """out [N, K] = W, K = 32 G; program (n, s) owns rows [n BN, n BN + BN) and groups
    [s groups_per_split, (s + 1) groups_per_split) (NG divides both G and groups_per_split).
    PTRS, LOAD, ADVANCE, DEQ: the format's `mm_ptrs`, `mm_load`, `mm_advance`, `mm_deq`."""
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_n = pid_n * BN + tl.arange(0, BN)  # [BN]
    mask_n = offs_n < N
    rows = (offs_n % N).to(tl.int64)  # clamped rows: loads need no mask, stores do
    g_lo = pid_k * groups_per_split
    g_hi = tl.minimum(g_lo + groups_per_split, G)
    wp, hp, sp, dp, mp = PTRS(p0, p1, p2, p3, p4, rows, g_lo, G, NG)
    op = out_ptr + rows[:, None] * (G * 32) + (g_lo * 32 + tl.arange(0, NG * 32))[None, :]
    n_steps = tl.cdiv(g_hi - g_lo, NG)
    for _ in tl.range(n_steps, num_stages=STAGES):
        wd, hi, s, d, m = LOAD(wp, hp, sp, dp, mp)
        w = DEQ(wd, hi, s, d, m, out_ptr.dtype.element_ty, EMU)  # [BN, NG * 32]
        tl.store(op, w, mask=mask_n[:, None])
        op += NG * 32
        wp, hp, sp, dp, mp = ADVANCE(wp, hp, sp, dp, mp, NG)


@dataclass(frozen=True)
class DequantConfig:
    bn: int  # weight rows per program
    ng: int  # 32-element groups per K step (the format's super-block at least)
    split: int = 1  # programs along K
    warps: int = 4
    stages: int = 1  # software pipeline depth (loads of stages - 1 steps in flight)


# waves of programs a launch aims for: enough programs per SM to keep loads in flight
WAVES = 8


def dequant_config(fmt: str, n: int, k: int, num_sms: int) -> DequantConfig:
    """From `scripts/sweep_dequant.py` (H200, benchmarks/session8/sweep_dequant.jsonl): 16 rows
    x 512 K per step, 8 warps, no software pipeline (the program count hides the latency),
    split K until the grid has WAVES programs per SM: 3.4-3.6 TB/s of packed + fp16 bytes
    (83-88% of copy) on Q4_K 28672x4096, Q4_0 22016x4096, Q6_K 4096x14336, Q4_0 4096x11008
    (the kernel this replaced: 1.0-1.5 TB/s). The per-program footprint is small (no shared
    memory beyond Triton's layout conversions), so the same shape fits sm_86 / sm_89."""
    bn, ng = 16, 16
    return DequantConfig(bn, ng, dequant_split(fmt, n, k, num_sms, bn, ng), warps=8, stages=1)


def dequant_split(fmt: str, n: int, k: int, num_sms: int, bn: int, ng: int) -> int:
    """Programs along K: doubled until the grid has WAVES programs per SM, while each split
    keeps at least 2 steps of NG groups."""
    groups = k // 32
    ng = split_groups(fmt, ng, 1, groups)[0]
    split = 1
    while triton.cdiv(n, bn) * split < WAVES * num_sms and groups // (ng * split * 2) >= 2:
        split *= 2
    return split


def dequant_launch(
    w: QuantWeight, dtype: torch.dtype, cfg: DequantConfig, out: torch.Tensor | None = None
) -> torch.Tensor:  # [N, K] in dtype
    """Run one explicit config (benchmarks and tests); `dequantize` picks it for you. `out`: an
    [N, K] contiguous matrix of `dtype` to write into (default: a new one)."""
    planes = w.planes
    device = planes[0].device
    if out is None:
        out = torch.empty((w.n, w.k), device=device, dtype=dtype)
    groups = w.k // 32
    ng, per_split, split = split_groups(w.fmt, cfg.ng, cfg.split, groups)
    grid = (triton.cdiv(w.n, cfg.bn), split)
    _dequant_kernel[grid](
        out, *plane_args(planes), w.n, groups, per_split,
        **kernel_constexprs(w.fmt, cfg, ng, dtype), num_warps=cfg.warps,
    )  # fmt: skip
    return out


def kernel_constexprs(
    fmt: str, cfg: DequantConfig, ng: int, dtype: torch.dtype
) -> dict[str, object]:
    """The constexpr arguments of `_dequant_kernel` for one launch writing `dtype` (the
    packed-fp16 decode only writes fp16; the interpreter runs no inline asm)."""
    hooks = triton_hooks(fmt)
    emu = interpreting() or dtype != torch.float16
    return dict(
        PTRS=hooks.mm_ptrs, LOAD=hooks.mm_load, ADVANCE=hooks.mm_advance, DEQ=hooks.mm_deq,
        BN=cfg.bn, NG=ng, EMU=emu, STAGES=cfg.stages,
    )  # fmt: skip


def dequantize(w: QuantWeight, dtype: torch.dtype = torch.float16) -> torch.Tensor:
    """Dense [N, K] copy of a packed weight (dtype fp16 / bf16 / fp32), built on its device."""
    device = next(iter(w.tensors.values())).device
    sms = device_props(device).sm_count
    return dequant_launch(w, dtype, dequant_config(w.fmt, w.n, w.k, sms))
