"""Q2_K, Q3_K: 256-element super-blocks the project only dequantizes (reference path; dense at
load). Layouts: ggml-common.h block_q2_K (scales[16] qs[64] d dmin), block_q3_K (hmask[32]
qs[64] scales[12] d)."""

from __future__ import annotations

import torch
from gguf import QK_K
from gguf import GGMLQuantizationType as Q

from localllm.kernels.quant.base import QuantFormat
from localllm.kernels.quant.blocks import bits, crumbs, f16_field, nibbles


def _dq_q2_k(b: torch.Tensor) -> torch.Tensor:
    n = b.shape[0]
    scales, qs = b[:, :16], b[:, 16:80]
    dl = (f16_field(b, 80) * (scales & 0x0F).to(torch.float32)).reshape(n, 16, 1)
    ml = (f16_field(b, 82) * (scales >> 4).to(torch.float32)).reshape(n, 16, 1)
    q = crumbs(qs, 32).reshape(n, 16, 16).to(torch.float32)
    return (dl * q - ml).reshape(n, QK_K)


def _dq_q3_k(b: torch.Tensor) -> torch.Tensor:
    n = b.shape[0]
    hmask, qs, sc = b[:, :32], b[:, 32:96], b[:, 96:108]
    lo = nibbles(sc[:, :8], 8).reshape(n, 16)  # scale bits 0-3
    hi = crumbs(sc[:, 8:], 4).reshape(n, 16)  # scale bits 4-5
    scales = ((lo | (hi << 4)).to(torch.int8) - 32).to(torch.float32)
    dl = (f16_field(b, 108) * scales).reshape(n, 16, 1)
    ql = crumbs(qs, 32).reshape(n, 16, 16)
    qh = bits(hmask, 32).reshape(n, 16, 16) ^ 1  # a set hmask bit means "no -4 offset"
    q = (ql.to(torch.int8) - (qh << 2).to(torch.int8)).to(torch.float32)
    return (dl * q).reshape(n, QK_K)


Q2_K = QuantFormat(Q.Q2_K, (80, 82), _dq_q2_k)
Q3_K = QuantFormat(Q.Q3_K, (108,), _dq_q3_k)
