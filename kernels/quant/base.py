"""What the project knows about one GGUF quant format, in one record (`QuantFormat`).

Every format has a block layout and a torch reference dequantizer of its GGUF blocks. Formats
the quantized-linear kernels run also carry `KernelFacts`: how `pack` repacks the blocks into
planes at load, the torch dequantizer of those planes, the constants the Triton kernels are
specialized on, and the tuning tables of the launches. A format without `KernelFacts` is
dequantized to a dense matrix at load.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

# [n_blocks, type_size] uint8 -> [n_blocks, block_size] float32
BlockDequant = Callable[[torch.Tensor], torch.Tensor]
Planes = dict[str, torch.Tensor]
# GGUF blocks uint8 [rows, blocks, type_size] -> planes (layout: `planes.py`)
Packer = Callable[[torch.Tensor], Planes]
# (planes, n, k) -> float32 [n, k]
PlaneDequant = Callable[[Planes, int, int], torch.Tensor]


@dataclass(frozen=True)
class Tuning:
    """Launch tables of the qlinear kernels for one format (from the H200 sweeps named in
    `linear/gemv_triton.py`)."""

    vec: tuple[tuple[int, int], tuple[int, int]]  # T == 1: (BN, warps) for N <= 4096, N > 4096
    dot: tuple[int, int]  # 1 < T <= DOT_MAX_T (MODE_DOT): (BN, warps)
    store: tuple[int, bool, int]  # dequantize-to-fp16: (K tile, split K, warps)


@dataclass(frozen=True)
class KernelFacts:
    code: int  # FMT constexpr of the Triton kernels
    planes: tuple[str, ...]  # plane names in kernel argument order
    words: int  # W: int32 words per group
    fields: int  # F: quants per word; a group is W * F elements
    qbits: int  # bits per decoded field: v = 1 + u / 2^qbits
    qc: float  # q = 2^qbits * v - qc (2^qbits + the zero point)
    has_min: bool
    min_k: int  # K must be a multiple of this
    act_layout: str  # byte order of the int8 activations its dp4a GEMV reads (`quant_act`)
    h2_center: int | None  # Z of the packed-fp16 GEMV (quants decoded as q - Z); None: no half2
    pack: Packer | None  # from GGUF blocks (None: formats packed from other files, AWQ)
    dequant: PlaneDequant
    tuning: Tuning

    @property
    def group(self) -> int:
        """Elements per group of the packed layout (32; 16 for Q8_0)."""
        return self.words * self.fields


@dataclass(frozen=True)
class QuantFormat:
    qtype: GGMLQuantizationType
    f16_fields: tuple[int, ...]  # byte offsets of the fp16 scale fields (d, dmin/m) in a block
    dequant_blocks: BlockDequant
    kernel: KernelFacts | None = None

    @property
    def name(self) -> str:  # "q4_k": the name of its packed planes (`QuantWeight.fmt`)
        return self.qtype.name.lower()

    @property
    def block_size(self) -> int:  # elements per block
        return GGML_QUANT_SIZES[self.qtype][0]

    @property
    def type_size(self) -> int:  # bytes per block
        return GGML_QUANT_SIZES[self.qtype][1]
