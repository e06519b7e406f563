"""Triton quantized linear: fused dequant GEMV / skinny GEMM for decode, GEMM for prefill.

One kernel, three modes (see `qlinear_core_triton`):
- T == 1 with int8 activations (a `QAct` input, the engine's default on the GPU): the dp4a
  GEMV of `qlinear_dp4a_triton` (~1.7x faster than the fp16 one below).
- T == 1: MODE_VEC, a CUDA-core GEMV; each program owns BN output rows and streams their
  packed words once with 16-byte loads, NG groups of 32 elements per step, scales applied
  once per group; split-K over programs with fp32 atomics only when N is small. With fp16 x
  (Q4_0, Q4_K, Q5_K, Q6_K) the words are decoded two fields per register and multiplied in
  packed fp16 (`qlinear_half2_triton`, `QLinearConfig.half2`).
- 1 < T <= MM_MAX_T = 128 (batched decode, speculative verify, short prefill chunks):
  the fused dequant-GEMM of `qlinear_mm_triton` (tensor cores, weights decoded in registers).
  MODE_DOT (rebuilt fp16 tiles, one `tl.dot` per field) stays selectable through
  `QLinearConfig` for comparison; the fused kernel is 1.3-1.8x faster.
- T > MM_MAX_T (prefill): dequantize into an fp16 workspace with MODE_STORE and let cuBLAS
  multiply.
The launch is CUDA-graph capturable: configs depend on shapes only, no host syncs.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace

import torch
import triton
import triton.language as tl

from localllm.kernels.qlinear import QuantWeight
from localllm.kernels.qlinear_core_triton import (
    MODE_DOT,
    MODE_STORE,
    MODE_VEC,
    _consume,
    _write_out,
    plane_args,
)
from localllm.kernels.qlinear_dp4a_triton import dp4a_config, dp4a_launch
from localllm.kernels.qlinear_half2_triton import H2_CENTER, _vec_h2
from localllm.kernels.qlinear_mm_triton import BIG_SMEM, MM_MAX_T, PLANES, mm_config, qmm_launch
from localllm.kernels.qlinear_tile_triton import _load_tile
from localllm.kernels.quant_act import ACT_LAYOUT, QAct
from localllm.kernels.quant_act_triton import fill_lazily
from localllm.kernels.registry import register


@dataclass(frozen=True)
class QFormat:
    code: int  # FMT constexpr of the kernel
    planes: tuple[str, ...]  # plane names in kernel argument order
    words: int  # W: int32 words per group
    fields: int  # F: quants per word; a group is W * F elements
    qbits: int  # bits per decoded field: v = 1 + u / 2^qbits
    qc: float  # q = 2^qbits * v - qc (2^qbits + the zero point)
    has_min: bool
    min_k: int  # K must be a multiple of this


_FORMATS: dict[str, QFormat] = {
    "q8_0": QFormat(0, ("qs", "d"), 4, 4, 8, 384.0, False, 32),
    "q4_0": QFormat(1, ("qs", "d"), 4, 8, 4, 24.0, False, 32),
    "q4_k": QFormat(2, ("qs", "sm", "d", "dmin"), 4, 8, 4, 16.0, True, 256),
    "q5_k": QFormat(3, ("qs", "sm", "d", "dmin", "qh"), 4, 8, 5, 32.0, True, 256),
    "q6_k": QFormat(4, ("ql", "qh", "sc", "d"), 4, 8, 6, 96.0, False, 256),
}


@triton.jit
def _qlinear_kernel(
    x_ptr, out_ptr, bias_ptr, p0, p1, p2, p3, p4,
    T, N, G, stride_xm, stride_om, per_split,
    FMT: tl.constexpr, MODE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
    NG: tl.constexpr, W: tl.constexpr, F: tl.constexpr, QB: tl.constexpr, QC: tl.constexpr,
    HAS_MIN: tl.constexpr, ATOMIC: tl.constexpr, HAS_BIAS: tl.constexpr, H2: tl.constexpr,
):  # fmt: skip
    """out [T, N] = x [T, K] @ W^T (+ bias), K = W F G; program (n, m, k) owns rows
    [n BN, n BN + BN), x rows [m BM, m BM + BM) and groups [k per_split, (k + 1) per_split).
    MODE_STORE: out [N, K] = W."""
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_k = tl.program_id(2)
    offs_n = pid_n * BN + tl.arange(0, BN)  # [BN]
    mask_n = offs_n < N
    rows = (offs_n % N).to(tl.int64)  # clamped: unmasked weight loads
    offs_m = tl.arange(0, BM)  # [BM] relative to the block's first row
    mask_m = pid_m * BM + offs_m < T
    xb = x_ptr + (pid_m * BM).to(tl.int64) * stride_xm
    wo = out_ptr + rows * (G * W * F)  # [BN] workspace rows (MODE_STORE)
    if MODE == 0:
        acc = tl.zeros([BN, NG], dtype=tl.float32)  # per-group partials, summed at the end
    else:
        acc = tl.zeros([BM, BN], dtype=tl.float32)
    g_lo = pid_k * per_split
    g_hi = tl.minimum(g_lo + per_split, G)
    n_steps = tl.cdiv(tl.maximum(g_hi - g_lo, 0), NG)
    # software pipelining by hand: the loads of step i + 1 are in flight while step i computes
    # (the last prefetch is fully masked off and reads nothing)
    w, e, s0, m0, s1, m1 = _load_tile(FMT, p0, p1, p2, p3, p4, rows, g_lo, g_hi, G, NG)
    for i in range(n_steps):
        g0 = g_lo + i * NG
        nw, ne, ns0, nm0, ns1, nm1 = _load_tile(FMT, p0, p1, p2, p3, p4, rows, g0 + NG, g_hi, G,
                                                NG)  # fmt: skip
        g = g0 + tl.arange(0, NG)  # [NG]
        if H2 > 0:  # MODE_VEC with fp16 x: packed-fp16 decode (qlinear_half2_triton)
            acc = _vec_h2(acc, FMT, w, e, s0, m0, s1, m1, g, g < g_hi, xb, QB, QC, HAS_MIN, H2,
                          True)  # fmt: skip
        else:
            acc = _consume(acc, FMT, w, e, s0, m0, s1, m1, g, g_hi, xb, stride_xm, offs_m,
                           mask_m, wo, mask_n, MODE, BN, NG, W, F, QB, QC, HAS_MIN,
                           True)  # fmt: skip
        w, e, s0, m0, s1, m1 = nw, ne, ns0, nm0, ns1, nm1
    if MODE != 2:
        if MODE == 0:
            res = tl.sum(acc, axis=1)[None, :]  # [1, BN]
        else:
            res = acc  # [BM, BN]
        optrs = out_ptr + (pid_m * BM + offs_m)[:, None] * stride_om + offs_n[None, :]
        omask = mask_m[:, None] & mask_n[None, :]
        _write_out(res, optrs, omask, bias_ptr, offs_n, mask_n, pid_k, HAS_BIAS, ATOMIC)


@dataclass(frozen=True)
class QLinearConfig:
    mode: int  # MODE_VEC | MODE_DOT | MODE_STORE (prefill: dequantize, then cuBLAS)
    bm: int  # x rows per program (1 for MODE_VEC)
    bn: int  # weight rows per program
    tile: int  # K elements per loop step: NG groups (a power of 2 >= 32)
    split: int = 1  # programs along K (fp32 atomics when > 1)
    warps: int = 4
    stages: int = 2
    half2: bool = False  # MODE_VEC with fp16 x: packed-fp16 decode where the format has one


@functools.lru_cache(maxsize=16)
def _num_sms(device: torch.device) -> int:
    if device.type != "cuda":
        return 4
    return torch.cuda.get_device_properties(device).multi_processor_count


@functools.lru_cache(maxsize=16)
def _smem(device: torch.device) -> int:
    """Shared memory one program may use (opt-in), bytes."""
    if device.type != "cuda":
        return BIG_SMEM
    props = torch.cuda.get_device_properties(device)
    return getattr(props, "shared_memory_per_block_optin", BIG_SMEM)


def _fit_tile(tile: int, k: int) -> int:
    """The K step: `tile`, or the next power of 2 >= K when K is smaller."""
    return min(tile, triton.next_power_of_2(k))


def _with_split(cfg: QLinearConfig, n: int, k: int, device: torch.device) -> QLinearConfig:
    """Split K over programs when the rows alone give fewer than ~2 programs per SM (the GEMV:
    fewer than one, since a split costs two more kernels, zeroing and converting its fp32
    output, which inside a CUDA graph outweighs the idle SMs of a 1024-row K/V projection)."""
    ctas, target = triton.cdiv(n, cfg.bn), 4 * _num_sms(device)
    if ctas >= (_num_sms(device) if cfg.mode == MODE_VEC else target // 2):
        return cfg
    return replace(cfg, split=min(triton.cdiv(k, cfg.tile), triton.cdiv(target, ctas)))


def group_size(fmt: str) -> int:
    """Elements per group of a format's packed layout (the unit of `QLinearConfig.tile`)."""
    return _FORMATS[fmt].words * _FORMATS[fmt].fields


# T == 1: (rows per program, warps) for N <= 4096 and for larger N; each thread holds one
# group of every row per step (tile = 32 * warps groups). From the H200 sweep
# (scripts/bench_qlinear.py --sweep): 4 rows beat 2, 8 and 16 everywhere; 1 warp (4 K steps
# at K=4096) wins on the tall matrices, 2 warps on the square ones.
_VEC_TABLE: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "q8_0": ((4, 2), (4, 2)),
    "q4_0": ((4, 2), (4, 1)),
    "q4_k": ((4, 2), (4, 1)),
    "q5_k": ((4, 2), (4, 1)),
    "q6_k": ((4, 1), (4, 1)),
}
# 1 < T <= 16: (BN, warps) of the tensor-core path, 8 groups per step
_DOT_TABLE: dict[str, tuple[int, int]] = {
    "q8_0": (64, 4),
    "q4_0": (128, 8),
    "q4_k": (128, 8),
    "q5_k": (128, 8),
    "q6_k": (128, 4),
}


# up to this many rows the fused tensor-core path beats dequantize + cuBLAS: it reads the
# quantized weights once instead of writing and re-reading an fp16 copy of them
DOT_MAX_T = 64


def pick_config(fmt: str, n: int, k: int, t: int, device: torch.device) -> QLinearConfig:
    """Heuristic table keyed by (fmt, N, K, T bucket); no autotuning at engine start."""
    if fmt not in _FORMATS:
        raise ValueError(f"qlinear: no Triton kernel for format {fmt!r}")
    if t > DOT_MAX_T:  # dequantize to fp16 + cuBLAS: ~450 TFLOP/s vs ~35 for a fused GEMM
        return store_config(fmt, k)
    if t == 1:
        bn, warps = _VEC_TABLE[fmt][n > 4096]
        tile = _fit_tile(32 * warps * group_size(fmt), k)
        half2 = _FORMATS[fmt].code in H2_CENTER  # used when x is fp16
        cfg = QLinearConfig(MODE_VEC, 1, bn, tile, warps=warps, stages=1, half2=half2)
    else:
        bn, warps = _DOT_TABLE[fmt]
        bm = max(16, triton.next_power_of_2(t))  # one M block: the weights are read once
        cfg = QLinearConfig(MODE_DOT, bm, bn, _fit_tile(8 * group_size(fmt), k), warps=warps)
    return _with_split(cfg, n, k, device)


def _check(x: torch.Tensor, w: QuantWeight, bias: torch.Tensor | None) -> None:
    if x.dim() != 2 or x.shape[1] != w.k:
        raise ValueError(f"qlinear: x must be [T, {w.k}], got {tuple(x.shape)}")
    if x.stride(1) != 1:
        raise ValueError("qlinear: x must be contiguous along K")
    if w.k % _FORMATS[w.fmt].min_k:
        raise ValueError(f"qlinear: K={w.k} is not a multiple of {_FORMATS[w.fmt].min_k}")
    if bias is not None and (bias.shape != (w.n,) or not bias.is_contiguous()):
        raise ValueError(f"qlinear: bias must be a contiguous [{w.n}] vector")
    for name, t in w.tensors.items():
        if not t.is_contiguous() or t.device != x.device:
            raise ValueError(f"qlinear: plane {name!r} must be contiguous on {x.device}")


def _h2_mode(x: torch.Tensor, fmt: str, cfg: QLinearConfig) -> int:
    """H2 constexpr: 0 fp32 decode, 1 packed-fp16 math in plain Triton (the interpreter runs
    no inline asm), 2 packed-fp16 PTX. Needs fp16 x whose element pairs are 4-byte aligned."""
    ok = cfg.half2 and cfg.mode == MODE_VEC and _FORMATS[fmt].code in H2_CENTER
    if not ok or x.dtype != torch.float16 or x.data_ptr() % 4 or x.stride(0) % 2:
        return 0
    return 1 if os.environ.get("TRITON_INTERPRET") == "1" else 2


def _launch(
    x: torch.Tensor, out: torch.Tensor, bias: torch.Tensor | None, w: QuantWeight,
    cfg: QLinearConfig, t: int,
) -> None:  # fmt: skip
    """One kernel launch; x [t, K] (ignored by MODE_STORE), out [t, N] or [N, K]."""
    f = _FORMATS[w.fmt]
    planes = plane_args([w.tensors[p] for p in f.planes])
    group = f.words * f.fields  # elements per group
    groups, ng = w.k // group, cfg.tile // group
    per_split = triton.cdiv(triton.cdiv(groups, ng), cfg.split) * ng
    grid = (triton.cdiv(w.n, cfg.bn), triton.cdiv(t, cfg.bm), cfg.split)
    _qlinear_kernel[grid](
        x, out, bias if bias is not None else out, *planes,
        t, w.n, groups, x.stride(0), out.stride(0), per_split,
        FMT=f.code, MODE=cfg.mode, BM=cfg.bm, BN=cfg.bn, NG=ng, W=f.words, F=f.fields,
        QB=float(1 << f.qbits), QC=f.qc, HAS_MIN=f.has_min, ATOMIC=cfg.split > 1,
        HAS_BIAS=bias is not None, H2=_h2_mode(x, w.fmt, cfg), num_warps=cfg.warps,
        num_stages=cfg.stages,
    )  # fmt: skip


def store_config(fmt: str, k: int) -> QLinearConfig:
    """Dequantize-to-fp16 launch (prefill). From scripts/sweep_dequant.py on the H200: 8 rows
    per program beat 16-64 everywhere (~1.05 TB/s of packed + fp16 bytes for Q4_K/Q4_0);
    Q6_K prefers short steps along K and no split."""
    if fmt == "q6_k":
        return QLinearConfig(MODE_STORE, 1, 8, _fit_tile(128, k), split=1, warps=2)
    tile = _fit_tile(256, k)
    return QLinearConfig(MODE_STORE, 1, 8, tile, split=triton.cdiv(k, tile), warps=4)


def dequantize_triton(w: QuantWeight, dtype: torch.dtype = torch.float16) -> torch.Tensor:
    """Dense [N, K] copy of a packed weight, built tile by tile on the device."""
    out = torch.empty((w.n, w.k), device=w.tensors["d"].device, dtype=dtype)  # [N, K]
    _launch(out, out, None, w, store_config(w.fmt, w.k), 1)
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
    dtype = x.dtype if cfg.split == 1 else torch.float32
    alloc = torch.empty if cfg.split == 1 else torch.zeros
    out = alloc((t, w.n), device=x.device, dtype=dtype)  # [T, N]
    _launch(x, out, bias, w, cfg, t)
    return out if cfg.split == 1 else out.to(x.dtype)


@register("qlinear", "triton")
def qlinear_triton(
    x: torch.Tensor | QAct,  # [T, K] fp16 / bf16 / fp32; a QAct opts in to int8 activations
    w: QuantWeight,
    bias: torch.Tensor | None = None,  # [N]
    out_dtype: torch.dtype | None = None,  # default x.dtype (the dp4a GEMV writes it directly)
) -> torch.Tensor:  # [T, N] in out_dtype
    act = x if isinstance(x, QAct) else None
    x = x.x if act is not None else x
    if act is not None and x.shape[0] == 1 and w.fmt in ACT_LAYOUT:
        # one row: int8 activations x packed weights in dp4a (qlinear_dp4a_triton); the int8
        # form comes from the producer of x (fused norm / SiLU) or is quantized here once
        _check(x, w, bias)
        xq, xs = fill_lazily(act, ACT_LAYOUT[w.fmt])
        cfg = dp4a_config(w.fmt, w.n, w.k, _num_sms(x.device))
        planes = [w.tensors[p] for p in PLANES[w.fmt]]
        return dp4a_launch(xq, xs, planes, w.fmt, w.n, bias, cfg, out_dtype or x.dtype)
    out = _qlinear(x, w, bias)
    return out if out_dtype is None else out.to(out_dtype)


def _qlinear(x: torch.Tensor, w: QuantWeight, bias: torch.Tensor | None) -> torch.Tensor:
    if w.fmt == "dense":  # formats without a kernel: cuBLAS on the dequantized matrix
        wd = w.tensors["w"]
        b = bias.to(wd.dtype) if bias is not None else None
        return torch.nn.functional.linear(x.to(wd.dtype), wd, b).to(x.dtype)
    t = x.shape[0]
    if t == 0:
        return x.new_empty((0, w.n))
    # batched decode, verify, short chunks: the fused dequant-GEMM (fp16/bf16 on the GPU: its
    # fp32 tiles would not fit in shared memory)
    if 1 < t <= MM_MAX_T and (x.dtype != torch.float32 or x.device.type != "cuda"):
        _check(x, w, bias)
        cfg = mm_config(w.fmt, w.n, w.k, t, _num_sms(x.device), _smem(x.device))
        return qmm_launch(x, [w.tensors[p] for p in PLANES[w.fmt]], w.fmt, w.n, bias, cfg)
    cfg = pick_config(w.fmt, w.n, w.k, t, x.device)
    return qlinear_launch(x, w, bias, cfg)
