"""Q4_1, Q5_0, Q5_1: 32-element blocks the project only dequantizes (reference path; their
weights are dequantized to a dense matrix at load). Layouts: ggml-common.h block_q4_1
(d m qs[16]), block_q5_0 (d qh[4] qs[16]), block_q5_1 (d m qh[4] qs[16])."""

from __future__ import annotations

import torch
from gguf import GGMLQuantizationType as Q

from localllm.kernels.quant.base import QuantFormat
from localllm.kernels.quant.blocks import bits, f16_field, nibbles


def _dq_q4_1(b: torch.Tensor) -> torch.Tensor:
    q = nibbles(b[:, 4:], 16).reshape(b.shape[0], 32).to(torch.float32)
    return f16_field(b, 0) * q + f16_field(b, 2)


def _q5(b: torch.Tensor, qh_off: int) -> torch.Tensor:
    """5-bit quants of Q5_0/Q5_1 as uint8 [n, 32]; qh is a little-endian uint32 of high bits."""
    n = b.shape[0]
    ql = nibbles(b[:, qh_off + 4 :], 16).reshape(n, 32)
    qh = bits(b[:, qh_off : qh_off + 4], 1).reshape(n, 32)  # bit i of the uint32 -> elem i
    return ql | (qh << 4)


def _dq_q5_0(b: torch.Tensor) -> torch.Tensor:
    q = _q5(b, 2).to(torch.int8) - 16
    return f16_field(b, 0) * q.to(torch.float32)


def _dq_q5_1(b: torch.Tensor) -> torch.Tensor:
    q = _q5(b, 4).to(torch.float32)
    return f16_field(b, 0) * q + f16_field(b, 2)


Q4_1 = QuantFormat(Q.Q4_1, (0, 2), _dq_q4_1)
Q5_0 = QuantFormat(Q.Q5_0, (0,), _dq_q5_0)
Q5_1 = QuantFormat(Q.Q5_1, (0, 2), _dq_q5_1)
