"""Q4_K: 256-element super-blocks of 8 groups, 4-bit quants, a 6-bit scale and min per group
(block_q4_K: d dmin scales[12] qs[128], 144 bytes): weight = d * scale * q - dmin * min.
Planes: qs int32 [N, 4G], sm uint8 [N, 2G] (scale, min per group, decoded from the 6-bit
packing at load: 16 instead of 12 bytes per super-block), d, dmin fp16 [N, S]."""

from __future__ import annotations

import torch
from gguf import QK_K
from gguf import GGMLQuantizationType as Q

from localllm.kernels.quant.base import KernelFacts, Planes, QuantFormat, Tuning
from localllm.kernels.quant.blocks import f16_field, nibbles, scale_min_k4
from localllm.kernels.quant.planes import f16, knibbles, unwords4, words4


def dequant_blocks(b: torch.Tensor) -> torch.Tensor:
    n = b.shape[0]
    sc, mn = scale_min_k4(b[:, 4:16])
    d = (f16_field(b, 0) * sc.to(torch.float32)).reshape(n, 8, 1)
    dm = (f16_field(b, 2) * mn.to(torch.float32)).reshape(n, 8, 1)
    q = nibbles(b[:, 16:], 32).reshape(n, 8, 32).to(torch.float32)
    return (d * q - dm).reshape(n, QK_K)


def affine_planes(b: torch.Tensor, qs: torch.Tensor) -> tuple[Planes, torch.Tensor]:
    """The scale planes of Q4_K/Q5_K blocks b [R, S, bytes] and their 4-bit quants qs
    [R, S, 128] as values [R, G, 32] in element order."""
    r = b.shape[0]
    scale, mins = scale_min_k4(b[..., 4:16])
    sm = torch.stack([scale, mins], dim=-1).reshape(r, -1)  # [R, 2G]
    planes = {"sm": sm, "d": f16(b[..., 0:2]), "dmin": f16(b[..., 2:4])}
    return planes, knibbles(qs)


def pack(b: torch.Tensor) -> Planes:  # b: uint8 [R, S, 144]
    planes, u = affine_planes(b, b[..., 16:144])
    return {"qs": words4(u), **planes}


def k_affine(t: Planes) -> tuple[torch.Tensor, torch.Tensor]:
    """-> (d * scale, dmin * min) fp32 [N, G, 1] of Q4_K/Q5_K planes."""
    sm = t["sm"].reshape(t["sm"].shape[0], -1, 8, 2).float()  # [N, S, 8, (scale, min)]
    d = t["d"].float()[..., None]  # [N, S, 1]
    dmin = t["dmin"].float()[..., None]
    scale, mins = d * sm[..., 0], dmin * sm[..., 1]  # [N, S, 8]
    return scale.reshape(scale.shape[0], -1, 1), mins.reshape(mins.shape[0], -1, 1)


def dequant_planes(t: Planes, n: int, k: int) -> torch.Tensor:
    scale, mins = k_affine(t)
    return (scale * unwords4(t["qs"]) - mins).reshape(n, k)


KERNEL = KernelFacts(
    planes=("qs", "sm", "d", "dmin"), words=4, fields=8, qbits=4, qc=16.0, has_min=True,
    min_k=256, act_layout="w4", h2_center=8, pack=pack, dequant=dequant_planes,
    triton="localllm.kernels.quant.q4_k_triton:HOOKS",
    # stream-K at 65..128 rows (H100, 100 / 128 rows, us, session 45; session 42's atomic fix-up
    # lost on every shape): 6144x4096 (96 programs, 0.73 of a wave) 40.8 / 38.5 -> 31.0 / 30.2,
    # 4096x4096 (64 tiles x 2 K splits) 27.6 / 28.5 -> 22.4 / 22.1, 4096x14336 (same) 74.5 /
    # 75.3 -> 69.6 / 69.5, 28672x4096 (224 programs) 116.4 / 115.8 -> 107.1 / 106.7
    tuning=Tuning(vec=((4, 2), (4, 1)), dot=(128, 8), streamk_waves=(0.7, 2.0)),
)  # fmt: skip
FORMAT = QuantFormat(Q.Q4_K, (0, 2), dequant_blocks, KERNEL)
