"""Triton RMSNorm and fused residual-add + RMSNorm: one launch; a few rows get several programs
per row (each sums the whole row's squares from cache and writes its own columns), so a decode
step's single row does not run on one SM."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from localllm.kernels.fused.quant_act import QUANT_CODES, QAct
from localllm.kernels.fused.quant_act_triton import _quant_store, act_buffers
from localllm.kernels.pdl import pdl_args, pdl_trigger, pdl_wait
from localllm.kernels.plan import emits_int8, norm_block_cols


@triton.jit
def _rms_norm_kernel(
    X,
    R,
    W,
    OUT,
    R_OUT,  # X/R/OUT/R_OUT [rows, D] with unit column stride
    XQ,
    XS,  # QUANT > 0: int8 [rows, D] and fp32 [rows, D / 32, 4] (quant_act)
    stride_x,
    stride_r,
    stride_o,
    stride_ro,
    D,
    eps,
    BLOCK_D: tl.constexpr,
    BLOCK_C: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    QUANT: tl.constexpr,
    PDL: tl.constexpr = False,
):
    """Program (row, j) normalizes columns [j BLOCK_C, (j + 1) BLOCK_C) of the row. Its weight
    slice (constant) is loaded before the PDL wait, so no L2 round trip follows the sum."""
    pdl_trigger(PDL)
    row = tl.program_id(0).to(tl.int64)
    c0 = tl.program_id(1) * BLOCK_C
    cols = c0 + tl.arange(0, BLOCK_C)
    mask = cols < D
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    pdl_wait(PDL)
    x = _row_in(X, R, R_OUT, row, stride_x, stride_r, tl.arange(0, BLOCK_D), D, HAS_RESIDUAL)
    inv = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / D + eps)
    xc = _row_in(X, R, R_OUT, row, stride_x, stride_r, cols, D, HAS_RESIDUAL)
    if HAS_RESIDUAL:  # the residual stream keeps x.dtype
        tl.store(R_OUT + row * stride_ro + cols, xc.to(R_OUT.dtype.element_ty), mask=mask)
    y = (xc * inv * w).to(OUT.dtype.element_ty)
    tl.store(OUT + row * stride_o + cols, y, mask=mask)
    if QUANT > 0:  # the int8 form of exactly what was stored
        _quant_store(y.to(tl.float32), c0, D, XQ + row * D, XS + row * (D // 32) * 4, BLOCK_C,
                     QUANT == 2)  # fmt: skip


@triton.jit
def _row_in(X, R, R_OUT, row, stride_x, stride_r, cols, D, HAS_RESIDUAL: tl.constexpr):
    """fp32 x (+ residual, rounded to the stream's dtype) at cols of the row."""
    mask = cols < D
    x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        r = tl.load(R + row * stride_r + cols, mask=mask, other=0.0).to(tl.float32)
        x = (x + r).to(R_OUT.dtype.element_ty).to(tl.float32)
    return x


def _rows(t: torch.Tensor) -> torch.Tensor:
    """[..., D] -> [rows, D] with unit column stride (a view when possible)."""
    t2 = t.reshape(-1, t.shape[-1])
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


def _launch(
    x: torch.Tensor,
    residual: torch.Tensor | None,
    weight: torch.Tensor,
    eps: float,
    quant: str | None = None,
) -> tuple[torch.Tensor | QAct, torch.Tensor | None]:
    d = x.shape[-1]
    if weight.shape != (d,):
        raise ValueError(
            f"rms_norm: weight {tuple(weight.shape)} does not match x {tuple(x.shape)}"
        )
    x2 = _rows(x)  # [rows, D]
    out = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    r2 = _rows(residual) if residual is not None else x2
    r_out = torch.empty_like(out) if residual is not None else out
    if x2.shape[0] == 0:
        return out.view(x.shape), r_out.view(x.shape) if residual is not None else None
    # int8 activations feed the dp4a GEMV of a few rows (plan.DP4A_MAX_T); wider batches take x
    code = QUANT_CODES[quant] if emits_int8(x2.shape[0], d, quant) and x.dim() == 2 else 0
    xq, xs = act_buffers(x2.shape[0], d, x.device) if code else (out, out)
    block = max(32, triton.next_power_of_2(d))
    block_c = norm_block_cols(x2.shape[0], block)
    # H200, one row of 4096 in a CUDA graph (scripts/sweep_small_kernels.py): 512 columns x 8
    # warps 2.12 us, x 16 warps 2.32 us
    warps = min(max(block_c // 64, 1), 8) if block_c < block else min(max(block // 256, 1), 16)
    _rms_norm_kernel[(x2.shape[0], triton.cdiv(d, block_c))](
        x2,
        r2,
        weight.contiguous(),
        out,
        r_out,
        xq,
        xs,
        x2.stride(0),
        r2.stride(0),
        out.stride(0),
        r_out.stride(0),
        d,
        eps,
        BLOCK_D=block,
        BLOCK_C=block_c,
        HAS_RESIDUAL=residual is not None,
        QUANT=code,
        num_warps=warps,
        **pdl_args(x.device),
    )
    y = out.view(x.shape)
    res = QAct(y, {quant: (xq, xs)}) if code and quant is not None else y
    return res, r_out.view(x.shape) if residual is not None else None


def rms_norm(
    x: torch.Tensor, weight: torch.Tensor, eps: float, quant: str | None = None
) -> torch.Tensor | QAct:
    """x [..., D], weight [D] -> [..., D] in x.dtype. With `quant` (an int8 layout) and one
    row, a QAct that also holds the int8 form of the output (same launch)."""
    out, _ = _launch(x, None, weight, eps, quant)
    return out


def add_rms_norm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    quant: str | None = None,
) -> tuple[torch.Tensor | QAct, torch.Tensor]:
    """r = x + residual (x.dtype); returns (rms_norm(r), r), fused in one pass (`quant`: see
    `rms_norm`)."""
    if residual.shape != x.shape:
        raise ValueError(f"add_rms_norm: x {tuple(x.shape)} vs residual {tuple(residual.shape)}")
    out, r = _launch(x, residual, weight, eps, quant)
    assert r is not None
    return out, r
