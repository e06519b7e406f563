"""RoPE tables: inverse frequencies (with llama3/linear scaling or per-dim factors) -> cos/sin."""

from __future__ import annotations

import math

import torch

from localllm.config import ModelConfig


def inv_frequencies(cfg: ModelConfig, freq_factors: torch.Tensor | None = None) -> torch.Tensor:
    """[head_dim / 2] float64 inverse frequencies theta^(-2i/d), scaled as the model asks."""
    d = cfg.head_dim
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    if (
        freq_factors is not None
    ):  # GGUF `rope_freqs.weight` (llama 3.1+ conversions): divide by factor
        return inv / freq_factors.to(torch.float64)
    s = cfg.rope_scaling
    if s is None:
        return inv
    if s.kind == "linear":
        return inv / s.factor
    # llama3: keep high frequencies, divide low ones by factor, interpolate in between
    low_wavelen = s.original_context / s.low_freq_factor
    high_wavelen = s.original_context / s.high_freq_factor
    wavelen = 2 * math.pi / inv
    smooth = (s.original_context / wavelen - s.low_freq_factor) / (
        s.high_freq_factor - s.low_freq_factor
    )
    scaled = torch.where(wavelen > low_wavelen, inv / s.factor, inv)
    mid = (wavelen <= low_wavelen) & (wavelen >= high_wavelen)
    return torch.where(mid, (1 - smooth) * inv / s.factor + smooth * inv, scaled)


def cos_sin_table(
    cfg: ModelConfig,
    max_pos: int,
    device: torch.device | str,
    freq_factors: torch.Tensor | None = None,
) -> torch.Tensor:
    """[max_pos, head_dim] float32 = cat(cos[max_pos, D/2], sin[max_pos, D/2])."""
    inv = inv_frequencies(cfg, freq_factors)
    angles = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv[None, :]  # [P, D/2]
    return torch.cat([angles.cos(), angles.sin()], dim=-1).to(torch.float32).to(device)
