"""What the project knows about one GGUF quant format, in one record (`QuantFormat`).

Every format has a block layout and a torch reference dequantizer of its GGUF blocks. Formats
the quantized-linear kernels run also carry `KernelFacts`: how `pack` repacks the blocks into
planes at load, the torch dequantizer of those planes, the constants the Triton kernels are
specialized on, the tuning tables of the launches, and the module of its Triton decode
functions (`TritonHooks`). A format without `KernelFacts` is dequantized to a dense matrix at
load.

Adding a format with kernels (nothing in `kernels/linear/` changes):
1. `kernels/quant/<name>.py` (torch only): the plane layout in its docstring; `dequant_blocks`
   (GGUF blocks uint8 [n, type_size] -> float32 [n, block_size], the reference); `pack`
   (blocks uint8 [R, blocks, type_size] -> planes; element order of `planes.py`: int32 words of
   F fields, 4 words per group, field s of word w = element 4 s + w of the group);
   `dequant_planes` (planes -> float32 [N, K], bit-exact with `dequant_blocks`); and
   `FORMAT = QuantFormat(qtype, f16_fields, dequant_blocks, KernelFacts(...))`, the facts
   documented field by field below.
2. `kernels/quant/<name>_triton.py`: the @triton.jit functions below and
   `HOOKS = TritonHooks(...)`; `KernelFacts.triton` names it ("<module>:HOOKS"). The kernels receive
   these functions as constexpr arguments and inline them. Shared pieces to build them from:
   `loads_triton.py` (GEMV tile loads), `ops_triton.py` (bit fields, fp16 pairs),
   `nibbles_triton.py` (plain 4-bit words: field, quant, h2_word, dp4a_bytes),
   `dp4a_ops_triton.py`, `mm_ops_triton.py`, `h2_asm.py` (packed-fp16 PTX).
   A checkpoint format without GGUF blocks (AWQ: `awq.py`) has `pack=None`, its own packer
   called from `linear/qlinear.pack_weight`, and its facts in `__init__.KERNEL_FORMATS`.
3. One entry in `kernels/quant/__init__.ALL`; tests: the format's case in the parametrized
   reference tests (tests/test_kernels_qlinear*.py, test_formats_dequant.py) and a
   `scripts/ptx_snapshot.py` run that compiles its kernels.

The Triton functions (tile = a program's groups; planes p0..p4 in `KernelFacts.planes` order,
unused slots repeat p0; scales fp32; W words per group, F fields per word):
GEMV / tile GEMM (`linear/gemv_triton.py`), [BN, NG] tiles:
  load_tile(p0, p1, p2, p3, p4, rows [BN], g [NG], gmask, G, MASKED)
      -> (words int32 [BN, NG, W], extra (the format's extra bits, same shape, or words),
          scale0, min0, scale1, min1 [BN, NG])  (scale1/min1: fields F/2.. if two_scales)
  field(words, extra, S) -> fp32 1 + u / 2^qbits of field S (u the unsigned quant; the
      mantissa trick of `ops_triton.unit`): the weight is scale * (2^qbits v - qc) - min
packed-fp16 GEMV (`linear/half2_triton.py`; only formats with `h2_center`, 4-bit words):
  h2_word(acc, w, e, x0, x1, x2, x3) -> acc int32 (fp16x2) + the 8 fields' (q - h2_center)
      times the activation pairs x_s (fields s, s + 4), in PTX (`h2_asm.word_asm`)
  quant(w, e, S) -> int32 u of field S in plain Triton (the interpreter's twin of h2_word)
dp4a GEMV (`linear/dp4a_triton.py`), [NG, BN] tiles (`dp4a_ops_triton.py`):
  dp4a_load(p0, p1, p2, p3, p4, rows [BN], g [NG], gmask, G) -> the load_tile tuple, [NG, BN]
  dp4a_group(acc, words, extra, s0, m0, s1, m1, xw, xs, g, gmask, EMU) -> acc fp32 [NG, BN]
      + the groups' dot products with the int8 activations (`act_layout`)
fused dequant-GEMM (`linear/qmm_triton.py`) and the prefill dequantization
(`linear/dequant_triton.py`), 32-element groups (`mm_ops_triton.py`):
  mm_ptrs(p0, p1, p2, p3, p4, rows [BN], g_lo, G, NG) -> (wp, hp, sp, dp, mp) pointers of
      the first K step (words, extra bits, per-group scales, per-super-block d / dmin; unused
      ones repeat another)
  mm_load(wp, hp, sp, dp, mp) -> (wd, hi, s, d, m) the planes of one K step
  mm_advance(wp, hp, sp, dp, mp, NG) -> the five pointers of the next K step
  mm_deq(wd, hi, s, d, m, DT, EMU) -> weights [BN, NG * 32] in K order, dtype DT (EMU: plain
      Triton, else the packed-fp16 PTX where the format has one)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
    # 65..128 rows: the fused GEMM runs on a stream-K schedule where its plain grid takes
    # (lo, hi] waves of resident programs (`linear/qmm_triton._streamk`); None: never
    streamk_waves: tuple[float, float] | None = None


@dataclass(frozen=True)
class KernelFacts:
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
    triton: str  # "module:NAME" of its `TritonHooks` (its @triton.jit functions)
    two_scales: bool = False  # fields F/2.. of a group have their own scale (Q6_K)

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


JitFn = Any  # a @triton.jit function (triton.JITFunction; Triton is imported lazily)


@dataclass(frozen=True)
class TritonHooks:
    """A format's @triton.jit functions, by kernel family (signatures in the module doc)."""

    load_tile: JitFn  # GEMV / tile GEMM
    field: JitFn
    dp4a_load: JitFn  # dp4a GEMV
    dp4a_group: JitFn
    mm_ptrs: JitFn  # fused dequant-GEMM
    mm_load: JitFn
    mm_advance: JitFn
    mm_deq: JitFn
    h2_word: JitFn | None = None  # packed-fp16 GEMV (formats with `h2_center`)
    quant: JitFn | None = None
