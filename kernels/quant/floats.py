"""Unquantized GGUF tensors (F32, F16, BF16): reference "dequantization" to float32."""

from __future__ import annotations

import torch
from gguf import GGMLQuantizationType as Q

from localllm.kernels.quant.base import QuantFormat


def _dq_f32(b: torch.Tensor) -> torch.Tensor:
    return b.view(torch.float32)


def _dq_f16(b: torch.Tensor) -> torch.Tensor:
    return b.view(torch.float16).to(torch.float32)


def _dq_bf16(b: torch.Tensor) -> torch.Tensor:
    return (b.view(torch.int16).to(torch.int32) << 16).view(torch.float32)


F32 = QuantFormat(Q.F32, (), _dq_f32)
F16 = QuantFormat(Q.F16, (), _dq_f16)
BF16 = QuantFormat(Q.BF16, (), _dq_bf16)
