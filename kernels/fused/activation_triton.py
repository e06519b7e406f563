"""Triton silu(gate) * up over [T, F] (gate/up may be column slices of one [T, 2F] tensor)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from localllm.kernels.fused.quant_act import QUANT_CODES, QAct
from localllm.kernels.fused.quant_act_triton import _quant_store, act_buffers
from localllm.kernels.pdl import pdl_args, pdl_enter
from localllm.kernels.plan import emits_int8


@triton.jit
def _silu_mul_kernel(
    G,
    U,
    OUT,  # [T, F] each, unit column stride
    XQ,
    XS,  # QUANT > 0: int8 [T, F] and fp32 [T, F / 32, 4] (quant_act)
    stride_g,
    stride_u,
    stride_o,
    F,
    BLOCK: tl.constexpr,
    QUANT: tl.constexpr,
    PDL: tl.constexpr = False,
):
    pdl_enter(PDL)
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < F
    g = tl.load(G + row * stride_g + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(U + row * stride_u + cols, mask=mask, other=0.0).to(tl.float32)
    y = (g / (1.0 + tl.exp(-g)) * u).to(OUT.dtype.element_ty)
    tl.store(OUT + row * stride_o + cols, y, mask=mask)
    if QUANT > 0:
        c0 = tl.program_id(1) * BLOCK
        _quant_store(y.to(tl.float32), c0, F, XQ + row * F, XS + row * (F // 32) * 4, BLOCK,
                     QUANT == 2)  # fmt: skip


def silu_mul(gate: torch.Tensor, up: torch.Tensor, quant: str | None = None) -> torch.Tensor | QAct:
    """gate, up [T, F] -> [T, F] in gate.dtype; with `quant` and one row, a QAct that also
    holds the int8 form (see `norm_triton.rms_norm`)."""
    if gate.shape != up.shape or gate.dim() != 2:
        raise ValueError(f"silu_mul: gate {tuple(gate.shape)} and up {tuple(up.shape)}")
    gate = gate if gate.stride(1) == 1 else gate.contiguous()
    up = up if up.stride(1) == 1 else up.contiguous()
    t, f = gate.shape
    out = torch.empty((t, f), dtype=gate.dtype, device=gate.device)
    if t == 0 or f == 0:
        return out
    code = QUANT_CODES[quant] if emits_int8(t, f, quant) else 0
    xq, xs = act_buffers(t, f, gate.device) if code else (out, out)
    # H200, one row in a CUDA graph (scripts/sweep_small_kernels.py): 512 columns x 4 warps per
    # program 1.57 us for F = 14336, 2048 columns 2.80 us (fewer, longer programs)
    block = max(32, min(triton.next_power_of_2(f), 512))
    _silu_mul_kernel[(t, triton.cdiv(f, block))](
        gate,
        up,
        out,
        xq,
        xs,
        gate.stride(0),
        up.stride(0),
        out.stride(0),
        f,
        BLOCK=block,
        QUANT=code,
        num_warps=4 if block >= 512 else 2,
        **pdl_args(gate.device),
    )
    return QAct(out, {quant: (xq, xs)}) if code and quant is not None else out
