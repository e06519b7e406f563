"""Triton quantized linear kernel of `qlinear_triton` for the rows the fused GEMM does not take
(see `kernels/plan.py`): MODE_VEC, a CUDA-core GEMV for one row; MODE_DOT, rebuilt fp16 tiles
and one `tl.dot` per field (fp32 activations on the GPU, or selectable for comparison);
(Prefill dequantizes for cuBLAS: `dequant_triton`.) Each program owns BN output
rows and streams their packed words once with 16-byte loads, NG groups of 32 elements per step,
scales applied once per group; split-K over programs with fp32 atomics only when N is small.
With fp16 x (formats with a `h2_center`) MODE_VEC decodes the words two fields per register and
multiplies in packed fp16 (`half2_triton`, `QLinearConfig.half2`). Configs depend on shapes
only (CUDA-graph capturable); the tables are each format's `Tuning` (`kernels/quant/`). The
format's decode functions (`load_tile`, `field`, `h2_word`, `quant`) and facts come in as
constexpr arguments (`kernel_constexprs`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import triton
import triton.language as tl

from localllm.kernels.device import DeviceProps, device_props
from localllm.kernels.linear.gemv_core_triton import (
    MODE_DOT,
    MODE_VEC,
    _consume,
    _load_tile,
    _write_out,
)
from localllm.kernels.linear.half2_triton import _vec_h2
from localllm.kernels.pdl import pdl_enter
from localllm.kernels.plan import DOT_MAX_T
from localllm.kernels.quant import kernel_facts, triton_hooks


@triton.jit
def _qlinear_kernel(
    x_ptr, out_ptr, bias_ptr, p0, p1, p2, p3, p4,
    T, N, G, stride_xm, stride_om, per_split,
    LOAD: tl.constexpr, FIELD: tl.constexpr, H2_WORD: tl.constexpr, QUANT: tl.constexpr,
    MODE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
    NG: tl.constexpr, W: tl.constexpr, F: tl.constexpr, QB: tl.constexpr, QC: tl.constexpr,
    HAS_MIN: tl.constexpr, TWO: tl.constexpr, Z: tl.constexpr, ATOMIC: tl.constexpr,
    HAS_BIAS: tl.constexpr, H2: tl.constexpr, PDL: tl.constexpr = False,
):  # fmt: skip
    """out [T, N] = x [T, K] @ W^T (+ bias), K = W F G; program (n, m, k) owns rows
    [n BN, n BN + BN), x rows [m BM, m BM + BM) and groups [k per_split, (k + 1) per_split).
    The format: its Triton functions LOAD (`load_tile`), FIELD,
    H2_WORD, QUANT and its facts W, F, QB, QC, HAS_MIN, TWO, Z (`kernel_constexprs`).
    PDL: programmatic dependent launch (`kernels/pdl.py`)."""
    pdl_enter(PDL)
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_k = tl.program_id(2)
    offs_n = pid_n * BN + tl.arange(0, BN)  # [BN]
    mask_n = offs_n < N
    rows = (offs_n % N).to(tl.int64)  # clamped: unmasked weight loads
    offs_m = tl.arange(0, BM)  # [BM] relative to the block's first row
    mask_m = pid_m * BM + offs_m < T
    xb = x_ptr + (pid_m * BM).to(tl.int64) * stride_xm
    if MODE == 0:
        acc = tl.zeros([BN, NG], dtype=tl.float32)  # per-group partials, summed at the end
    else:
        acc = tl.zeros([BM, BN], dtype=tl.float32)
    g_lo = pid_k * per_split
    g_hi = tl.minimum(g_lo + per_split, G)
    n_steps = tl.cdiv(tl.maximum(g_hi - g_lo, 0), NG)
    # software pipelining by hand: the loads of step i + 1 are in flight while step i computes
    # (the last prefetch is fully masked off and reads nothing)
    w, e, s0, m0, s1, m1 = _load_tile(LOAD, p0, p1, p2, p3, p4, rows, g_lo, g_hi, G, NG)
    for i in range(n_steps):
        g0 = g_lo + i * NG
        nw, ne, ns0, nm0, ns1, nm1 = _load_tile(LOAD, p0, p1, p2, p3, p4, rows, g0 + NG, g_hi, G,
                                                NG)  # fmt: skip
        g = g0 + tl.arange(0, NG)  # [NG]
        if H2 > 0:  # MODE_VEC with fp16 x: packed-fp16 decode (half2_triton)
            acc = _vec_h2(acc, H2_WORD, QUANT, w, e, s0, m0, s1, m1, g, g < g_hi, xb, QB, QC,
                          HAS_MIN, H2, Z, True)  # fmt: skip
        else:
            acc = _consume(acc, FIELD, w, e, s0, m0, s1, m1, g, g_hi, xb, stride_xm, offs_m,
                           mask_m, MODE, BN, NG, W, F, QB, QC, HAS_MIN, TWO,
                           True)  # fmt: skip
        w, e, s0, m0, s1, m1 = nw, ne, ns0, nm0, ns1, nm1
    if MODE == 0:
        res = tl.sum(acc, axis=1)[None, :]  # [1, BN]
    else:
        res = acc  # [BM, BN]
    optrs = out_ptr + (pid_m * BM + offs_m)[:, None] * stride_om + offs_n[None, :]
    omask = mask_m[:, None] & mask_n[None, :]
    _write_out(res, optrs, omask, bias_ptr, offs_n, mask_n, pid_k, HAS_BIAS, ATOMIC)


@dataclass(frozen=True)
class QLinearConfig:
    mode: int  # MODE_VEC | MODE_DOT
    bm: int  # x rows per program (1 for MODE_VEC)
    bn: int  # weight rows per program
    tile: int  # K elements per loop step: NG groups (a power of 2 >= 32)
    split: int = 1  # programs along K (fp32 atomics when > 1)
    warps: int = 4
    stages: int = 2
    half2: bool = False  # MODE_VEC with fp16 x: packed-fp16 decode where the format has one


def _num_sms(device: torch.device) -> int:
    return device_props(device).sm_count


def _smem(device: torch.device) -> int:
    """Shared memory one program may use (opt-in), bytes."""
    return device_props(device).smem_per_block


def _fit_tile(tile: int, k: int) -> int:
    """The K step: `tile`, or the next power of 2 >= K when K is smaller."""
    return min(tile, triton.next_power_of_2(k))


def _with_split(cfg: QLinearConfig, n: int, k: int, sms: int) -> QLinearConfig:
    """Split K over programs when the rows alone give fewer than ~2 programs per SM (the GEMV:
    fewer than one, since a split costs two more kernels, zeroing and converting its fp32
    output, which inside a CUDA graph outweighs the idle SMs of a 1024-row K/V projection)."""
    ctas, target = triton.cdiv(n, cfg.bn), 4 * sms
    if ctas >= (sms if cfg.mode == MODE_VEC else target // 2):
        return cfg
    return replace(cfg, split=min(triton.cdiv(k, cfg.tile), triton.cdiv(target, ctas)))


def group_size(fmt: str) -> int:
    """Elements per group of a format's packed layout (the unit of `QLinearConfig.tile`)."""
    return kernel_facts(fmt).group


def pick_config(
    fmt: str, n: int, k: int, t: int, device: torch.device | DeviceProps
) -> QLinearConfig:
    """Heuristic table keyed by (fmt, N, K, T bucket) and the GPU's SM count (`device`: a
    device, or the properties of one); no autotuning at engine start."""
    props = device if isinstance(device, DeviceProps) else device_props(device)
    f = kernel_facts(fmt)
    if t > DOT_MAX_T:  # dequantize to fp16 + cuBLAS (`dequant_triton`): no config here
        raise ValueError(f"pick_config: {t} rows take dequantize + cuBLAS, not this kernel")
    if t == 1:
        bn, warps = f.tuning.vec[n > 4096]
        tile = _fit_tile(32 * warps * group_size(fmt), k)
        half2 = f.h2_center is not None  # used when x is fp16
        cfg = QLinearConfig(MODE_VEC, 1, bn, tile, warps=warps, stages=1, half2=half2)
    else:
        bn, warps = f.tuning.dot
        bm = max(16, triton.next_power_of_2(t))  # one M block: the weights are read once
        cfg = QLinearConfig(MODE_DOT, bm, bn, _fit_tile(8 * group_size(fmt), k), warps=warps)
    return _with_split(cfg, n, k, props.sm_count)


def kernel_constexprs(fmt: str, cfg: QLinearConfig, h2: int, has_bias: bool) -> dict[str, object]:
    """The constexpr arguments of `_qlinear_kernel` for one launch (`h2`: the H2 mode)."""
    f, hooks = kernel_facts(fmt), triton_hooks(fmt)
    return dict(
        LOAD=hooks.load_tile, FIELD=hooks.field, H2_WORD=hooks.h2_word, QUANT=hooks.quant,
        MODE=cfg.mode, BM=cfg.bm, BN=cfg.bn, NG=cfg.tile // f.group, W=f.words, F=f.fields,
        QB=float(1 << f.qbits), QC=f.qc, HAS_MIN=f.has_min, TWO=f.two_scales,
        Z=f.h2_center or 0, ATOMIC=cfg.split > 1, HAS_BIAS=has_bias, H2=h2,
    )  # fmt: skip
