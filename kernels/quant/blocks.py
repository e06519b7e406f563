"""Torch helpers over a `[n_blocks, type_size]` uint8 matrix of GGUF blocks (reference
dequantizers; the float arithmetic of each format follows `gguf.quants` step by step)."""

from __future__ import annotations

import torch

_SHIFT_CACHE: dict[tuple, torch.Tensor] = {}


def f16_field(b: torch.Tensor, off: int) -> torch.Tensor:
    """fp16 field at byte `off` of each block -> float32 [n, 1]."""
    return b[:, off : off + 2].contiguous().view(torch.float16).to(torch.float32)


def _shifts(like: torch.Tensor, values: list[int], shape: tuple[int, ...]) -> torch.Tensor:
    """Constant shift tensors, made once per device: no host->device copy per call (this runs
    inside captured CUDA graphs for quantized embedding lookups)."""
    key = (like.device, tuple(values), shape)
    t = _SHIFT_CACHE.get(key)
    if t is None:
        t = torch.tensor(values, dtype=torch.uint8, device=like.device).reshape(shape)
        _SHIFT_CACHE[key] = t
    return t


def nibbles(qs: torch.Tensor, group: int) -> torch.Tensor:
    """[n, k] bytes -> [n, k/group, 2, group]: low nibbles of each group, then its high nibbles."""
    n = qs.shape[0]
    return (qs.reshape(n, -1, 1, group) >> _shifts(qs, [0, 4], (1, 1, 2, 1))) & 0x0F


def bits(qh: torch.Tensor, group: int) -> torch.Tensor:
    """[n, k] bytes -> [n, k/group, 8, group]: bit j of byte i lands at [.., j, i]."""
    n = qh.shape[0]
    return (qh.reshape(n, -1, 1, group) >> _shifts(qh, list(range(8)), (1, 1, 8, 1))) & 1


def crumbs(q: torch.Tensor, group: int) -> torch.Tensor:
    """[n, k] bytes -> [n, k/group, 4, group] of 2-bit fields (shifts 0, 2, 4, 6)."""
    n = q.shape[0]
    return (q.reshape(n, -1, 1, group) >> _shifts(q, [0, 2, 4, 6], (1, 1, 4, 1))) & 3


def scale_min_k4(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The 12 packed bytes of Q4_K/Q5_K [..., 12] -> 8 six-bit scales and 8 six-bit mins,
    uint8 [..., 8] each (used by the reference dequantizer and by the repacking at load)."""
    d, m, md = s[..., 0:4], s[..., 4:8], s[..., 8:12]
    sc = torch.cat([d & 0x3F, (md & 0x0F) | ((d >> 2) & 0x30)], dim=-1)
    mn = torch.cat([m & 0x3F, (md >> 4) | ((m >> 2) & 0x30)], dim=-1)
    return sc, mn
