"""Q5_K: Q4_K plus a 5th bit per quant (block_q5_K: d dmin scales[12] qh[32] qs[128], 176
bytes). Planes: those of Q4_K plus qh uint8 [N, 4G] (one byte per word: bit s = the 5th bit
of field s)."""

from __future__ import annotations

import torch
from gguf import QK_K
from gguf import GGMLQuantizationType as Q

from localllm.kernels.quant.base import KernelFacts, Planes, QuantFormat, Tuning
from localllm.kernels.quant.blocks import bits, f16_field, nibbles, scale_min_k4
from localllm.kernels.quant.planes import field_bits, unfield_bits, unwords4, words4
from localllm.kernels.quant.q4_k import affine_planes, k_affine


def dequant_blocks(b: torch.Tensor) -> torch.Tensor:
    n = b.shape[0]
    sc, mn = scale_min_k4(b[:, 4:16])
    d = (f16_field(b, 0) * sc.to(torch.float32)).reshape(n, 8, 1)
    dm = (f16_field(b, 2) * mn.to(torch.float32)).reshape(n, 8, 1)
    ql = nibbles(b[:, 48:], 32).reshape(n, 8, 32)
    qh = bits(b[:, 16:48], 32).reshape(n, 8, 32)
    q = (ql | (qh << 4)).to(torch.float32)
    return (d * q - dm).reshape(n, QK_K)


def pack(b: torch.Tensor) -> Planes:  # b: uint8 [R, S, 176]
    planes, u = affine_planes(b, b[..., 48:176])
    qh = b[..., 16:48].reshape(b.shape[0], -1, 1, 32)  # [R, S, 1, 32]: bit j = element 32j + i
    shifts = torch.arange(8, device=b.device, dtype=torch.uint8).reshape(1, 1, 8, 1)
    high = ((qh >> shifts) & 1).reshape(b.shape[0], -1, 32)  # [R, G, 32]
    qh_plane = field_bits(high, 1).to(torch.uint8).reshape(b.shape[0], -1)
    return {"qs": words4(u), "qh": qh_plane, **planes}


def dequant_planes(t: Planes, n: int, k: int) -> torch.Tensor:
    scale, mins = k_affine(t)
    high = unfield_bits(t["qh"].to(torch.int32).reshape(n, -1, 4), 1)  # [N, G, 32]
    return (scale * (unwords4(t["qs"]) | (high << 4)) - mins).reshape(n, k)


KERNEL = KernelFacts(
    planes=("qs", "sm", "d", "dmin", "qh"), words=4, fields=8, qbits=5, qc=32.0,
    has_min=True, min_k=256, act_layout="w4", h2_center=16, pack=pack, dequant=dequant_planes,
    triton="localllm.kernels.quant.q5_k_triton:HOOKS",
    tuning=Tuning(vec=((4, 2), (4, 1)), dot=(128, 8)),
)  # fmt: skip
FORMAT = QuantFormat(Q.Q5_K, (0, 2), dequant_blocks, KERNEL)
