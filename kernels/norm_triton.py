"""Triton RMSNorm and fused residual-add + RMSNorm: one launch, one program per row."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from localllm.kernels.registry import register


@triton.jit
def _rms_norm_kernel(
    X, R, W, OUT, R_OUT,  # X/R/OUT/R_OUT [rows, D] with unit column stride
    stride_x, stride_r, stride_o, stride_ro,
    D, eps,
    BLOCK_D: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
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
    tl.store(OUT + row * stride_o + cols, (x * inv * w).to(OUT.dtype.element_ty), mask=mask)


def _rows(t: torch.Tensor) -> torch.Tensor:
    """[..., D] -> [rows, D] with unit column stride (a view when possible)."""
    t2 = t.reshape(-1, t.shape[-1])
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


def _launch(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float
            ) -> tuple[torch.Tensor, torch.Tensor | None]:
    d = x.shape[-1]
    if weight.shape != (d,):
        raise ValueError(f"rms_norm: weight {tuple(weight.shape)} does not match x {tuple(x.shape)}")
    x2 = _rows(x)  # [rows, D]
    out = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    r2 = _rows(residual) if residual is not None else x2
    r_out = torch.empty_like(out) if residual is not None else out
    if x2.shape[0] == 0:
        return out.view(x.shape), r_out.view(x.shape) if residual is not None else None
    block = triton.next_power_of_2(d)
    warps = min(max(block // 256, 1), 16)
    _rms_norm_kernel[(x2.shape[0],)](
        x2, r2, weight.contiguous(), out, r_out,
        x2.stride(0), r2.stride(0), out.stride(0), r_out.stride(0),
        d, eps, BLOCK_D=block, HAS_RESIDUAL=residual is not None, num_warps=warps,
    )
    return out.view(x.shape), r_out.view(x.shape) if residual is not None else None


@register("rms_norm", "triton")
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x [..., D], weight [D] -> [..., D] in x.dtype."""
    out, _ = _launch(x, None, weight, eps)
    return out


@register("add_rms_norm", "triton")
def add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """r = x + residual (x.dtype); returns (rms_norm(r), r), fused in one pass."""
    if residual.shape != x.shape:
        raise ValueError(f"add_rms_norm: x {tuple(x.shape)} vs residual {tuple(residual.shape)}")
    out, r = _launch(x, residual, weight, eps)
    assert r is not None
    return out, r
