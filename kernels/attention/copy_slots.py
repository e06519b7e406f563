"""Copy the leading slots of one KV block into another, every layer, K and V: the torch reference.

A prefix-cache hit that ends inside a block (engine/block_manager.py) copies that block's first
`num_tokens` slots into the sequence's own block before the step's forward. `pool` is the one
allocation the cache's per-layer views come from (engine/kv_cache.py): [L, 2, num_blocks,
n_kv_heads, block_size, *rest], rest = (head_dim,) for K/V and () for their scales.
"""

from __future__ import annotations

import torch


def check_copy_args(pool: torch.Tensor, src: int, dst: int, num_tokens: int) -> None:
    if pool.dim() < 5 or pool.shape[1] != 2:
        raise ValueError(f"copy_slots: pool must be [L, 2, blocks, H, block_size, ...], got "
                         f"{tuple(pool.shape)}")  # fmt: skip
    blocks, bs = pool.shape[2], pool.shape[4]
    if not (0 <= src < blocks and 0 <= dst < blocks and 0 <= num_tokens <= bs):
        raise ValueError(f"copy_slots: blocks {src} -> {dst} ({num_tokens} slots) outside a pool "
                         f"of {blocks} blocks of {bs}")  # fmt: skip


def copy_slots(pool: torch.Tensor, src: int, dst: int, num_tokens: int) -> None:
    """pool[:, :, dst, :, :num_tokens] = pool[:, :, src, :, :num_tokens]."""
    check_copy_args(pool, src, dst, num_tokens)
    pool[:, :, dst, :, :num_tokens].copy_(pool[:, :, src, :, :num_tokens])
