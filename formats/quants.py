"""GGUF tensor dequantization (torch, CPU or CUDA), bit-exact with gguf-py: the public API
over the quant-format registry `localllm.kernels.quant`, where each format's block layout and
reference dequantizer live (`[n_blocks, type_size] uint8 -> [n_blocks, block_size] float32`,
following `gguf.quants` operation by operation).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import torch
from gguf import GGMLQuantizationType

from localllm.errors import ModelLoadError
from localllm.kernels.quant import BY_QTYPE, QuantFormat

if TYPE_CHECKING:
    from localllm.formats.gguf import RawTensor

Q = GGMLQuantizationType

# qtype -> its format record (block_size, type_size, f16_fields: byte offsets of the fp16
# scale fields, following the C structs block_q4_0 ... block_q6_K in ggml-common.h)
LAYOUTS: dict[GGMLQuantizationType, QuantFormat] = BY_QTYPE
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


def dequantize(data: torch.Tensor, qtype: int) -> torch.Tensor:
    """Dequantize whole blocks in the last dim: uint8 `[..., nbytes]` (or the float payload of
    F32/F16/BF16 in any dtype) -> float32 `[..., n_elements]`, on `data`'s device."""
    qt = Q(int(qtype))
    lay = LAYOUTS.get(qt)
    if lay is None:
        raise ValueError(f"unsupported quant type {qt.name}")
    if data.dtype != torch.uint8:
        data = data.contiguous().view(torch.uint8)  # float payload -> its bytes
    lead, nbytes = tuple(data.shape[:-1]), data.shape[-1]
    if nbytes % lay.type_size:
        raise ValueError(
            f"{qt.name}: last dim of {nbytes} bytes is not whole {lay.type_size}-byte blocks"
        )
    blocks = data.contiguous().reshape(-1, lay.type_size)  # [n_blocks, type_size]
    out = lay.dequant_blocks(blocks)  # [n_blocks, block_size]
    return out.reshape(*lead, nbytes // lay.type_size * lay.block_size)


def dequantize_tensor(raw: RawTensor, device: str | torch.device = "cpu") -> torch.Tensor:
    """A GGUF tensor as float32 of `raw.shape` on `device` (bytes move first, then dequantize)."""
    with warnings.catch_warnings():  # the memory map is read-only; we only ever read it
        warnings.filterwarnings("ignore", message=".*not writable.*")
        src = torch.from_numpy(raw.data)
    return dequantize(src.to(device), raw.qtype).reshape(raw.shape)
