"""Triton RMSNorm and fused residual-add + RMSNorm: one launch, one program per row."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from localllm.kernels.quant_act import QAct
from localllm.kernels.quant_act_triton import _quant_store, act_buffers
from localllm.kernels.registry import register

QUANT_CODES = {None: 0, "w4": 1, "w8": 2}  # int8 activation layouts emitted beside the output


@triton.jit
def _rms_norm_kernel(
    X, R, W, OUT, R_OUT,  # X/R/OUT/R_OUT [rows, D] with unit column stride
    XQ, XS,  # QUANT > 0: int8 [rows, D] and fp32 [rows, D / 32, 4] (quant_act)
    stride_x, stride_r, stride_o, stride_ro,
    D, eps,
    BLOCK_D: tl.constexpr, HAS_RESIDUAL: tl.constexpr, QUANT: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        r = tl.load(R + row * stride_r + cols, mask=mask, other=0.0).to(tl.float32)
        x_sum = (x + r).to(R_OUT.dtype.element_ty)  # the residual stream keeps x.dtype
        tl.store(R_OUT + row * stride_ro + cols, x_sum, mask=mask)
        x = x_sum.to(tl.float32)
    inv = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / D + eps)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    y = (x * inv * w).to(OUT.dtype.element_ty)
    tl.store(OUT + row * stride_o + cols, y, mask=mask)
    if QUANT > 0:  # the int8 form of exactly what was stored
        _quant_store(y.to(tl.float32), 0, D, XQ + row * D, XS + row * (D // 32) * 4, BLOCK_D,
                     QUANT == 2)  # fmt: skip


def _rows(t: torch.Tensor) -> torch.Tensor:
    """[..., D] -> [rows, D] with unit column stride (a view when possible)."""
    t2 = t.reshape(-1, t.shape[-1])
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


def _launch(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float,
            quant: str | None = None) -> tuple[torch.Tensor | QAct, torch.Tensor | None]:
    d = x.shape[-1]
    if weight.shape != (d,):
        raise ValueError(f"rms_norm: weight {tuple(weight.shape)} does not match x {tuple(x.shape)}")
    x2 = _rows(x)  # [rows, D]
    out = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    r2 = _rows(residual) if residual is not None else x2
    r_out = torch.empty_like(out) if residual is not None else out
    if x2.shape[0] == 0:
        return out.view(x.shape), r_out.view(x.shape) if residual is not None else None
    # int8 activations only feed the one-row GEMV (quant_act); wider batches take x as it is
    code = QUANT_CODES[quant] if x2.shape[0] == 1 and d % 32 == 0 and x.dim() == 2 else 0
    xq, xs = act_buffers(1, d, x.device) if code else (out, out)
    block = max(32, triton.next_power_of_2(d))
    warps = min(max(block // 256, 1), 16)
    _rms_norm_kernel[(x2.shape[0],)](
        x2, r2, weight.contiguous(), out, r_out, xq, xs,
        x2.stride(0), r2.stride(0), out.stride(0), r_out.stride(0),
        d, eps, BLOCK_D=block, HAS_RESIDUAL=residual is not None, QUANT=code, num_warps=warps,
    )
    y = out.view(x.shape)
    res = QAct(y, {quant: (xq, xs)}) if code else y
    return res, r_out.view(x.shape) if residual is not None else None


@register("rms_norm", "triton")
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, quant: str | None = None
             ) -> torch.Tensor | QAct:
    """x [..., D], weight [D] -> [..., D] in x.dtype. With `quant` (an int8 layout) and one
    row, a QAct that also holds the int8 form of the output (same launch)."""
    out, _ = _launch(x, None, weight, eps, quant)
    return out


@register("add_rms_norm", "triton")
def add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float, quant: str | None = None
) -> tuple[torch.Tensor | QAct, torch.Tensor]:
    """r = x + residual (x.dtype); returns (rms_norm(r), r), fused in one pass (`quant`: see
    `rms_norm`)."""
    if residual.shape != x.shape:
        raise ValueError(f"add_rms_norm: x {tuple(x.shape)} vs residual {tuple(residual.shape)}")
    out, r = _launch(x, residual, weight, eps, quant)
    assert r is not None
    return out, r
