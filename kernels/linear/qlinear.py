"""Quantized linear layers: GGUF repacking, torch dequantization and the reference op.

`pack_weight` repacks the interleaved GGUF blocks of a weight once at load into *planes* (one
row-major tensor per block field) in the order the Triton GEMV wants: quants as int32 words
whose fields cover consecutive elements per field index, scales decoded to bytes. The plane
layouts are private to the kernels and documented in `kernels/quant/planes.py` and each
format's module;
`dequantize_weight(pack_weight(raw))` is bit-exact with gguf-py's dequantizer.
  dense  w [N, K] dtype   (formats without a dedicated kernel, dequantized at load)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from localllm.formats.awq import AWQTensor
from localllm.formats.gguf import RawTensor
from localllm.formats.quants import dequantize_tensor
from localllm.kernels.fused.quant_act import QAct, plain
from localllm.kernels.quant import BY_QTYPE, awq, kernel_facts
from localllm.kernels.quant.planes import pack_planes


@dataclass
class QuantWeight:
    fmt: str  # "dense", or the name of a format with kernels (`quant.KERNEL_FORMATS`)
    n: int  # out features
    k: int  # in features
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)  # planes, see module doc
    dense: torch.Tensor | None = None  # optional cached dequantized [n, k] (CPU reference path)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors.values())

    @property
    def planes(self) -> list[torch.Tensor]:
        """The planes in the order the kernels take them (`KernelFacts.planes`)."""
        return [self.tensors[p] for p in kernel_facts(self.fmt).planes]


# ---------------------------------------------------------------------------------- packing


def pack_weight(
    raw: RawTensor | AWQTensor,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float16,
) -> QuantWeight:
    """Repack one GGUF matrix [N, K] (or an AWQ checkpoint's) into the kernel-native planes
    (see module doc)."""
    if isinstance(raw, AWQTensor):
        parts = (raw.qweight.to(device), raw.qzeros.to(device), raw.scales.to(device))
        return QuantWeight(awq.GROUPS[raw.group], *raw.shape, awq.pack(*parts))
    if len(raw.shape) != 2:
        raise ValueError(f"{raw.name}: qlinear weights are 2-D, got shape {raw.shape}")
    n, k = raw.shape
    f = BY_QTYPE.get(raw.qtype)
    if f is None or f.kernel is None:  # formats without a kernel: a dense matrix, dequantized
        w = dequantize_tensor(raw, device).to(dtype)  # on the device, bit-exact with gguf-py
        return QuantWeight("dense", n, k, {"w": w.contiguous()})
    packer = f.kernel.pack
    assert packer is not None  # every GGUF kernel format packs from its blocks
    planes = pack_planes(packer, f.block_size, f.type_size, raw.data, n, k, device)
    return QuantWeight(f.name, n, k, planes)


def concat_weights(ws: list[QuantWeight]) -> QuantWeight | None:
    """Stack weights along N (fused QKV / gate_up); None when formats or K differ."""
    if not ws or any(w.fmt != ws[0].fmt or w.k != ws[0].k for w in ws):
        return None
    if any(w.tensors[name].dtype != ws[0].tensors[name].dtype for w in ws for name in w.tensors):
        return None
    tensors = {name: torch.cat([w.tensors[name] for w in ws], dim=0) for name in ws[0].tensors}
    return QuantWeight(ws[0].fmt, sum(w.n for w in ws), ws[0].k, tensors)


# ----------------------------------------------------------------- torch dequantization


def dequantize_weight(w: QuantWeight, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """[n, k] from the packed planes, in pure torch."""
    if w.fmt == "dense":
        return w.tensors["w"].to(dtype)
    return kernel_facts(w.fmt).dequant(w.tensors, w.n, w.k).to(dtype)


def linear_stacked(qlinear: Callable[..., torch.Tensor], x: torch.Tensor | QAct,
                   ws: list[QuantWeight], bias: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
    """x [T, K] through weights stacked along N (one fused QKV / gate+up weight, or runs of one
    format each, concatenated) with a `qlinear` op -> [T, N] (+ bias [N])."""
    if len(ws) == 1:
        return qlinear(x, ws[0], bias)
    out = torch.cat([qlinear(x, w) for w in ws], dim=-1)
    return out + bias if bias is not None else out


def qlinear_ref(
    x: torch.Tensor | QAct,  # [T, K] fp16 / bf16 / fp32 (a QAct: its float x is used)
    w: QuantWeight,
    bias: torch.Tensor | None = None,  # [N]
    out_dtype: torch.dtype | None = None,  # default x.dtype
) -> torch.Tensor:  # [T, N] in out_dtype
    x = plain(x)
    wd = w.dense if w.dense is not None else dequantize_weight(w)
    out = x.float() @ wd.float().t()
    if bias is not None:
        out = out + bias.float()
    return out.to(out_dtype or x.dtype)
