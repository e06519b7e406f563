"""The gated FFN input block as one op: gate/up projection and silu(gate) * up. The reference
composes `qlinear` and `silu_mul` (pure torch); the Triton version fuses both, and the int8
quantization of the result for the down projection, into one dp4a launch for decode tokens
(`qlinear_dp4a_triton._dp4a_glu_kernel`).
  x [T, K] -> h [T, F] (or a QAct holding h and its int8 form)
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from localllm.kernels.activation import silu_mul as silu_mul_ref
from localllm.kernels.qlinear import QuantWeight, qlinear_ref
from localllm.kernels.quant_act import QAct
from localllm.kernels.registry import register


def compose(qlinear: Callable, silu_mul: Callable, x: torch.Tensor | QAct,
            ws: list[QuantWeight], f: int, quant: str | None) -> torch.Tensor | QAct:  # fmt: skip
    """gate | up from the weights side by side, then silu(gate) * up."""
    gu = qlinear(x, ws[0]) if len(ws) == 1 else torch.cat([qlinear(x, w) for w in ws], dim=-1)
    if gu.shape[-1] != 2 * f:
        raise ValueError(f"gate_up_silu: weights give {gu.shape[-1]} rows, expected 2 x {f}")
    return silu_mul(gu[:, :f], gu[:, f:], quant=quant)


@register("gate_up_silu", "reference")
def gate_up_silu(x: torch.Tensor | QAct, ws: list[QuantWeight], f: int,
                 quant: str | None = None) -> torch.Tensor | QAct:  # fmt: skip
    """x [T, K] through the stacked gate | up weights `ws` (F rows each) -> silu(gate) * up
    [T, F]; `quant` (the down projection's int8 layout) is for the Triton version."""
    return compose(qlinear_ref, silu_mul_ref, x, ws, f, quant)
