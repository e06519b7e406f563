"""GGML block layouts and vectorized torch dequantization (CPU or CUDA), bit-exact with gguf-py.

Every quantized tensor is a sequence of fixed-size blocks; `LAYOUTS` is the one table of what a
block holds (elements, bytes, where its fp16 scale fields sit), and `_DEQUANT` maps each type to
one small function `[n_blocks, type_size] uint8 -> [n_blocks, block_size] float32`. The float
arithmetic follows `gguf.quants` operation by operation (same products, same rounding order),
so results are bit-identical to `gguf.quants.dequantize`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from gguf import GGML_QUANT_SIZES, QK_K, GGMLQuantizationType

from localllm.errors import ModelLoadError

if TYPE_CHECKING:
    from localllm.formats.gguf import RawTensor

Q = GGMLQuantizationType


@dataclass(frozen=True)
class BlockLayout:
    block_size: int  # elements per block
    type_size: int  # bytes per block
    f16_fields: tuple[int, ...]  # byte offsets of the fp16 scale fields (d, dmin/m) in a block


# byte offsets follow the C structs block_q4_0 ... block_q6_K in ggml-common.h
_F16_FIELDS: dict[GGMLQuantizationType, tuple[int, ...]] = {
    Q.F32: (),
    Q.F16: (),
    Q.BF16: (),
    Q.Q4_0: (0,),
    Q.Q4_1: (0, 2),
    Q.Q5_0: (0,),
    Q.Q5_1: (0, 2),
    Q.Q8_0: (0,),
    Q.Q2_K: (80, 82),  # scales[16] qs[64] d dmin
    Q.Q3_K: (108,),  # hmask[32] qs[64] scales[12] d
    Q.Q4_K: (0, 2),  # d dmin scales[12] qs[128]
    Q.Q5_K: (0, 2),  # d dmin scales[12] qh[32] qs[128]
    Q.Q6_K: (208,),  # ql[128] qh[64] scales[16] d
}
LAYOUTS: dict[GGMLQuantizationType, BlockLayout] = {
    t: BlockLayout(*GGML_QUANT_SIZES[t], f16) for t, f16 in _F16_FIELDS.items()
}
SUPPORTED_QTYPES: frozenset[GGMLQuantizationType] = frozenset(LAYOUTS)


def qtype_name(qtype: int) -> str:
    try:
        return Q(int(qtype)).name
    except ValueError:
        return f"id {int(qtype)}"


def check_supported(qtype: int, path: str, tensor_name: str) -> None:
    """Raise ModelLoadError naming the file and tensor when `qtype` cannot be dequantized."""
    try:
        known = Q(int(qtype)) in SUPPORTED_QTYPES
    except ValueError:
        known = False
    if not known:
        raise ModelLoadError(
            path, f"unsupported quant type {qtype_name(qtype)} in tensor {tensor_name!r}"
        )


# ---- helpers over a [n, type_size] uint8 block matrix --------------------------------------


def _f16(b: torch.Tensor, off: int) -> torch.Tensor:
    """fp16 field at byte `off` of each block -> float32 [n, 1]."""
    return b[:, off : off + 2].contiguous().view(torch.float16).to(torch.float32)


_SHIFT_CACHE: dict[tuple, torch.Tensor] = {}


def _shifts(like: torch.Tensor, values: list[int], shape: tuple[int, ...]) -> torch.Tensor:
    """Constant shift tensors, made once per device: no host->device copy per call (this runs
    inside captured CUDA graphs for quantized embedding lookups)."""
    key = (like.device, tuple(values), shape)
    t = _SHIFT_CACHE.get(key)
    if t is None:
        t = _SHIFT_CACHE[key] = torch.tensor(values, dtype=torch.uint8, device=like.device).reshape(
            shape
        )
    return t


def _nibbles(qs: torch.Tensor, group: int) -> torch.Tensor:
    """[n, k] bytes -> [n, k/group, 2, group]: low nibbles of each group, then its high nibbles."""
    n = qs.shape[0]
    return (qs.reshape(n, -1, 1, group) >> _shifts(qs, [0, 4], (1, 1, 2, 1))) & 0x0F


def _bits(qh: torch.Tensor, group: int) -> torch.Tensor:
    """[n, k] bytes -> [n, k/group, 8, group]: bit j of byte i lands at [.., j, i]."""
    n = qh.shape[0]
    return (qh.reshape(n, -1, 1, group) >> _shifts(qh, list(range(8)), (1, 1, 8, 1))) & 1


def _crumbs(q: torch.Tensor, group: int) -> torch.Tensor:
    """[n, k] bytes -> [n, k/group, 4, group] of 2-bit fields (shifts 0, 2, 4, 6)."""
    n = q.shape[0]
    return (q.reshape(n, -1, 1, group) >> _shifts(q, [0, 2, 4, 6], (1, 1, 4, 1))) & 3


def _scale_min_k4(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The 12 packed bytes of Q4_K/Q5_K -> 8 six-bit scales and 8 six-bit mins, each [n, 8]."""
    s = s.reshape(-1, 3, 4)
    d, m, md = s[:, 0], s[:, 1], s[:, 2]
    sc = torch.cat([d & 0x3F, (md & 0x0F) | ((d >> 2) & 0x30)], dim=-1)
    mn = torch.cat([m & 0x3F, (md >> 4) | ((m >> 2) & 0x30)], dim=-1)
    return sc, mn


# ---- one function per type: [n, type_size] uint8 -> [n, block_size] float32 ----------------


def _dq_f32(b: torch.Tensor) -> torch.Tensor:
    return b.view(torch.float32)


def _dq_f16(b: torch.Tensor) -> torch.Tensor:
    return b.view(torch.float16).to(torch.float32)


def _dq_bf16(b: torch.Tensor) -> torch.Tensor:
    return (b.view(torch.int16).to(torch.int32) << 16).view(torch.float32)


def _dq_q4_0(b: torch.Tensor) -> torch.Tensor:
    q = _nibbles(b[:, 2:], 16).reshape(b.shape[0], 32).to(torch.int8) - 8
    return _f16(b, 0) * q.to(torch.float32)


def _dq_q4_1(b: torch.Tensor) -> torch.Tensor:
    q = _nibbles(b[:, 4:], 16).reshape(b.shape[0], 32).to(torch.float32)
    return _f16(b, 0) * q + _f16(b, 2)


def _q5(b: torch.Tensor, qh_off: int) -> torch.Tensor:
    """5-bit quants of Q5_0/Q5_1 as uint8 [n, 32]; qh is a little-endian uint32 of high bits."""
    n = b.shape[0]
    ql = _nibbles(b[:, qh_off + 4 :], 16).reshape(n, 32)
    qh = _bits(b[:, qh_off : qh_off + 4], 1).reshape(n, 32)  # bit i of the uint32 -> elem i
    return ql | (qh << 4)


def _dq_q5_0(b: torch.Tensor) -> torch.Tensor:
    q = _q5(b, 2).to(torch.int8) - 16
    return _f16(b, 0) * q.to(torch.float32)


def _dq_q5_1(b: torch.Tensor) -> torch.Tensor:
    q = _q5(b, 4).to(torch.float32)
    return _f16(b, 0) * q + _f16(b, 2)


def _dq_q8_0(b: torch.Tensor) -> torch.Tensor:
    x = b[:, 2:].contiguous().view(torch.int8).to(torch.float32)
    return x * _f16(b, 0)


def _dq_q2_k(b: torch.Tensor) -> torch.Tensor:
    n = b.shape[0]
    scales, qs = b[:, :16], b[:, 16:80]
    dl = (_f16(b, 80) * (scales & 0x0F).to(torch.float32)).reshape(n, 16, 1)
    ml = (_f16(b, 82) * (scales >> 4).to(torch.float32)).reshape(n, 16, 1)
    q = _crumbs(qs, 32).reshape(n, 16, 16).to(torch.float32)
    return (dl * q - ml).reshape(n, QK_K)


def _dq_q3_k(b: torch.Tensor) -> torch.Tensor:
    n = b.shape[0]
    hmask, qs, sc = b[:, :32], b[:, 32:96], b[:, 96:108]
    lo = _nibbles(sc[:, :8], 8).reshape(n, 16)  # scale bits 0-3
    hi = _crumbs(sc[:, 8:], 4).reshape(n, 16)  # scale bits 4-5
    scales = ((lo | (hi << 4)).to(torch.int8) - 32).to(torch.float32)
    dl = (_f16(b, 108) * scales).reshape(n, 16, 1)
    ql = _crumbs(qs, 32).reshape(n, 16, 16)
    qh = _bits(hmask, 32).reshape(n, 16, 16) ^ 1  # a set hmask bit means "no -4 offset"
    q = (ql.to(torch.int8) - (qh << 2).to(torch.int8)).to(torch.float32)
    return (dl * q).reshape(n, QK_K)


def _dq_q4_k(b: torch.Tensor) -> torch.Tensor:
    n = b.shape[0]
    sc, mn = _scale_min_k4(b[:, 4:16])
    d = (_f16(b, 0) * sc.to(torch.float32)).reshape(n, 8, 1)
    dm = (_f16(b, 2) * mn.to(torch.float32)).reshape(n, 8, 1)
    q = _nibbles(b[:, 16:], 32).reshape(n, 8, 32).to(torch.float32)
    return (d * q - dm).reshape(n, QK_K)


def _dq_q5_k(b: torch.Tensor) -> torch.Tensor:
    n = b.shape[0]
    sc, mn = _scale_min_k4(b[:, 4:16])
    d = (_f16(b, 0) * sc.to(torch.float32)).reshape(n, 8, 1)
    dm = (_f16(b, 2) * mn.to(torch.float32)).reshape(n, 8, 1)
    ql = _nibbles(b[:, 48:], 32).reshape(n, 8, 32)
    qh = _bits(b[:, 16:48], 32).reshape(n, 8, 32)
    q = (ql | (qh << 4)).to(torch.float32)
    return (d * q - dm).reshape(n, QK_K)


def _dq_q6_k(b: torch.Tensor) -> torch.Tensor:
    n = b.shape[0]
    ql, qh, sc = b[:, :128], b[:, 128:192], b[:, 192:208]
    d = (_f16(b, 208) * sc.contiguous().view(torch.int8).to(torch.float32)).reshape(n, 16, 1)
    lo = _nibbles(ql, 64).reshape(n, 8, 32)
    hi = _crumbs(qh, 32).reshape(n, 8, 32)
    q = ((lo | (hi << 4)).to(torch.int8) - 32).reshape(n, 16, 16).to(torch.float32)
    return (d * q).reshape(n, QK_K)


_DEQUANT: dict[GGMLQuantizationType, Callable[[torch.Tensor], torch.Tensor]] = {
    Q.F32: _dq_f32,
    Q.F16: _dq_f16,
    Q.BF16: _dq_bf16,
    Q.Q4_0: _dq_q4_0,
    Q.Q4_1: _dq_q4_1,
    Q.Q5_0: _dq_q5_0,
    Q.Q5_1: _dq_q5_1,
    Q.Q8_0: _dq_q8_0,
    Q.Q2_K: _dq_q2_k,
    Q.Q3_K: _dq_q3_k,
    Q.Q4_K: _dq_q4_k,
    Q.Q5_K: _dq_q5_k,
    Q.Q6_K: _dq_q6_k,
}
assert set(_DEQUANT) == SUPPORTED_QTYPES


def dequantize(data: torch.Tensor, qtype: int) -> torch.Tensor:
    """Dequantize whole blocks in the last dim: uint8 `[..., nbytes]` (or the float payload of
    F32/F16/BF16 in any dtype) -> float32 `[..., n_elements]`, on `data`'s device."""
    qt = Q(int(qtype))
    fn = _DEQUANT.get(qt)
    if fn is None:
        raise ValueError(f"unsupported quant type {qt.name}")
    lay = LAYOUTS[qt]
    if data.dtype != torch.uint8:
        data = data.contiguous().view(torch.uint8)  # float payload -> its bytes
    lead, nbytes = tuple(data.shape[:-1]), data.shape[-1]
    if nbytes % lay.type_size:
        raise ValueError(
            f"{qt.name}: last dim of {nbytes} bytes is not whole {lay.type_size}-byte blocks"
        )
    blocks = data.contiguous().reshape(-1, lay.type_size)  # [n_blocks, type_size]
    out = fn(blocks)  # [n_blocks, block_size]
    return out.reshape(*lead, nbytes // lay.type_size * lay.block_size)


def dequantize_tensor(raw: RawTensor, device: str | torch.device = "cpu") -> torch.Tensor:
    """A GGUF tensor as float32 of `raw.shape` on `device` (bytes move first, then dequantize)."""
    with warnings.catch_warnings():  # the memory map is read-only; we only ever read it
        warnings.filterwarnings("ignore", message=".*not writable.*")
        src = torch.from_numpy(raw.data)
    return dequantize(src.to(device), raw.qtype).reshape(raw.shape)
