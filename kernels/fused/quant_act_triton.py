"""Triton int8 activation quantizer (layouts and math: `quant_act`): a standalone kernel, and
`_quant_store`, the epilogue that RMSNorm and SiLU x mul run to emit the int8 form beside
their fp16 output (no extra launch)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from localllm.kernels.fused.quant_act import GROUP, LAYOUTS, QAct
from localllm.kernels.pdl import pdl_args, pdl_enter


@triton.jit
def _quant_store(y, c0, n_valid, XQ, XS, B: tl.constexpr, W8: tl.constexpr):
    """Quantize y [B] (fp32, columns c0 .. c0 + B of one row, B and c0 multiples of 32) and
    store the int8 values (XQ: the row's int8 [K]) and the group stats (XS: fp32 [K / 32, 4])
    of the groups below n_valid. The values go to each element's byte position."""
    yg = tl.reshape(y, [B // 32, 32])  # element order
    e = tl.arange(0, 32)
    if W8:  # element 16 h + 4 s + w -> byte 16 h + 4 w + s
        p = 16 * (e // 16) + 4 * (e % 4) + (e // 4) % 4
    else:  # element 8 j + 4 t + w -> byte 16 t + 4 w + j
        p = 16 * ((e // 4) % 2) + 4 * (e % 4) + e // 8
    g = c0 // 32 + tl.arange(0, B // 32)  # [B / 32]
    gmask = g * 32 < n_valid
    amax = tl.max(tl.abs(yg), axis=1)
    inv = tl.where(amax > 0, 127.0 / amax, 0.0)
    q = tl.minimum(tl.maximum(tl.floor(yg * inv[:, None] + 0.5), -127.0), 127.0)
    tl.store(XQ + g[:, None] * 32 + p[None, :], q.to(tl.int8), mask=gmask[:, None])
    dx = amax / 127.0
    s_all = tl.sum(q, axis=1)
    s_lo = tl.sum(tl.where(e[None, :] < 16, q, 0.0), axis=1)
    xs = XS + g * 4
    tl.store(xs, dx, mask=gmask)
    tl.store(xs + 1, dx * s_all, mask=gmask)
    tl.store(xs + 2, dx * s_lo, mask=gmask)
    tl.store(xs + 3, dx * (s_all - s_lo), mask=gmask)


@triton.jit
def _quant_act_kernel(X, XQ, XS, K, stride_x, B: tl.constexpr, W8: tl.constexpr,
                      PDL: tl.constexpr = False):  # fmt: skip
    pdl_enter(PDL)
    row = tl.program_id(0).to(tl.int64)
    c0 = tl.program_id(1) * B
    cols = c0 + tl.arange(0, B)
    y = tl.load(X + row * stride_x + cols, mask=cols < K, other=0.0).to(tl.float32)
    _quant_store(y, c0, K, XQ + row * K, XS + row * (K // 32) * 4, B, W8)


def act_buffers(t: int, k: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Empty (xq int8 [T, K], xs fp32 [T, K / 32, 4])."""
    if k % GROUP:
        raise ValueError(f"quant_act: K={k} is not a multiple of {GROUP}")
    return (torch.empty((t, k), dtype=torch.int8, device=device),
            torch.empty((t, k // GROUP, 4), dtype=torch.float32, device=device))  # fmt: skip


def quant_act_triton(x: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """x [T, K] -> (xq int8 [T, K], xs fp32 [T, K / 32, 4]); see `quant_act`."""
    if layout not in LAYOUTS:
        raise ValueError(f"quant_act: unknown layout {layout!r}")
    t, k = x.shape
    xq, xs = act_buffers(t, k, x.device)
    if t == 0:
        return xq, xs
    if x.stride(1) != 1:
        x = x.contiguous()
    b = min(1024, triton.next_power_of_2(k))
    _quant_act_kernel[(t, triton.cdiv(k, b))](
        x, xq, xs, k, x.stride(0), B=b, W8=layout == "w8", num_warps=4,
        **pdl_args(x.device),
    )  # fmt: skip
    return xq, xs


def fill_lazily(a: QAct, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The int8 form of `a` in `layout`, quantized now if no producer emitted it."""
    if layout not in a.q:
        a.q[layout] = quant_act_triton(a.x, layout)
    return a.q[layout]
