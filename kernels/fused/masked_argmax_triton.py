"""Triton masked argmax (`masked_argmax.py` is the reference): one launch masks every
constrained row and finds its blocks' maxima, a second picks each row's token and writes it
into `out` at the row's index (the decode CUDA graph's greedy ids), so the host copies ids
only. Same two passes and tie rule as `argmax_triton` (the first index of the maximum; a NaN
that the mask allows ranks first, a NaN it forbids is -inf like any forbidden logit)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from localllm.kernels.fused.argmax_triton import BLOCK
from localllm.kernels.fused.masked_argmax import check_masked_argmax
from localllm.kernels.pdl import pdl_args, pdl_enter


@triton.jit
def _masked_block_argmax_kernel(
    X,
    MASK,
    ROWS,
    PM,
    PI,
    V,
    W,
    stride_x,
    stride_m,
    P,
    BLOCK: tl.constexpr,
    PDL: tl.constexpr = False,
):
    pdl_enter(PDL)
    k = tl.program_id(0).to(tl.int64)  # mask row
    p = tl.program_id(1)
    row = tl.load(ROWS + k)  # its logits row
    cols = p * BLOCK + tl.arange(0, BLOCK)
    live = cols < V
    words = cols >> 5
    bits = tl.load(MASK + k * stride_m + words, mask=live & (words < W), other=0)
    allowed = ((bits >> (cols & 31)) & 1) != 0
    xp = X + row * stride_x + cols
    x = tl.load(xp, mask=live, other=float("-inf")).to(tl.float32)
    ninf = tl.full([BLOCK], float("-inf"), tl.float32)
    tl.store(xp, ninf.to(X.dtype.element_ty), mask=live & (allowed == 0))
    x = tl.where(x != x, float("inf"), x)  # NaN ranks first, as in torch
    x = tl.where(allowed, x, ninf)
    m, i = tl.max(x, axis=0, return_indices=True, return_indices_tie_break_left=True)
    tl.store(PM + k * P + p, m)
    tl.store(PI + k * P + p, p * BLOCK + i)


@triton.jit
def _masked_reduce_kernel(PM, PI, ROWS, OUT, P, P_PAD: tl.constexpr, PDL: tl.constexpr = False):
    pdl_enter(PDL)
    k = tl.program_id(0).to(tl.int64)
    p = tl.arange(0, P_PAD)
    m = tl.load(PM + k * P + p, mask=p < P, other=float("-inf"))
    best = tl.argmax(m, axis=0, tie_break_left=True)  # the first block: the smallest index
    tl.store(OUT + tl.load(ROWS + k), tl.load(PI + k * P + best).to(tl.int64))


def masked_argmax_triton(
    logits: torch.Tensor, bitmask: torch.Tensor, rows: torch.Tensor, out: torch.Tensor
) -> None:
    """In place, as `masked_argmax_ref`: logits [S, V] float (unit column stride); bitmask
    [R, W] int32; rows [R] int64, distinct; out [>= S] int64."""
    check_masked_argmax(logits, bitmask, rows, out)
    if logits.stride(1) != 1:
        raise ValueError("masked_argmax: logits columns must be contiguous (it writes in place)")
    r, w = bitmask.shape
    v = logits.shape[1]
    if r == 0 or v == 0:
        return
    bitmask, rows = bitmask.contiguous(), rows.contiguous()
    block = min(BLOCK, triton.next_power_of_2(v))
    p = triton.cdiv(v, block)
    pm = torch.empty((r, p), dtype=torch.float32, device=logits.device)
    pi = torch.empty((r, p), dtype=torch.int32, device=logits.device)
    pdl = pdl_args(logits.device)
    _masked_block_argmax_kernel[(r, p)](logits, bitmask, rows, pm, pi, v, w, logits.stride(0),
                                        bitmask.stride(0), p, BLOCK=block, num_warps=8, **pdl)  # fmt: skip
    _masked_reduce_kernel[(r,)](pm, pi, rows, out, p, P_PAD=max(2, triton.next_power_of_2(p)),
                                num_warps=1, **pdl)  # fmt: skip
