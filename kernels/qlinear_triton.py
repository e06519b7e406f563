"""Triton quantized linear: fused dequant GEMV / skinny GEMM for decode, GEMM for prefill.

One kernel, three modes (see `qlinear_legacy_triton`):
- T == 1: MODE_VEC, a CUDA-core GEMV; each program owns BN output rows and streams their
  packed bytes once (split-K over SPLIT programs with fp32 atomics only when N is small).
- 1 < T <= 16: MODE_DOT with BM = 16, every dequantized tile is reused by all T rows.
- T > 16 (prefill): MODE_DOT with large tiles, or dequantize into an fp16 workspace with
  MODE_STORE and let cuBLAS multiply (which one per format: `_PREFILL_CUBLAS`).
The launch is CUDA-graph capturable: configs depend on shapes only, no host syncs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from localllm.kernels.qlinear import QuantWeight
from localllm.kernels.qlinear_kquants_triton import _tile_q4_k, _tile_q5_k, _tile_q6_k
from localllm.kernels.qlinear_legacy_triton import (
    MODE_DOT,
    MODE_STORE,
    MODE_VEC,
    _tile_q4_0,
    _tile_q8_0,
)
from localllm.kernels.registry import register

# fmt -> (kernel FMT code, plane names in kernel argument order, smallest TILE)
_FORMATS: dict[str, tuple[int, tuple[str, ...], int]] = {
    "q8_0": (0, ("qs", "d"), 32),
    "q4_0": (1, ("qs", "d"), 32),
    "q4_k": (2, ("qs", "sc", "dm"), 256),
    "q5_k": (3, ("qs", "sc", "dm", "qh"), 256),
    "q6_k": (4, ("ql", "qh", "sc", "d"), 256),
}


@triton.jit
def _qlinear_kernel(
    x_ptr, out_ptr, bias_ptr, p0, p1, p2, p3,
    T, N, K, stride_xm, stride_om, split,
    FMT: tl.constexpr, MODE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
    TILE: tl.constexpr, ATOMIC: tl.constexpr, HAS_BIAS: tl.constexpr,
):  # fmt: skip
    """out [T, N] = x [T, K] @ W^T (+ bias); MODE_STORE: out [N, K] = W (grid axis 2 = K tiles)."""
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_k = tl.program_id(2)
    offs_n = pid_n * BN + tl.arange(0, BN)  # [BN]
    mask_n = offs_n < N
    rows = (offs_n % N).to(tl.int64)  # clamped: weight loads need no mask
    offs_m = tl.arange(0, BM)  # [BM] relative to the block's first row
    mask_m = pid_m * BM + offs_m < T
    xb = x_ptr + (pid_m * BM).to(tl.int64) * stride_xm
    wo = out_ptr + rows * K  # [BN] workspace rows (MODE_STORE)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    n_tiles = K // TILE
    per = tl.cdiv(n_tiles, split)
    t0 = pid_k * per
    t1 = tl.minimum(t0 + per, n_tiles)
    for t in range(t0, t1):
        kt = t * TILE
        # Triton needs compile-time branches; the host side dispatches through _FORMATS
        if FMT == 0:
            acc = _tile_q8_0(acc, p0, p1, p2, p3, rows, kt, K, xb, stride_xm, offs_m, mask_m,
                             wo, mask_n, BN, TILE, MODE)  # fmt: skip
        elif FMT == 1:
            acc = _tile_q4_0(acc, p0, p1, p2, p3, rows, kt, K, xb, stride_xm, offs_m, mask_m,
                             wo, mask_n, BN, TILE, MODE)  # fmt: skip
        elif FMT == 2:
            acc = _tile_q4_k(acc, p0, p1, p2, p3, rows, kt, K, xb, stride_xm, offs_m, mask_m,
                             wo, mask_n, BN, TILE, MODE)  # fmt: skip
        elif FMT == 3:
            acc = _tile_q5_k(acc, p0, p1, p2, p3, rows, kt, K, xb, stride_xm, offs_m, mask_m,
                             wo, mask_n, BN, TILE, MODE)  # fmt: skip
        else:
            acc = _tile_q6_k(acc, p0, p1, p2, p3, rows, kt, K, xb, stride_xm, offs_m, mask_m,
                             wo, mask_n, BN, TILE, MODE)  # fmt: skip
    if MODE != 2:
        if HAS_BIAS:
            b = tl.load(bias_ptr + offs_n, mask=mask_n, other=0.0).to(tl.float32)
            acc += tl.where(pid_k == 0, b, 0.0)[None, :]
        optrs = out_ptr + (pid_m * BM + offs_m)[:, None] * stride_om + offs_n[None, :]
        omask = mask_m[:, None] & mask_n[None, :]
        if ATOMIC:  # split-K: partial sums into zeroed fp32
            tl.atomic_add(optrs, acc, mask=omask)
        else:
            tl.store(optrs, acc.to(out_ptr.dtype.element_ty), mask=omask)


@dataclass(frozen=True)
class QLinearConfig:
    mode: int  # MODE_VEC | MODE_DOT | MODE_STORE (prefill: dequantize, then cuBLAS)
    bm: int
    bn: int
    tile: int  # K elements per loop step (a multiple of the format's block)
    split: int = 1  # programs along K (fp32 atomics when > 1)
    warps: int = 4
    stages: int = 2


@functools.lru_cache(maxsize=16)
def _num_sms(device: torch.device) -> int:
    if device.type != "cuda":
        return 4
    return torch.cuda.get_device_properties(device).multi_processor_count


def _fit_tile(tile: int, k: int, min_tile: int) -> int:
    """Largest power-of-2 multiple of min_tile <= tile that divides k."""
    while tile > min_tile and k % tile:
        tile //= 2
    if k % tile:
        raise ValueError(f"K={k} is not a multiple of the block size {min_tile}")
    return tile


# formats whose prefill runs as dequantize-to-fp16 + cuBLAS instead of the fused GEMM
_PREFILL_CUBLAS: frozenset[str] = frozenset({"q8_0", "q4_0", "q4_k", "q5_k", "q6_k"})


def pick_config(fmt: str, n: int, k: int, t: int, device: torch.device) -> QLinearConfig:
    """Heuristic table keyed by (fmt, N, K, T bucket); no autotuning at engine start."""
    min_tile = _FORMATS[fmt][2]
    if t > 16:
        if fmt in _PREFILL_CUBLAS:
            return QLinearConfig(MODE_STORE, 1, 32, _fit_tile(256, k, min_tile), warps=4)
        # the fused GEMM reached ~35 TFLOP/s on an H200 vs ~450 for dequant + cuBLAS
        return QLinearConfig(MODE_DOT, 64, 128, _fit_tile(256, k, min_tile), warps=8, stages=3)
    # from an H200 sweep (scripts/bench_qlinear.py --sweep); the differences are within ~15%
    if t == 1:  # 4 rows x 1024-element K steps, 2 warps
        mode, bm, bn, tile, warps = MODE_VEC, 1, 4, _fit_tile(1024, k, min_tile), 2
    else:
        mode, bm, bn, tile, warps = MODE_DOT, 16, 128, _fit_tile(256, k, min_tile), 4
    ctas = triton.cdiv(n, bn)
    target = 4 * _num_sms(device)
    split = 1 if ctas >= target // 2 else min(k // tile, triton.cdiv(target, ctas))
    return QLinearConfig(mode, bm, bn, tile, split=split, warps=warps)


def _check(x: torch.Tensor, w: QuantWeight, bias: torch.Tensor | None) -> None:
    if x.dim() != 2 or x.shape[1] != w.k:
        raise ValueError(f"qlinear: x must be [T, {w.k}], got {tuple(x.shape)}")
    if x.stride(1) != 1:
        raise ValueError("qlinear: x must be contiguous along K")
    if bias is not None and (bias.shape != (w.n,) or not bias.is_contiguous()):
        raise ValueError(f"qlinear: bias must be a contiguous [{w.n}] vector")
    for name, t in w.tensors.items():
        if not t.is_contiguous() or t.device != x.device:
            raise ValueError(f"qlinear: plane {name!r} must be contiguous on {x.device}")


def dequantize_triton(w: QuantWeight, dtype: torch.dtype = torch.float16) -> torch.Tensor:
    """Dense [N, K] copy of a packed weight, built tile by tile on the device."""
    code, names, min_tile = _FORMATS[w.fmt]
    planes = [w.tensors[p] for p in names]
    planes += [planes[0]] * (4 - len(planes))
    out = torch.empty((w.n, w.k), device=planes[0].device, dtype=dtype)  # [N, K]
    tile = _fit_tile(256, w.k, min_tile)
    grid = (triton.cdiv(w.n, 32), 1, w.k // tile)
    _qlinear_kernel[grid](
        out, out, out, *planes, 1, w.n, w.k, 0, 0, w.k // tile,
        FMT=code, MODE=MODE_STORE, BM=1, BN=32, TILE=tile, ATOMIC=False, HAS_BIAS=False,
        num_warps=4,
    )  # fmt: skip
    return out


def qlinear_launch(
    x: torch.Tensor, w: QuantWeight, bias: torch.Tensor | None, cfg: QLinearConfig
) -> torch.Tensor:
    """Run one explicit config (benchmarks and tests); `qlinear_triton` picks it for you."""
    _check(x, w, bias)
    t = x.shape[0]
    if cfg.mode == MODE_STORE:
        wd = dequantize_triton(w, x.dtype)  # [N, K] workspace, back to the caching allocator
        b = bias.to(x.dtype) if bias is not None else None
        return torch.nn.functional.linear(x, wd, b)
    code, names, _ = _FORMATS[w.fmt]
    planes = [w.tensors[p] for p in names]
    planes += [planes[0]] * (4 - len(planes))
    dtype = x.dtype if cfg.split == 1 else torch.float32
    alloc = torch.empty if cfg.split == 1 else torch.zeros
    out = alloc((t, w.n), device=x.device, dtype=dtype)  # [T, N]
    grid = (triton.cdiv(w.n, cfg.bn), triton.cdiv(t, cfg.bm), cfg.split)
    _qlinear_kernel[grid](
        x, out, bias if bias is not None else out, *planes,
        t, w.n, w.k, x.stride(0), out.stride(0), cfg.split,
        FMT=code, MODE=cfg.mode, BM=cfg.bm, BN=cfg.bn, TILE=cfg.tile, ATOMIC=cfg.split > 1,
        HAS_BIAS=bias is not None, num_warps=cfg.warps, num_stages=cfg.stages,
    )  # fmt: skip
    return out if cfg.split == 1 else out.to(x.dtype)


@register("qlinear", "triton")
def qlinear_triton(
    x: torch.Tensor,  # [T, K] fp16 / bf16 / fp32
    w: QuantWeight,
    bias: torch.Tensor | None = None,  # [N]
) -> torch.Tensor:  # [T, N] in x.dtype
    if w.fmt == "dense":  # formats without a kernel: cuBLAS on the dequantized matrix
        wd = w.tensors["w"]
        b = bias.to(wd.dtype) if bias is not None else None
        return torch.nn.functional.linear(x.to(wd.dtype), wd, b).to(x.dtype)
    if x.shape[0] == 0:
        return x.new_empty((0, w.n))
    cfg = pick_config(w.fmt, w.n, w.k, x.shape[0], x.device)
    return qlinear_launch(x, w, bias, cfg)
