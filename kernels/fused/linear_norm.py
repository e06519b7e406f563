"""A layer's output projection, the residual add and the next RMSNorm as one op:
  h = x @ W^T [T, N];  r = h + residual;  returns (rms_norm(r) * weight, r)
The reference composes `qlinear` and `add_rms_norm` (pure torch). The Triton version runs a
decode token through one dp4a launch (`linear/dp4a_triton.py`, `_norm_epilogue`): the GEMV's
programs add the residual, and the last program of each group of 32 columns quantizes
r * weight for the next GEMV with raw scales and writes the group's sum of squares. The norm's
single factor rsqrt(mean(r^2) + eps) is then applied by the GEMV that reads those int8
activations (it scales every dot product alike), so no norm kernel runs in between: the result
is a QAct whose norm is pending (`quant_act.PendingNorm`).
"""

from __future__ import annotations

import torch

from localllm.kernels.fused.norm import add_rms_norm
from localllm.kernels.fused.quant_act import QAct
from localllm.kernels.linear.qlinear import QuantWeight, qlinear_ref


def linear_add_rms_norm(x: torch.Tensor | QAct, w: QuantWeight, residual: torch.Tensor,
                        weight: torch.Tensor, eps: float, quant: str | None = None
                        ) -> tuple[torch.Tensor | QAct, torch.Tensor]:  # fmt: skip
    """x [T, K], w [N, K], residual [T, N], weight [N] -> (rms_norm(x W^T + residual), the sum);
    `quant` as in `add_rms_norm`."""
    return add_rms_norm(qlinear_ref(x, w), residual, weight, eps, quant)
