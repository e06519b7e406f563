"""AWQ int4 (AutoAWQ GEMM checkpoints, `formats/awq.py`): 4-bit quants with a 4-bit zero point
and an fp16 scale per group of 128 (`awq128`) or 64 (`awq64`) inputs of an output row:
weight = s * (u - z) = s * u - s * z, so the kernels run it as a format with a min
(QC = 16: q = u; min = s * z, exact in fp32). Repacked once at load from qweight / qzeros /
scales into planes (N = out features, K = in features, G = K // 32, Q = K // group):
  qs int32 [N, 4G]  the quants in the shared element order (`planes.words4`)
  s  fp16  [N, Q]   the scales
  z  uint8 [N, Q]   the zero points
Not from GGUF blocks, so the formats have no `QuantFormat`, only kernel facts."""

from __future__ import annotations

import torch

from localllm.formats import awq as awq_file
from localllm.kernels.quant.base import KernelFacts, Planes, Tuning
from localllm.kernels.quant.planes import unwords4, words4

GROUPS = {128: "awq128", 64: "awq64"}  # AWQ group size -> format name


def pack(qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor) -> Planes:
    """AutoAWQ's qweight int32 [K, N/8], qzeros int32 [Q, N/8], scales fp16 [Q, N] (on the
    target device) -> planes."""
    u = awq_file.unpack(qweight).t()  # uint8 [N, K]
    n, k = u.shape
    return {
        "qs": words4(u.reshape(n, k // 32, 32).contiguous()),
        "s": scales.t().to(torch.float16).contiguous(),
        "z": awq_file.unpack(qzeros).t().contiguous(),
    }


def dequant_planes(t: Planes, n: int, k: int) -> torch.Tensor:
    """fp32 [N, K] = s * (u - z), exact (rounds to AutoAWQ's fp16 values)."""
    q = t["s"].shape[1]
    u = unwords4(t["qs"]).reshape(n, q, k // q).float()  # [N, Q, group]
    z = t["z"].float()[..., None]
    return ((u - z) * t["s"].float()[..., None]).reshape(n, k)


def _facts(group: int) -> KernelFacts:
    return KernelFacts(
        planes=("qs", "s", "z"), words=4, fields=8, qbits=4, qc=16.0, has_min=True,
        min_k=group, act_layout="w4", h2_center=None, pack=None, dequant=dequant_planes,
        triton=f"localllm.kernels.quant.awq_triton:HOOKS_{group}",
        tuning=Tuning(vec=((4, 2), (4, 1)), dot=(128, 8)),
    )  # fmt: skip


# one format per group size (the scale index is g // 4 or g // 2 of the 32-element group g,
# baked into the Triton functions of `awq_triton.py`)
KERNELS: dict[str, KernelFacts] = {name: _facts(group) for group, name in GROUPS.items()}
