"""Q4_0: 32 4-bit quants (q - 8) and one fp16 scale per block (block_q4_0: d qs[16], 18
bytes). Planes: qs int32 [N, 4G] (`planes.words4`), d fp16 [N, G] in reverse group order."""

from __future__ import annotations

import torch
from gguf import GGMLQuantizationType as Q

from localllm.kernels.quant.base import KernelFacts, Planes, QuantFormat, Tuning
from localllm.kernels.quant.blocks import f16_field, nibbles
from localllm.kernels.quant.planes import f16, unwords4, words4


def dequant_blocks(b: torch.Tensor) -> torch.Tensor:
    q = nibbles(b[:, 2:], 16).reshape(b.shape[0], 32).to(torch.int8) - 8
    return f16_field(b, 0) * q.to(torch.float32)


def pack(b: torch.Tensor) -> Planes:  # b: uint8 [R, G, 18]
    qs = b[..., 2:]
    u = torch.cat([qs & 15, qs >> 4], dim=-1)  # [R, G, 32]
    return {"qs": words4(u), "d": f16(b[..., 0:2]).flip(-1)}


def dequant_planes(t: Planes, n: int, k: int) -> torch.Tensor:
    q = (unwords4(t["qs"]) - 8).float()  # [N, G, 32]
    return (q * t["d"].flip(-1).float()[..., None]).reshape(n, k)


KERNEL = KernelFacts(
    planes=("qs", "d"), words=4, fields=8, qbits=4, qc=24.0, has_min=False, min_k=32,
    act_layout="w4", h2_center=8, pack=pack, dequant=dequant_planes,
    triton="localllm.kernels.quant.q4_0_triton:HOOKS",
    # stream-K from 0.7 to 2 waves of plain programs at 65..128 rows (H100, 100 / 128 rows, us,
    # session 45, the owner-adds-partials fix-up): 4096x4096 (64 tiles x 2 K splits, 0.97 of a
    # wave) 25.4 / 26.4 -> 20.6 / 19.6, 4096x11008 (same) 66.2 / 65.5 -> 57.3 / 57.7, 12288x4096
    # (192 programs) 72.0 / 70.0 -> 48.2 / 45.9, 22016x4096 (172) 111.5 / 109.1 -> 84.4 / 83.6
    tuning=Tuning(vec=((4, 2), (4, 1)), dot=(128, 8), streamk_waves=(0.7, 2.0)),
)  # fmt: skip
FORMAT = QuantFormat(Q.Q4_0, (0,), dequant_blocks, KERNEL)
