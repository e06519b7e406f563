"""Triton copy of a block's leading slots (see copy_slots.py): one launch for every layer, K
and V. torch's copy of the same strided view splits into one launch per layer once the pool
passes 2^31 elements (TensorIterator's 32-bit indexing): on an H100 32 launches and ~106 us for
llama3-8b's 48 slots (BENCHMARKS.md, session 41), on the path to the turn's first token.

Program (row, c) copies elements c*BLOCK.. of the n slots x rest of one (layer, K|V, head) row:
those are contiguous in the pool, so each program moves one run with 64-bit offsets."""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from localllm.kernels.attention.copy_slots import check_copy_args

BLOCK = 1024  # elements a program moves: 2 KB of fp16


# block ids and lengths are runtime values: not specialized (a block id of 1 would otherwise
# become a constant, and every new (src, dst, n) pattern a compile on the path to a first token)
@triton.jit(do_not_specialize=["src", "dst", "n_elems"])
def _copy_slots_kernel(P, src, dst, n_elems, H, stride_lk, stride_block, stride_head,
                       BLOCK: tl.constexpr):  # fmt: skip
    row = tl.program_id(0)  # (layer * 2 + K|V) * H + head
    lk = (row // H).to(tl.int64)
    head = (row % H).to(tl.int64)
    base = lk * stride_lk + head * stride_head
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_elems
    x = tl.load(P + base + src.to(tl.int64) * stride_block + cols, mask=mask)
    tl.store(P + base + dst.to(tl.int64) * stride_block + cols, x, mask=mask)


def copy_slots_triton(pool: torch.Tensor, src: int, dst: int, num_tokens: int) -> None:
    """pool[:, :, dst, :, :num_tokens] = pool[:, :, src, :, :num_tokens] (pool contiguous)."""
    check_copy_args(pool, src, dst, num_tokens)
    if not pool.is_contiguous():
        raise ValueError("copy_slots: the pool must be contiguous")
    if num_tokens == 0 or src == dst:
        return
    rows = pool.shape[0] * 2 * pool.shape[3]
    n_elems = num_tokens * math.prod(pool.shape[5:])
    grid = (rows, triton.cdiv(n_elems, BLOCK))
    _copy_slots_kernel[grid](pool, src, dst, n_elems, pool.shape[3], pool.stride(1),
                             pool.stride(2), pool.stride(3), BLOCK=BLOCK, num_warps=4)  # fmt: skip
