"""Triton output projection + residual add + RMSNorm (contract: `linear_norm`). One decode
token with int8 activations and a dp4a GEMV takes the fused launch, whose norm stays pending
until the next GEMV; anything else composes the Triton qlinear and add_rms_norm."""

from __future__ import annotations

import torch

from localllm.kernels.fused.norm_triton import add_rms_norm
from localllm.kernels.fused.quant_act import LAYOUTS, PendingNorm, QAct
from localllm.kernels.linear.dp4a_triton import (
    Dp4aConfig,
    dp4a_config,
    dp4a_norm_launch,
    norm_fusable,
)
from localllm.kernels.linear.gemv_triton import _num_sms
from localllm.kernels.linear.qlinear import QuantWeight
from localllm.kernels.linear.qlinear_triton import dp4a_inputs, qlinear_triton
from localllm.kernels.plan import LinearKernel, linear_kernel
from localllm.kernels.quant import kernel_facts


def _fused_config(x: torch.Tensor | QAct, w: QuantWeight, residual: torch.Tensor,
                  weight: torch.Tensor, quant: str | None) -> Dp4aConfig | None:  # fmt: skip
    """The dp4a config of the fused launch, or None when this call composes."""
    if not isinstance(x, QAct) or quant not in LAYOUTS or x.shape[0] != 1:
        return None
    fp32_cuda = x.dtype == torch.float32 and x.device.type == "cuda"
    if linear_kernel(1, w.fmt, True, fp32_cuda) is not LinearKernel.DP4A_GEMV:
        return None
    if residual.shape != (1, w.n) or residual.dtype != x.dtype or weight.shape != (w.n,):
        return None
    cfg = dp4a_config(w.fmt, w.n, w.k, _num_sms(x.device), 1)
    return cfg if norm_fusable(cfg, w.fmt, w.n, w.k) else None


def linear_add_rms_norm(x: torch.Tensor | QAct, w: QuantWeight, residual: torch.Tensor,
                        weight: torch.Tensor, eps: float, quant: str | None = None
                        ) -> tuple[torch.Tensor | QAct, torch.Tensor]:  # fmt: skip
    cfg = _fused_config(x, w, residual, weight, quant)
    if cfg is None or not isinstance(x, QAct) or quant is None:
        return add_rms_norm(qlinear_triton(x, w), residual, weight, eps, quant)
    xq, xs, pending = dp4a_inputs(x, w)
    planes = [w.tensors[p] for p in kernel_facts(w.fmt).planes]
    r, oq, os_, ss = dp4a_norm_launch(xq, xs, planes, w.fmt, cfg, residual.contiguous(), weight,
                                      quant, pending)  # fmt: skip
    return QAct(None, {quant: (oq, os_)}, PendingNorm(r, weight, eps, quant, ss)), r
