"""Q8_0: 32 int8 quants and one fp16 scale per block (block_q8_0: d qs[32], 34 bytes).
Planes: qs int32 [N, 8G] (bytes in `planes.words8` order, 16-element groups), d fp16 [N, G]."""

from __future__ import annotations

import torch
from gguf import GGMLQuantizationType as Q

from localllm.kernels.quant.base import KernelFacts, Planes, QuantFormat, Tuning
from localllm.kernels.quant.blocks import f16_field
from localllm.kernels.quant.planes import f16, unwords8, words8


def dequant_blocks(b: torch.Tensor) -> torch.Tensor:
    x = b[:, 2:].contiguous().view(torch.int8).to(torch.float32)
    return x * f16_field(b, 0)


def pack(b: torch.Tensor) -> Planes:  # b: uint8 [R, G, 34]
    return {"qs": words8(b[..., 2:].view(torch.int8)), "d": f16(b[..., 0:2])}


def dequant_planes(t: Planes, n: int, k: int) -> torch.Tensor:
    q = unwords8(t["qs"]).float()  # [N, G, 32]
    return (q * t["d"].float()[..., None]).reshape(n, k)


KERNEL = KernelFacts(
    planes=("qs", "d"), words=4, fields=4, qbits=8, qc=384.0, has_min=False, min_k=32,
    act_layout="w8", h2_center=None, pack=pack, dequant=dequant_planes,
    triton="localllm.kernels.quant.q8_0_triton:HOOKS",
    tuning=Tuning(vec=((4, 2), (4, 2)), dot=(64, 4)),
)  # fmt: skip
FORMAT = QuantFormat(Q.Q8_0, (0,), dequant_blocks, KERNEL)
