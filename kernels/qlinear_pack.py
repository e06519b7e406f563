"""GGUF blocks <-> the kernel-native planes of `localllm.kernels.qlinear` (torch, any device).

The kernels read quants as int32 words. Every run of W * F consecutive elements of a row (a
*group*) is stored as W = 4 words of F fields each (4-bit: F=8, 32-element groups; Q8_0:
F=4, 16-element groups): field s of word w holds element `4 * s + w` of the group. So field s of the W words of a group covers W
consecutive elements (the activations for it are one short vector load), and every word of a
group belongs to the same 32-element (Q4/Q5/Q8) or, per field half, 16-element (Q6_K) scale.
Extra bits ride along in the same element order: Q5_K keeps one byte per word (bit s = 5th
bit of field s), Q6_K one int16 per word (bits 2s, 2s+1 = the top two bits of field s).

Planes (N = out features, G = K // 32 groups, S = K // 256 super-blocks):
  q8_0  qs int32 [N, 8G]   d  fp16 [N, G]
  q4_0  qs int32 [N, 4G]   d  fp16 [N, G] (reversed)
  q4_k  qs int32 [N, 4G]   sm uint8 [N, 2G] (6-bit scale, 6-bit min)   d, dmin fp16 [N, S]
  q5_k  as q4_k, plus qh uint8 [N, 4G]
  q6_k  ql int32 [N, 4G]   qh int16 [N, 4G]   sc int8 [N, 2G] (16-element scales)   d fp16 [N, S]
Per-group scales are read either in pairs (a trailing dim of 2) or through a non-contiguous
index (reversed, or one per 2 or 8 groups): then Triton gives their loads the same thread
layout as the quant words, and the kernel needs no shared-memory layout conversion.
Every plane holds the file's bytes, except q4_k/q5_k scales: 16 instead of 12 bytes per
super-block (+2.8% for Q4_K), decoded from GGUF's 6-bit packing once at load.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

QK_K = 256
ROW_CHUNK = 8192  # rows repacked at a time (bounds the temporaries on the device)


# ------------------------------------------------------------------ element <-> word order


def _words4(u: torch.Tensor) -> torch.Tensor:
    """4-bit values [R, G, 32] (element order, uint8) -> int32 words [R, 4G]."""
    r, g = u.shape[:2]
    f = u.reshape(r, g, 4, 2, 4)  # [R, G, byte j, nibble t, word w]: field s = 2j + t
    b = f[:, :, :, 0] | (f[:, :, :, 1] << 4)  # [R, G, j, w]
    return b.transpose(2, 3).contiguous().view(torch.int32).reshape(r, 4 * g)


def _unwords4(qs: torch.Tensor) -> torch.Tensor:
    """int32 words [N, 4G] -> 4-bit values int32 [N, G, 32] in element order."""
    n = qs.shape[0]
    b = qs.contiguous().view(torch.uint8).reshape(n, -1, 4, 4).to(torch.int32)  # [N, G, w, j]
    f = torch.stack([b & 15, b >> 4], dim=-1)  # [N, G, w, j, t]
    return f.permute(0, 1, 3, 4, 2).reshape(n, -1, 32)  # element 4 * (2j + t) + w


def _words8(q: torch.Tensor) -> torch.Tensor:
    """int8 values [R, G, 32] -> int32 words [R, 8G]: byte s of word w of 16-element half h
    is element 16h + 4s + w."""
    r, g = q.shape[:2]
    b = q.reshape(r, 2 * g, 4, 4).transpose(2, 3).contiguous()  # [R, 2G, w, s]
    return b.view(torch.int32).reshape(r, 8 * g)


def _unwords8(qs: torch.Tensor) -> torch.Tensor:
    n = qs.shape[0]
    b = qs.contiguous().view(torch.int8).reshape(n, -1, 4, 4)  # [N, 2G, w, s]
    return b.transpose(2, 3).reshape(n, -1, 32).to(torch.int32)


def _field_bits(v: torch.Tensor, width: int) -> torch.Tensor:
    """Per-element values [R, G, 32] (< 2^width) -> int32 [R, G, 4]: bits width*s.. of word w."""
    f = v.to(torch.int32).reshape(*v.shape[:2], 8, 4)  # [R, G, s, w]
    shifts = (torch.arange(8, device=v.device, dtype=torch.int32) * width).reshape(1, 1, 8, 1)
    return (f << shifts).sum(dim=2, dtype=torch.int32)


def _unfield_bits(h: torch.Tensor, width: int) -> torch.Tensor:
    """int32 [N, G, 4] -> per-element values int32 [N, G, 32] (inverse of `_field_bits`)."""
    shifts = (torch.arange(8, device=h.device, dtype=torch.int32) * width).reshape(1, 1, 8, 1)
    f = (h.unsqueeze(2) >> shifts) & ((1 << width) - 1)  # [N, G, s, w]
    return f.reshape(h.shape[0], -1, 32)


# -------------------------------------------------------------- GGUF block field decoding


def _f16(b: torch.Tensor) -> torch.Tensor:
    """uint8 [..., 2] -> fp16 [...]."""
    return b.contiguous().view(torch.float16).squeeze(-1)


def _kscales(sc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """GGUF's packed 6-bit scales/mins uint8 [R, S, 12] -> (scale, min) uint8 [R, S, 8]."""
    d, m, md = sc[..., 0:4], sc[..., 4:8], sc[..., 8:12]
    scale = torch.cat([d & 63, (md & 15) | ((d >> 6) << 4)], dim=-1)
    mins = torch.cat([m & 63, (md >> 4) | ((m >> 6) << 4)], dim=-1)
    return scale, mins


def _knibbles(qs: torch.Tensor) -> torch.Tensor:
    """Q4_K/Q5_K quants uint8 [R, S, 128] -> 4-bit values [R, S * 8, 32] in element order."""
    q = qs.reshape(*qs.shape[:2], 4, 1, 32)  # [R, S, 64-element chunk, 1, 32]
    return torch.cat([q & 15, q >> 4], dim=3).reshape(qs.shape[0], -1, 32)


def _pack_q8_0(b: torch.Tensor) -> dict[str, torch.Tensor]:  # b: uint8 [R, G, 34]
    return {"qs": _words8(b[..., 2:].view(torch.int8)), "d": _f16(b[..., 0:2])}


def _pack_q4_0(b: torch.Tensor) -> dict[str, torch.Tensor]:  # b: uint8 [R, G, 18]
    qs = b[..., 2:]
    u = torch.cat([qs & 15, qs >> 4], dim=-1)  # [R, G, 32]
    return {"qs": _words4(u), "d": _f16(b[..., 0:2]).flip(-1)}


def _kquant_common(
    b: torch.Tensor, qs: torch.Tensor
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    r = b.shape[0]
    scale, mins = _kscales(b[..., 4:16])
    sm = torch.stack([scale, mins], dim=-1).reshape(r, -1)  # [R, 2G]
    planes = {"sm": sm, "d": _f16(b[..., 0:2]), "dmin": _f16(b[..., 2:4])}
    return planes, _knibbles(qs)


def _pack_q4_k(b: torch.Tensor) -> dict[str, torch.Tensor]:  # b: uint8 [R, S, 144]
    planes, u = _kquant_common(b, b[..., 16:144])
    return {"qs": _words4(u), **planes}


def _pack_q5_k(b: torch.Tensor) -> dict[str, torch.Tensor]:  # b: uint8 [R, S, 176]
    planes, u = _kquant_common(b, b[..., 48:176])
    qh = b[..., 16:48].reshape(b.shape[0], -1, 1, 32)  # [R, S, 1, 32]: bit j = element 32j + i
    shifts = torch.arange(8, device=b.device, dtype=torch.uint8).reshape(1, 1, 8, 1)
    high = ((qh >> shifts) & 1).reshape(b.shape[0], -1, 32)  # [R, G, 32]
    qh_plane = _field_bits(high, 1).to(torch.uint8).reshape(b.shape[0], -1)
    return {"qs": _words4(u), "qh": qh_plane, **planes}


def _pack_q6_k(b: torch.Tensor) -> dict[str, torch.Tensor]:  # b: uint8 [R, S, 210]
    r, s = b.shape[:2]
    ql = b[..., 0:128].reshape(r, s, 2, 1, 64)  # [R, S, half, 1, 64]
    low = torch.cat([ql & 15, ql >> 4], dim=3).reshape(r, -1, 32)  # [R, G, 32]
    qh = b[..., 128:192].reshape(r, s, 2, 1, 32)
    shifts = torch.arange(0, 8, 2, device=b.device, dtype=torch.uint8).reshape(1, 1, 1, 4, 1)
    high = ((qh >> shifts) & 3).reshape(r, -1, 32)  # [R, G, 32]
    h16 = _field_bits(high, 2)  # [R, G, 4] in [0, 2^16)
    qh_plane = torch.where(h16 >= 1 << 15, h16 - (1 << 16), h16).to(torch.int16).reshape(r, -1)
    sc = b[..., 192:208].contiguous().view(torch.int8).reshape(r, -1)  # [R, 2G]
    return {"ql": _words4(low), "qh": qh_plane, "sc": sc, "d": _f16(b[..., 208:210])}


# fmt -> (elements per GGUF block, block bytes, packer of uint8 blocks [R, blocks, bytes])
PACKERS: dict[str, tuple[int, int, Callable[[torch.Tensor], dict[str, torch.Tensor]]]] = {
    "q8_0": (32, 34, _pack_q8_0),
    "q4_0": (32, 18, _pack_q4_0),
    "q4_k": (QK_K, 144, _pack_q4_k),
    "q5_k": (QK_K, 176, _pack_q5_k),
    "q6_k": (QK_K, 210, _pack_q6_k),
}


def pack_planes(fmt: str, data: np.ndarray, n: int, k: int, device) -> dict[str, torch.Tensor]:
    """GGUF block bytes [n, row_bytes] -> planes on `device`, repacked there in row chunks."""
    block, size, packer = PACKERS[fmt]
    src = np.asarray(data).view(np.uint8).reshape(n, k // block, size)
    parts: list[dict[str, torch.Tensor]] = []
    for r0 in range(0, n, ROW_CHUNK):
        b = torch.from_numpy(np.array(src[r0 : r0 + ROW_CHUNK])).to(device)  # writable copy
        parts.append({name: t.contiguous() for name, t in packer(b).items()})
    if len(parts) == 1:
        return parts[0]
    return {name: torch.cat([p[name] for p in parts]) for name in parts[0]}


# -------------------------------------------------------------- planes -> dense (torch)


def _dq_q8_0(t: dict[str, torch.Tensor], n: int, k: int) -> torch.Tensor:
    q = _unwords8(t["qs"]).float()  # [N, G, 32]
    return (q * t["d"].float()[..., None]).reshape(n, k)


def _dq_q4_0(t: dict[str, torch.Tensor], n: int, k: int) -> torch.Tensor:
    q = (_unwords4(t["qs"]) - 8).float()  # [N, G, 32]
    return (q * t["d"].flip(-1).float()[..., None]).reshape(n, k)


def _k_affine(t: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """-> (d * scale, dmin * min) fp32 [N, G, 1]."""
    sm = t["sm"].reshape(t["sm"].shape[0], -1, 8, 2).float()  # [N, S, 8, (scale, min)]
    d = t["d"].float()[..., None]  # [N, S, 1]
    dmin = t["dmin"].float()[..., None]
    scale, mins = d * sm[..., 0], dmin * sm[..., 1]  # [N, S, 8]
    return scale.reshape(scale.shape[0], -1, 1), mins.reshape(mins.shape[0], -1, 1)


def _dq_q4_k(t: dict[str, torch.Tensor], n: int, k: int) -> torch.Tensor:
    scale, mins = _k_affine(t)
    return (scale * _unwords4(t["qs"]) - mins).reshape(n, k)


def _dq_q5_k(t: dict[str, torch.Tensor], n: int, k: int) -> torch.Tensor:
    scale, mins = _k_affine(t)
    high = _unfield_bits(t["qh"].to(torch.int32).reshape(n, -1, 4), 1)  # [N, G, 32]
    return (scale * (_unwords4(t["qs"]) | (high << 4)) - mins).reshape(n, k)


def _dq_q6_k(t: dict[str, torch.Tensor], n: int, k: int) -> torch.Tensor:
    high = _unfield_bits(t["qh"].to(torch.int32).reshape(n, -1, 4), 2)  # [N, G, 32]
    q = ((_unwords4(t["ql"]) | (high << 4)) - 32).reshape(n, -1, 16)  # [N, K / 16, 16]
    sc = t["sc"].reshape(n, -1, 16).float()  # [N, S, 16]
    scale = (sc * t["d"].float()[..., None]).reshape(n, -1, 1)  # [N, K / 16, 1]
    return (scale * q.float()).reshape(n, k)


DEQUANT: dict[str, Callable[[dict[str, torch.Tensor], int, int], torch.Tensor]] = {
    "q8_0": _dq_q8_0,
    "q4_0": _dq_q4_0,
    "q4_k": _dq_q4_k,
    "q5_k": _dq_q5_k,
    "q6_k": _dq_q6_k,
}
