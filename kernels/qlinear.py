"""Quantized linear layers: GGUF block repacking, torch dequantization and the reference op.

`pack_weight` splits the interleaved GGUF blocks of a weight once at load into *planes*
(one row-major tensor per block field), so that the Triton kernels read aligned, coalesced
runs along K. The element order inside the quant planes is GGUF's own; only the block fields
are separated. Plane layouts per format (N = out features, K = in features, S = K // 256):

  dense  w    [N, K]          dtype   (formats without a dedicated kernel, dequantized)
  q8_0   qs   [N, K]          int8    element k of the row
         d    [N, K // 32]    fp16    scale of 32-element block
  q4_0   qs   [N, K // 2]     uint8   byte 16*b + i: element 32*b + i (low), 32*b + 16 + i (high)
         d    [N, K // 32]    fp16
  q4_k   qs   [N, K // 2]     uint8   byte 32*c + i (c = 64-element chunk): element 64*c + i
                                      (low nibble, sub-block 2c), 64*c + 32 + i (high, 2c + 1)
         sc   [N, S * 12]     uint8   GGUF's packed 6-bit scales/mins of the 8 sub-blocks
         dm   [N, S * 2]      fp16    (d, dmin) per super-block
  q5_k   qs, sc, dm as q4_k;  qh [N, S * 32] uint8: bit j of byte 32*s + i is the 5th bit of
                                      element 256*s + 32*j + i
  q6_k   ql   [N, K // 2]     uint8   per 128-element half h: byte 64*h + 32*p + i holds element
                                      128*h + 32*p + i (low nibble) and 128*h + 64 + 32*p + i (high)
         qh   [N, K // 4]     uint8   byte 32*h + i, bits 2j..2j+1: element 128*h + 32*j + i
         sc   [N, K // 16]    int8    scale per 16 elements
         d    [N, S]          fp16
Every plane keeps the GGUF byte count, so a packed weight is exactly as large as the file's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from gguf import GGMLQuantizationType as QT
from localllm.formats.gguf import RawTensor
from localllm.kernels.registry import register

QK_K = 256


@dataclass
class QuantWeight:
    fmt: str  # "dense" | "q8_0" | "q4_0" | "q4_k" | "q5_k" | "q6_k"
    n: int  # out features
    k: int  # in features
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)  # planes, see module doc
    dense: torch.Tensor | None = None  # optional cached dequantized [n, k] (CPU reference path)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors.values())


# ---------------------------------------------------------------------------------- packing


def _fields(raw: RawTensor, block: int, sizes: list[int]) -> list[np.ndarray]:
    """Split the [N, row_bytes] block bytes into per-field byte planes [N, n_blocks * size]."""
    n, k = raw.shape
    blocks = np.ascontiguousarray(raw.data).view(np.uint8).reshape(n, k // block, sum(sizes))
    out, off = [], 0
    for s in sizes:
        out.append(np.ascontiguousarray(blocks[:, :, off : off + s]).reshape(n, -1))
        off += s
    return out


def _t(a: np.ndarray, device: torch.device | str, view: torch.dtype | None = None) -> torch.Tensor:
    t = torch.from_numpy(a)
    if view is not None:
        t = t.view(view)
    return t.to(device).contiguous()


def _pack_q8_0(raw: RawTensor, device) -> dict[str, torch.Tensor]:
    d, qs = _fields(raw, 32, [2, 32])
    return {"qs": _t(qs, device, torch.int8), "d": _t(d, device, torch.float16)}


def _pack_q4_0(raw: RawTensor, device) -> dict[str, torch.Tensor]:
    d, qs = _fields(raw, 32, [2, 16])
    return {"qs": _t(qs, device), "d": _t(d, device, torch.float16)}


def _pack_q4_k(raw: RawTensor, device) -> dict[str, torch.Tensor]:
    dm, sc, qs = _fields(raw, QK_K, [4, 12, 128])
    return {"qs": _t(qs, device), "sc": _t(sc, device), "dm": _t(dm, device, torch.float16)}


def _pack_q5_k(raw: RawTensor, device) -> dict[str, torch.Tensor]:
    dm, sc, qh, qs = _fields(raw, QK_K, [4, 12, 32, 128])
    return {
        "qs": _t(qs, device),
        "qh": _t(qh, device),
        "sc": _t(sc, device),
        "dm": _t(dm, device, torch.float16),
    }


def _pack_q6_k(raw: RawTensor, device) -> dict[str, torch.Tensor]:
    ql, qh, sc, d = _fields(raw, QK_K, [128, 64, 16, 2])
    return {
        "ql": _t(ql, device),
        "qh": _t(qh, device),
        "sc": _t(sc, device, torch.int8),
        "d": _t(d, device, torch.float16),
    }


# qtype -> (fmt name, packer); anything else is dequantized to a dense matrix
_PACKERS: dict[QT, tuple[str, Callable[..., dict[str, torch.Tensor]]]] = {
    QT.Q8_0: ("q8_0", _pack_q8_0),
    QT.Q4_0: ("q4_0", _pack_q4_0),
    QT.Q4_K: ("q4_k", _pack_q4_k),
    QT.Q5_K: ("q5_k", _pack_q5_k),
    QT.Q6_K: ("q6_k", _pack_q6_k),
}


def _dequant_dense(raw: RawTensor, device: torch.device | str) -> torch.Tensor:
    """Any GGUF tensor -> float32 [N, K] on `device`, with a library dequantizer."""
    try:  # the project's torch dequantizer (runs on the device, bit-exact with gguf-py)
        from localllm.formats.quants import dequantize_tensor
    except ImportError:
        from gguf.quants import dequantize

        data = np.asarray(raw.data)
        if raw.qtype not in (QT.F32, QT.F16):
            data = data.view(np.uint8)
        out = np.asarray(dequantize(data, raw.qtype), dtype=np.float32).reshape(raw.shape)
        return torch.from_numpy(out).to(device)
    return dequantize_tensor(raw, device)


def pack_weight(
    raw: RawTensor, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float16
) -> QuantWeight:
    """Repack one GGUF matrix [N, K] into the kernel-native planes (see module doc)."""
    if len(raw.shape) != 2:
        raise ValueError(f"{raw.name}: qlinear weights are 2-D, got shape {raw.shape}")
    n, k = raw.shape
    entry = _PACKERS.get(raw.qtype)
    if entry is None:
        w = _dequant_dense(raw, device).to(dtype)
        return QuantWeight("dense", n, k, {"w": w.contiguous()})
    fmt, packer = entry
    return QuantWeight(fmt, n, k, packer(raw, device))


def concat_weights(ws: list[QuantWeight]) -> QuantWeight | None:
    """Stack weights along N (fused QKV / gate_up); None when formats or K differ."""
    if not ws or any(w.fmt != ws[0].fmt or w.k != ws[0].k for w in ws):
        return None
    if any(w.tensors[name].dtype != ws[0].tensors[name].dtype for w in ws for name in w.tensors):
        return None
    tensors = {name: torch.cat([w.tensors[name] for w in ws], dim=0) for name in ws[0].tensors}
    return QuantWeight(ws[0].fmt, sum(w.n for w in ws), ws[0].k, tensors)


# ----------------------------------------------------------------- torch dequantization


def _kquant_scales(sc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Packed 6-bit scales [N, S, 12] uint8 -> (scale, min) [N, S, 8] as int32."""
    s = sc.to(torch.int32)
    d, m, md = s[..., 0:4], s[..., 4:8], s[..., 8:12]
    scale = torch.cat([d & 63, (md & 15) | ((d >> 6) << 4)], dim=-1)
    mins = torch.cat([m & 63, (md >> 4) | ((m >> 6) << 4)], dim=-1)
    return scale, mins


def _nibbles(qs: torch.Tensor, run: int) -> torch.Tensor:
    """uint8 [..., chunks * run] -> int32 [..., chunks * 2 * run]: per chunk lows then highs."""
    q = qs.to(torch.int32).reshape(*qs.shape[:-1], -1, 1, run)
    return torch.cat([q & 15, q >> 4], dim=-2).reshape(*qs.shape[:-1], -1)


def _dq_dense(w: QuantWeight) -> torch.Tensor:
    return w.tensors["w"].float()


def _dq_q8_0(w: QuantWeight) -> torch.Tensor:
    qs = w.tensors["qs"].float().reshape(w.n, -1, 32)  # [N, K/32, 32]
    return (qs * w.tensors["d"].float()[..., None]).reshape(w.n, w.k)


def _dq_q4_0(w: QuantWeight) -> torch.Tensor:
    q = (_nibbles(w.tensors["qs"], 16) - 8).float().reshape(w.n, -1, 32)  # [N, K/32, 32]
    return (q * w.tensors["d"].float()[..., None]).reshape(w.n, w.k)


def _q4_k_parts(w: QuantWeight) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """-> (4-bit quants [N, S, 8, 32] int32, scale [N, S, 8, 1], min [N, S, 8, 1] fp32)."""
    s = w.k // QK_K
    q = _nibbles(w.tensors["qs"], 32).reshape(w.n, s, 8, 32)
    sc, mn = _kquant_scales(w.tensors["sc"].reshape(w.n, s, 12))
    dm = w.tensors["dm"].float().reshape(w.n, s, 2, 1)
    return q, (dm[:, :, 0:1] * sc[..., None]), (dm[:, :, 1:2] * mn[..., None])


def _dq_q4_k(w: QuantWeight) -> torch.Tensor:
    q, scale, mins = _q4_k_parts(w)
    return (scale * q - mins).reshape(w.n, w.k)


def _dq_q5_k(w: QuantWeight) -> torch.Tensor:
    q, scale, mins = _q4_k_parts(w)
    qh = w.tensors["qh"].to(torch.int32).reshape(w.n, -1, 1, 32)  # [N, S, 1, 32]
    bits = (qh >> torch.arange(8, device=qh.device).reshape(1, 1, 8, 1)) & 1
    return (scale * (q | (bits << 4)) - mins).reshape(w.n, w.k)


def _dq_q6_k(w: QuantWeight) -> torch.Tensor:
    s = w.k // QK_K
    low = _nibbles(w.tensors["ql"], 64).reshape(w.n, s, 2, 4, 32)  # [N, S, half, j, 32]
    qh = w.tensors["qh"].to(torch.int32).reshape(w.n, s, 2, 1, 32)
    shifts = torch.tensor([0, 2, 4, 6], device=qh.device).reshape(1, 1, 1, 4, 1)
    q = (low | (((qh >> shifts) & 3) << 4)) - 32
    scale = w.tensors["sc"].float().reshape(w.n, s, 16, 1) * w.tensors["d"].float()[..., None, None]
    return (scale * q.reshape(w.n, s, 16, 16).float()).reshape(w.n, w.k)


_DEQUANT: dict[str, Callable[[QuantWeight], torch.Tensor]] = {
    "dense": _dq_dense,
    "q8_0": _dq_q8_0,
    "q4_0": _dq_q4_0,
    "q4_k": _dq_q4_k,
    "q5_k": _dq_q5_k,
    "q6_k": _dq_q6_k,
}


def dequantize_weight(w: QuantWeight, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """[n, k] from the packed planes, in pure torch."""
    return _DEQUANT[w.fmt](w).to(dtype)


@register("qlinear", "reference")
def qlinear_ref(
    x: torch.Tensor,  # [T, K] fp16 / bf16 / fp32
    w: QuantWeight,
    bias: torch.Tensor | None = None,  # [N]
) -> torch.Tensor:  # [T, N] in x.dtype
    wd = w.dense if w.dense is not None else dequantize_weight(w)
    out = x.float() @ wd.float().t()
    if bias is not None:
        out = out + bias.float()
    return out.to(x.dtype)
