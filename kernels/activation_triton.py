"""Triton silu(gate) * up over [T, F] (gate/up may be column slices of one [T, 2F] tensor)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from localllm.kernels.registry import register


@triton.jit
def _silu_mul_kernel(
    G, U, OUT,  # [T, F] each, unit column stride
    stride_g, stride_u, stride_o, F,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < F
    g = tl.load(G + row * stride_g + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(U + row * stride_u + cols, mask=mask, other=0.0).to(tl.float32)
    y = g / (1.0 + tl.exp(-g)) * u
    tl.store(OUT + row * stride_o + cols, y.to(OUT.dtype.element_ty), mask=mask)


@register("silu_mul", "triton")
def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """gate, up [T, F] -> [T, F] in gate.dtype."""
    if gate.shape != up.shape or gate.dim() != 2:
        raise ValueError(f"silu_mul: gate {tuple(gate.shape)} and up {tuple(up.shape)}")
    gate = gate if gate.stride(1) == 1 else gate.contiguous()
    up = up if up.stride(1) == 1 else up.contiguous()
    t, f = gate.shape
    out = torch.empty((t, f), dtype=gate.dtype, device=gate.device)
    if t == 0 or f == 0:
        return out
    block = min(triton.next_power_of_2(f), 2048)
    _silu_mul_kernel[(t, triton.cdiv(f, block))](
        gate, up, out, gate.stride(0), up.stride(0), out.stride(0), f,
        BLOCK=block, num_warps=4 if block >= 1024 else 2,
    )
    return out
