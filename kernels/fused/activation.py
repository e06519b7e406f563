"""SiLU-gated product reference: silu(gate) * up (pure torch)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def silu_mul(gate: torch.Tensor, up: torch.Tensor, quant: str | None = None) -> torch.Tensor:
    """gate, up [T, F] (may be strided views of one [T, 2F] tensor) -> [T, F] in gate.dtype.
    `quant` is for the Triton version (see `norm.rms_norm`)."""
    if gate.shape != up.shape:
        raise ValueError(f"silu_mul: gate {tuple(gate.shape)} and up {tuple(up.shape)} differ")
    return (F.silu(gate.float()) * up.float()).to(gate.dtype)
