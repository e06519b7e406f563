"""The device-side description of one forward: a flat ragged token batch (no padding)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class ForwardBatch:
    input_ids: torch.Tensor  # [T] int64: tokens of all sequences, back to back
    positions: torch.Tensor  # [T] int64: position of each token in its sequence
    slot_mapping: torch.Tensor  # [T] int64: KV slot (block * block_size + offset); -1 = padding
    block_tables: torch.Tensor  # [B, max_blocks] int32
    cu_seqlens_q: torch.Tensor  # [B + 1] int32: query rows of seq b are cu[b]:cu[b+1]
    seq_lens: torch.Tensor  # [B] int32: KV length of seq b after this step
    max_q_len: int  # host-side bounds (kernels size grids from these, never from tensor data)
    max_seq_len: int
    logits_indices: torch.Tensor  # [S] int64: rows whose logits are computed
    logits_all_rows: bool = False  # logits_indices is 0..T-1 (decode): no gather needed
    # the longest sequence holds at least plan.LONG_CONTEXT tokens: attention may take its
    # long-context loop (a kernel choice; the same attention within rounding)
    long_context: bool = False

    @property
    def num_tokens(self) -> int:
        return self.input_ids.shape[0]


@dataclass
class KVCache:
    """The paged KV pool: per layer views into one allocation."""

    k: list[torch.Tensor]  # L x [num_blocks, n_kv_heads, block_size, head_dim]
    v: list[torch.Tensor]
    k_scale: list[torch.Tensor | None]  # L x [num_blocks, n_kv_heads, block_size] fp32 (int8/fp8)
    v_scale: list[torch.Tensor | None]
    num_blocks: int
    block_size: int
    dtype_name: str  # "fp32" | "fp16" | "bf16" | "int8" | "fp8"
    # the one allocation the views above are taken from: [L, 2, num_blocks, n_kv_heads,
    # block_size, head_dim], and its scales [L, 2, num_blocks, n_kv_heads, block_size]
    pool: torch.Tensor
    scale_pool: torch.Tensor | None

    @property
    def pools(self) -> list[torch.Tensor]:
        """The allocations a block's slots live in (K/V, then their scales when quantized)."""
        return [self.pool] if self.scale_pool is None else [self.pool, self.scale_pool]
