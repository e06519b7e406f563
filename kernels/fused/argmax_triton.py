"""Triton argmax over logits rows in two passes: programs of BLOCK columns find their block's
maximum and its first index, then one program per row picks the first block holding the row's
maximum. A vocabulary of 128k is 32 programs per row instead of torch's one (24 us -> a few us
on an H200 at batch 1); the decode CUDA graphs run it so greedy sampling reads ids, not logits.
NaN counts as the maximum as in torch (a NaN after a +inf loses to it here, which torch would
not do; either way the index is a real column)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from localllm.kernels.pdl import pdl_args, pdl_enter

BLOCK = 4096


@triton.jit
def _block_argmax_kernel(X, PM, PI, V, stride_x, P, BLOCK: tl.constexpr,
                         PDL: tl.constexpr = False):  # fmt: skip
    pdl_enter(PDL)
    row = tl.program_id(0).to(tl.int64)
    p = tl.program_id(1)
    cols = p * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + row * stride_x + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
    x = tl.where(x != x, float("inf"), x)  # NaN ranks first, as in torch (never a padding lane)
    m, i = tl.max(x, axis=0, return_indices=True, return_indices_tie_break_left=True)
    tl.store(PM + row * P + p, m)
    tl.store(PI + row * P + p, p * BLOCK + i)


@triton.jit
def _reduce_argmax_kernel(PM, PI, OUT, P, P_PAD: tl.constexpr, PDL: tl.constexpr = False):
    pdl_enter(PDL)
    row = tl.program_id(0).to(tl.int64)
    p = tl.arange(0, P_PAD)
    m = tl.load(PM + row * P + p, mask=p < P, other=float("-inf"))
    best = tl.argmax(m, axis=0, tie_break_left=True)  # the first block: the smallest index
    tl.store(OUT + row, tl.load(PI + row * P + best).to(tl.int64))


def argmax_triton(logits: torch.Tensor) -> torch.Tensor:
    """logits [S, V] float -> int64 [S]: the first index of each row's maximum."""
    if logits.dim() != 2:
        raise ValueError(f"argmax: logits must be [S, V], got {tuple(logits.shape)}")
    s, v = logits.shape
    out = torch.empty(s, dtype=torch.int64, device=logits.device)
    if s == 0 or v == 0:
        return out.zero_()
    if logits.stride(1) != 1:
        logits = logits.contiguous()
    block = min(BLOCK, triton.next_power_of_2(v))
    p = triton.cdiv(v, block)
    pm = torch.empty((s, p), dtype=torch.float32, device=logits.device)
    pi = torch.empty((s, p), dtype=torch.int32, device=logits.device)
    pdl = pdl_args(logits.device)
    _block_argmax_kernel[(s, p)](logits, pm, pi, v, logits.stride(0), p, BLOCK=block, num_warps=8,
                                 **pdl)  # fmt: skip
    _reduce_argmax_kernel[(s,)](pm, pi, out, p, P_PAD=max(2, triton.next_power_of_2(p)),
                                num_warps=1, **pdl)  # fmt: skip
    return out
