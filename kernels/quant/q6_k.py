"""Q6_K: 256-element super-blocks, 6-bit quants (q - 32), an int8 scale per 16 elements
(block_q6_K: ql[128] qh[64] scales[16] d, 210 bytes). Planes: ql int32 [N, 4G] (low nibbles),
qh int16 [N, 4G] (bits 2s, 2s + 1 = the top two bits of field s), sc int8 [N, 2G], d fp16
[N, S]."""

from __future__ import annotations

import torch
from gguf import QK_K
from gguf import GGMLQuantizationType as Q

from localllm.kernels.quant.base import KernelFacts, Planes, QuantFormat, Tuning
from localllm.kernels.quant.blocks import crumbs, f16_field, nibbles
from localllm.kernels.quant.planes import f16, field_bits, unfield_bits, unwords4, words4


def dequant_blocks(b: torch.Tensor) -> torch.Tensor:
    n = b.shape[0]
    ql, qh, sc = b[:, :128], b[:, 128:192], b[:, 192:208]
    d = (f16_field(b, 208) * sc.contiguous().view(torch.int8).to(torch.float32)).reshape(n, 16, 1)
    lo = nibbles(ql, 64).reshape(n, 8, 32)
    hi = crumbs(qh, 32).reshape(n, 8, 32)
    q = ((lo | (hi << 4)).to(torch.int8) - 32).reshape(n, 16, 16).to(torch.float32)
    return (d * q).reshape(n, QK_K)


def pack(b: torch.Tensor) -> Planes:  # b: uint8 [R, S, 210]
    r, s = b.shape[:2]
    ql = b[..., 0:128].reshape(r, s, 2, 1, 64)  # [R, S, half, 1, 64]
    low = torch.cat([ql & 15, ql >> 4], dim=3).reshape(r, -1, 32)  # [R, G, 32]
    qh = b[..., 128:192].reshape(r, s, 2, 1, 32)
    shifts = torch.arange(0, 8, 2, device=b.device, dtype=torch.uint8).reshape(1, 1, 1, 4, 1)
    high = ((qh >> shifts) & 3).reshape(r, -1, 32)  # [R, G, 32]
    h16 = field_bits(high, 2)  # [R, G, 4] in [0, 2^16)
    qh_plane = torch.where(h16 >= 1 << 15, h16 - (1 << 16), h16).to(torch.int16).reshape(r, -1)
    sc = b[..., 192:208].contiguous().view(torch.int8).reshape(r, -1)  # [R, 2G]
    return {"ql": words4(low), "qh": qh_plane, "sc": sc, "d": f16(b[..., 208:210])}


def dequant_planes(t: Planes, n: int, k: int) -> torch.Tensor:
    high = unfield_bits(t["qh"].to(torch.int32).reshape(n, -1, 4), 2)  # [N, G, 32]
    q = ((unwords4(t["ql"]) | (high << 4)) - 32).reshape(n, -1, 16)  # [N, K / 16, 16]
    sc = t["sc"].reshape(n, -1, 16).float()  # [N, S, 16]
    scale = (sc * t["d"].float()[..., None]).reshape(n, -1, 1)  # [N, K / 16, 1]
    return (scale * q.float()).reshape(n, k)


KERNEL = KernelFacts(
    planes=("ql", "qh", "sc", "d"), words=4, fields=8, qbits=6, qc=96.0, has_min=False,
    min_k=256, act_layout="w4", h2_center=32, pack=pack, dequant=dequant_planes,
    triton="localllm.kernels.quant.q6_k_triton:HOOKS", two_scales=True,
    # Q6_K's dequantize-to-fp16 prefers short steps along K and no split
    # stream-K at 65..128 rows (H100, 100 / 128 rows, us; session 45): 4096x14336 (64 tiles x 2
    # K splits) 78.5 / 77.4 -> 66.4 / 63.6
    tuning=Tuning(vec=((4, 1), (4, 1)), dot=(128, 4), streamk_waves=(0.7, 2.0)),
)  # fmt: skip
FORMAT = QuantFormat(Q.Q6_K, (208,), dequant_blocks, KERNEL)
