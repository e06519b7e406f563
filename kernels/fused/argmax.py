"""Greedy token choice over logits rows: the torch reference (first index of the maximum)."""

from __future__ import annotations

import torch


def argmax_ref(logits: torch.Tensor) -> torch.Tensor:
    """logits [S, V] float -> int64 [S]: the first index of each row's maximum."""
    if logits.dim() != 2:
        raise ValueError(f"argmax: logits must be [S, V], got {tuple(logits.shape)}")
    return logits.argmax(dim=-1)
