"""Triton gate/up + SiLU x mul (contract: `glu`). A decode token with int8 activations whose
gate and up live in one stacked dp4a-format weight takes one launch that also emits the int8
form of h for the down GEMV (no SiLU kernel); anything else composes the Triton ops."""

from __future__ import annotations

import torch

from localllm.kernels.activation_triton import silu_mul as silu_mul_triton
from localllm.kernels.glu import compose
from localllm.kernels.qlinear import QuantWeight
from localllm.kernels.qlinear_dp4a_triton import MIN_K, dp4a_glu_launch
from localllm.kernels.qlinear_mm_triton import PLANES
from localllm.kernels.qlinear_triton import qlinear_triton
from localllm.kernels.quant_act import ACT_LAYOUT, LAYOUTS, QAct
from localllm.kernels.quant_act_triton import fill_lazily
from localllm.kernels.registry import register


def fusable(x: torch.Tensor | QAct, ws: list[QuantWeight], f: int, quant: str | None) -> bool:
    return (isinstance(x, QAct) and x.shape[0] == 1 and len(ws) == 1 and quant in LAYOUTS
            and ws[0].fmt in ACT_LAYOUT and ws[0].n == 2 * f and f % 32 == 0
            and ws[0].k % MIN_K[ws[0].fmt] == 0)  # fmt: skip


@register("gate_up_silu", "triton")
def gate_up_silu(x: torch.Tensor | QAct, ws: list[QuantWeight], f: int,
                 quant: str | None = None) -> torch.Tensor | QAct:  # fmt: skip
    if not fusable(x, ws, f, quant):
        return compose(qlinear_triton, silu_mul_triton, x, ws, f, quant)
    w = ws[0]
    xq, xs = fill_lazily(x, ACT_LAYOUT[w.fmt])
    h, hq, hs = dp4a_glu_launch(xq, xs, [w.tensors[p] for p in PLANES[w.fmt]], w.fmt, f,
                                x.x.dtype, quant)  # fmt: skip
    return QAct(h, {quant: (hq, hs)})
