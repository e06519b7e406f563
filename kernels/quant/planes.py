"""GGUF blocks <-> the kernel-native planes of `localllm.kernels.linear.qlinear` (torch, any
device): the element order shared by every packed format, and the repacking driver. Each
format's own packer and plane dequantizer live in its module (`kernels/quant/q4_k.py`, ...).

The kernels read quants as int32 words. Every run of W * F consecutive elements of a row (a
*group*) is stored as W = 4 words of F fields each (4-bit: F=8, 32-element groups; Q8_0:
F=4, 16-element groups): field s of word w holds element `4 * s + w` of the group. So field s of the W words of a group covers W
consecutive elements (the activations for it are one short vector load), and every word of a
group belongs to the same 32-element (Q4/Q5/Q8) or, per field half, 16-element (Q6_K) scale.
Extra bits ride along in the same element order: Q5_K keeps one byte per word (bit s = 5th
bit of field s), Q6_K one int16 per word (bits 2s, 2s+1 = the top two bits of field s).

Each format's planes (N = out features, G = K // 32 groups, S = K // 256 super-blocks) are
listed in its module's docstring (`q8_0.py`, `q4_0.py`, `q4_k.py`, `q5_k.py`, `q6_k.py`).
Per-group scales are read either in pairs (a trailing dim of 2) or through a non-contiguous
index (reversed, or one per 2 or 8 groups): then Triton gives their loads the same thread
layout as the quant words, and the kernel needs no shared-memory layout conversion.
Every plane holds the file's bytes, except q4_k/q5_k scales: 16 instead of 12 bytes per
super-block (+2.8% for Q4_K), decoded from GGUF's 6-bit packing once at load.
"""

from __future__ import annotations

import numpy as np
import torch

from localllm.kernels.quant.base import Packer, Planes

ROW_CHUNK = 8192  # rows repacked at a time (bounds the temporaries on the device)


# ------------------------------------------------------------------ element <-> word order


def words4(u: torch.Tensor) -> torch.Tensor:
    """4-bit values [R, G, 32] (element order, uint8) -> int32 words [R, 4G]."""
    r, g = u.shape[:2]
    f = u.reshape(r, g, 4, 2, 4)  # [R, G, byte j, nibble t, word w]: field s = 2j + t
    b = f[:, :, :, 0] | (f[:, :, :, 1] << 4)  # [R, G, j, w]
    return b.transpose(2, 3).contiguous().view(torch.int32).reshape(r, 4 * g)


def unwords4(qs: torch.Tensor) -> torch.Tensor:
    """int32 words [N, 4G] -> 4-bit values int32 [N, G, 32] in element order."""
    n = qs.shape[0]
    b = qs.contiguous().view(torch.uint8).reshape(n, -1, 4, 4).to(torch.int32)  # [N, G, w, j]
    f = torch.stack([b & 15, b >> 4], dim=-1)  # [N, G, w, j, t]
    return f.permute(0, 1, 3, 4, 2).reshape(n, -1, 32)  # element 4 * (2j + t) + w


def words8(q: torch.Tensor) -> torch.Tensor:
    """int8 values [R, G, 32] -> int32 words [R, 8G]: byte s of word w of 16-element half h
    is element 16h + 4s + w."""
    r, g = q.shape[:2]
    b = q.reshape(r, 2 * g, 4, 4).transpose(2, 3).contiguous()  # [R, 2G, w, s]
    return b.view(torch.int32).reshape(r, 8 * g)


def unwords8(qs: torch.Tensor) -> torch.Tensor:
    n = qs.shape[0]
    b = qs.contiguous().view(torch.int8).reshape(n, -1, 4, 4)  # [N, 2G, w, s]
    return b.transpose(2, 3).reshape(n, -1, 32).to(torch.int32)


def field_bits(v: torch.Tensor, width: int) -> torch.Tensor:
    """Per-element values [R, G, 32] (< 2^width) -> int32 [R, G, 4]: bits width*s.. of word w."""
    f = v.to(torch.int32).reshape(*v.shape[:2], 8, 4)  # [R, G, s, w]
    shifts = (torch.arange(8, device=v.device, dtype=torch.int32) * width).reshape(1, 1, 8, 1)
    return (f << shifts).sum(dim=2, dtype=torch.int32)


def unfield_bits(h: torch.Tensor, width: int) -> torch.Tensor:
    """int32 [N, G, 4] -> per-element values int32 [N, G, 32] (inverse of `field_bits`)."""
    shifts = (torch.arange(8, device=h.device, dtype=torch.int32) * width).reshape(1, 1, 8, 1)
    f = (h.unsqueeze(2) >> shifts) & ((1 << width) - 1)  # [N, G, s, w]
    return f.reshape(h.shape[0], -1, 32)


# -------------------------------------------------------------- GGUF block field decoding


def f16(b: torch.Tensor) -> torch.Tensor:
    """uint8 [..., 2] -> fp16 [...]."""
    return b.contiguous().view(torch.float16).squeeze(-1)


def knibbles(qs: torch.Tensor) -> torch.Tensor:
    """Q4_K/Q5_K quants uint8 [R, S, 128] -> 4-bit values [R, S * 8, 32] in element order."""
    q = qs.reshape(*qs.shape[:2], 4, 1, 32)  # [R, S, 64-element chunk, 1, 32]
    return torch.cat([q & 15, q >> 4], dim=3).reshape(qs.shape[0], -1, 32)


def pack_planes(packer: Packer, block: int, size: int, data: np.ndarray, n: int, k: int,
                device: torch.device | str) -> Planes:  # fmt: skip
    """GGUF block bytes [n, row_bytes] -> planes on `device`, repacked there in row chunks by
    a format's `packer` (blocks of `block` elements, `size` bytes)."""
    src = np.asarray(data).view(np.uint8).reshape(n, k // block, size)
    parts: list[Planes] = []
    for r0 in range(0, n, ROW_CHUNK):
        b = torch.from_numpy(np.array(src[r0 : r0 + ROW_CHUNK])).to(device)  # writable copy
        parts.append({name: t.contiguous() for name, t in packer(b).items()})
    if len(parts) == 1:
        return parts[0]
    return {name: torch.cat([p[name] for p in parts]) for name in parts[0]}
