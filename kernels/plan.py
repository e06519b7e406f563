"""What runs at batch N, on the kernels side: every row threshold that picks a kernel lives
here (the CUDA-graph bucket sizes of the engine are the runner's).
  rows (T)          quantized linear (`linear_kernel`)              norm / SiLU / attention
  1 .. DP4A_MAX_T,  dp4a GEMV (int8 activations, the GPU default;  norm / SiLU also emit the
    int8 act        several rows share each weight tile read;      int8 form (attention: 1 row)
                    Q8_0: 1 row, `int8_rows`)
  1                 GEMV (packed-fp16 decode for fp16 x)           column-split programs
  2 .. 16           fused dequant-GEMM (`qmm_triton`)              column-split norms; decode
                                                                   attention plan (split-KV)
  17 .. 128         fused dequant-GEMM                             whole-row norm programs
  > 128             dequantize to fp16 + cuBLAS                    prefill attention plan
fp32 activations on the GPU skip the fused GEMM (its fp32 tiles do not fit in shared memory):
2 .. DOT_MAX_T rows take the tile GEMM (MODE_DOT), more the dequantize + cuBLAS path.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

import torch

from localllm.kernels.attention.kv_dtypes import kv_dtype_of
from localllm.kernels.fused.quant_act import QAct
from localllm.kernels.quant import KERNEL_FORMATS, kernel_facts

if TYPE_CHECKING:
    from localllm.kernels.linear.qlinear import QuantWeight

# up to this many rows int8 activations (`quant_act`) feed the dp4a GEMV (decode of a few
# streams, speculative verification): producers emit them for this many rows, wider batches
# take x as it is to the fused GEMM. H200, 8B shapes, weights from memory
# (scripts/sweep_dp4a_rows.py): the dp4a GEMV at 5 rows 7.7-34 us vs the fused GEMM's 12-48;
# at 8-9 rows the GEMM wins on the tall matrices (gate+up 48 vs 54-57 us, LM head 224 vs 297)
DP4A_MAX_T = 6
# int8 activation layouts that feed several rows (the rest: one row, as before). "w8" (Q8_0):
# its 8-bit weights make the activation rounding the larger error; pycode-22m-q8_0 at batch 4
# agreed with its fp32 golden for [13, 96, 8, 96] tokens through the dp4a GEMV against
# [96, 96, 38, 96] through the fp16 GEMM (H200); the 4-bit formats kept 96 x 4
MULTI_ROW_LAYOUTS = ("w4",)


def int8_rows(layout: str) -> int:
    """The most rows whose int8 activations in `layout` feed the dp4a GEMV."""
    return DP4A_MAX_T if layout in MULTI_ROW_LAYOUTS else 1


# up to this many rows the fused dequant-GEMM beats dequantize + cuBLAS: it reads the packed
# weights once instead of writing and re-reading an fp16 copy (H200, weights from memory, 100
# rows, Q4_K: 28672x4096 239 vs 358 us, 4096x14336 107 vs 197 us, 4096x4096 47 vs 52 us;
# scripts/probe_qmm.py --cublas). Above it, prefill chunks take dequantize + cuBLAS.
MM_MAX_T = 128
# up to this many rows the tile GEMM (MODE_DOT) beats dequantize + cuBLAS
DOT_MAX_T = 64
# up to this many rows a norm runs programs of NORM_SPLIT_COLS columns (each re-reads the row
# for its statistics), so a decode step's few rows do not run on a few SMs
NORM_SPLIT_ROWS = 16
NORM_SPLIT_COLS = 512
# q_len up to this (decode, speculative verification) takes attention's split-KV plan
ATTN_DECODE_MAX_Q = 16
# a decode step whose longest sequence holds at least this many tokens is a long-context step
# (ForwardBatch.long_context): one-token MHA decode over int8 KV then scores by `dp4a`
# (`mha_int8_kdot`), which reads the same bytes with fewer instructions. The engine captures
# separate decode graphs for such steps, so neither loop pays for the other. H200, llama2-7b
# int8 KV, one layer with its merge (benchmarks/session28): 4,161 tokens 25.2 -> 25.9 us,
# 16,513 tokens 71.5 -> 59.3 us; end to end with these graphs (session 33), tok/s: depth 8,192
# 385.8 -> 384.4 (the crossover), 16,384 276.2 -> 308.1, shorter depths unchanged
LONG_CONTEXT = 8192


class LinearKernel(Enum):
    DP4A_GEMV = "dp4a GEMV (int8 activations)"
    DENSE = "cuBLAS on a dense weight (formats without a kernel)"
    EMPTY = "no rows"
    FUSED_GEMM = "fused dequant-GEMM (qmm_triton)"
    GEMV = "GEMV (MODE_VEC, packed fp16 for fp16 x)"
    TILE_GEMM = "tile GEMM (MODE_DOT)"
    DEQUANT_MATMUL = "dequantize to fp16 + cuBLAS (dequant_triton)"


def linear_kernel(rows: int, fmt: str, int8_act: bool, fp32_on_gpu: bool) -> LinearKernel:
    """The one dispatch table of the Triton quantized linear: rows x format -> kernel.
    `int8_act`: x comes with (or may take) an int8 form; `fp32_on_gpu`: fp32 x on CUDA."""
    if int8_act and fmt in KERNEL_FORMATS and 1 <= rows <= int8_rows(kernel_facts(fmt).act_layout):
        return LinearKernel.DP4A_GEMV
    if fmt not in KERNEL_FORMATS:
        return LinearKernel.DENSE
    if rows == 0:
        return LinearKernel.EMPTY
    if 1 < rows <= MM_MAX_T and not fp32_on_gpu:
        return LinearKernel.FUSED_GEMM
    if rows > DOT_MAX_T:
        return LinearKernel.DEQUANT_MATMUL
    return LinearKernel.GEMV if rows == 1 else LinearKernel.TILE_GEMM


def emits_int8(rows: int, width: int, layout: str | None) -> bool:
    """Whether a producer (norm, SiLU x mul) also writes the int8 form (in `layout`; None: no
    int8 wanted) of its [rows, width] output for the GEMV that follows."""
    return layout is not None and 1 <= rows <= int8_rows(layout) and width % 32 == 0


def norm_block_cols(rows: int, block: int) -> int:
    """Columns per norm program: a whole (padded) row, or NORM_SPLIT_COLS for a few rows."""
    return min(block, NORM_SPLIT_COLS) if rows <= NORM_SPLIT_ROWS else block


def qkv_fusable(x: torch.Tensor | QAct, ws: list[QuantWeight], head_dim: int,
                cos_sin: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor) -> bool:  # fmt: skip
    """Whether QKV + RoPE + KV store runs as one dp4a launch per weight run (`qkv_rope_triton`):
    one row (its programs read the weights once per row) with int8 activations, weights with a dp4a kernel in whole heads, a float cache."""
    return (isinstance(x, QAct) and x.shape[0] == 1
            and all(w.fmt in KERNEL_FORMATS and w.k % kernel_facts(w.fmt).min_k == 0 for w in ws)
            and all(w.n % head_dim == 0 for w in ws) and head_dim % 2 == 0
            and _float_kv(k_cache.dtype)
            and k_cache.dtype == v_cache.dtype and k_cache.stride() == v_cache.stride()
            and k_cache.stride(-1) == 1 and cos_sin.dtype == torch.float32
            and cos_sin.stride(-1) == 1)  # fmt: skip


def mha_int8_kdot(kv_dtype: torch.dtype, act_dtype: torch.dtype, max_q_len: int, group: int,
                  head_dim: int) -> bool:  # fmt: skip
    """Whether decode attention has its dp4a-score loop for these launches: one query token per
    sequence, one query head per KV head (MHA), int8 KV, fp16 / bf16 activations and a head
    size of whole 32-element groups that is a power of two (no padded lanes)."""
    return (kv_dtype == torch.int8 and group == 1 and max_q_len <= 1 and head_dim % 32 == 0
            and head_dim & (head_dim - 1) == 0
            and act_dtype in (torch.float16, torch.bfloat16))  # fmt: skip


def long_context_step(max_seq_len: int) -> bool:
    """Whether a step whose longest sequence holds max_seq_len tokens is a long-context step."""
    return max_seq_len >= LONG_CONTEXT


def long_context_sequences(kv_tokens: int, max_model_len: int) -> int:
    """How many sequences of a long-context step a KV pool of kv_tokens tokens holds (0 when
    the context cannot reach LONG_CONTEXT)."""
    return kv_tokens // LONG_CONTEXT if max_model_len >= LONG_CONTEXT else 0


def long_context_loop(kv_dtype: torch.dtype, act_dtype: torch.dtype, group: int,
                      head_dim: int) -> bool:  # fmt: skip
    """Whether a model's plain decode steps run another attention loop when they are
    long-context steps (so its CUDA graphs are worth capturing apart)."""
    return mha_int8_kdot(kv_dtype, act_dtype, 1, group, head_dim)


def _float_kv(dtype: torch.dtype) -> bool:
    kd = kv_dtype_of(dtype)
    return kd is not None and not kd.quantized
