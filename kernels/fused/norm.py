"""RMSNorm references: `rms_norm` and the fused residual-add `add_rms_norm` (pure torch)."""

from __future__ import annotations

import torch


def rms_norm(
    x: torch.Tensor, weight: torch.Tensor, eps: float, quant: str | None = None
) -> torch.Tensor:
    """x [..., D], weight [D] -> [..., D] in x.dtype; the statistics are computed in fp32.
    `quant` (an int8 activation layout for the GEMV that follows) is for the Triton version;
    the reference path multiplies in float and ignores it."""
    xf = x.float()
    inv = torch.rsqrt(xf.square().mean(dim=-1, keepdim=True) + eps)  # [..., 1]
    return (xf * inv * weight.float()).to(x.dtype)


def add_rms_norm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    quant: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """r = x + residual (rounded to x.dtype); returns (rms_norm(r), r), both [..., D]."""
    r = (x.float() + residual.float()).to(x.dtype)
    return rms_norm(r, weight, eps), r
