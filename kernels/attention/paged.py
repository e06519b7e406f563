"""Paged attention reference (pure torch): causal attention of a flat ragged batch over pages.

q [T, Hq, D] holds B sequences back to back: rows cu_seqlens_q[b]:cu_seqlens_q[b+1] belong to
sequence b, whose KV (seq_lens[b] tokens, this step's included) lives in the pages listed in
block_tables[b]. Query row i of sequence b sits at position seq_lens[b] - q_len + i and attends
to KV positions <= its own. GQA: query head h reads kv head h // (Hq // Hkv).
"""

from __future__ import annotations

import torch

from localllm.kernels.attention.kv_dtypes import dequantize_kv


def gather_kv(
    cache: torch.Tensor, scale: torch.Tensor | None, block_ids: torch.Tensor, length: int
) -> torch.Tensor:
    """Contiguous fp32 [Hkv, length, D] from the pages block_ids [n_blocks] of one sequence."""
    pages = cache.index_select(0, block_ids)  # [n, Hkv, bs, D]
    s = None if scale is None else scale.index_select(0, block_ids)  # [n, Hkv, bs]
    x = dequantize_kv(pages, s)  # [n, Hkv, bs, D] fp32
    n, h, bs, d = x.shape
    return x.permute(1, 0, 2, 3).reshape(h, n * bs, d)[:, :length]


def attend_one(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """q [n, Hq, D] (the last n of L positions), k/v [Hkv, L, D] fp32 -> [n, Hq, D] fp32."""
    n, hq, d = q.shape
    hkv, length, _ = k.shape
    g = hq // hkv
    qh = q.float().reshape(n, hkv, g, d).permute(1, 2, 0, 3)  # [Hkv, G, n, D]
    s = torch.matmul(qh, k[:, None].transpose(-1, -2)) * scale  # [Hkv, G, n, L]
    qpos = torch.arange(length - n, length, device=q.device)[:, None]  # [n, 1]
    visible = torch.arange(length, device=q.device)[None, :] <= qpos  # [n, L]
    s = s.masked_fill(~visible, float("-inf"))
    p = torch.softmax(s, dim=-1)
    o = torch.matmul(p, v[:, None])  # [Hkv, G, n, D]
    return o.permute(2, 0, 1, 3).reshape(n, hq, d)


def check_attention_args(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    seq_lens: torch.Tensor,
) -> None:
    _, hq, d = q.shape
    hkv = k_cache.shape[1]
    if k_cache.shape != v_cache.shape or k_cache.shape[3] != d:
        raise ValueError(f"paged_attention: caches {tuple(k_cache.shape)} vs q {tuple(q.shape)}")
    if hq % hkv:
        raise ValueError(f"paged_attention: {hq} query heads not a multiple of {hkv} kv heads")
    b = seq_lens.shape[0]
    if cu_seqlens_q.shape != (b + 1,) or block_tables.shape[0] != b:
        raise ValueError("paged_attention: cu_seqlens_q [B+1], seq_lens [B], block_tables [B, n]")


def paged_attention(
    q: torch.Tensor,  # [T, Hq, D]
    k_cache: torch.Tensor,  # [num_blocks, Hkv, block_size, D]
    v_cache: torch.Tensor,
    k_scale: torch.Tensor | None,  # [num_blocks, Hkv, block_size] fp32 or None
    v_scale: torch.Tensor | None,
    block_tables: torch.Tensor,  # [B, max_blocks] int32
    cu_seqlens_q: torch.Tensor,  # [B + 1] int32
    seq_lens: torch.Tensor,  # [B] int32
    max_q_len: int,
    max_seq_len: int,
    scale: float,
    out: torch.Tensor | None = None,  # [T, Hq, D] q.dtype
    quant: str | None = None,  # int8 layout for the Triton version's fused quantization; unused
    long_context: bool = False,  # picks the Triton version's loop (plan.LONG_CONTEXT); unused
) -> torch.Tensor:
    check_attention_args(q, k_cache, v_cache, block_tables, cu_seqlens_q, seq_lens)
    if out is None:
        out = torch.zeros_like(q)
    bs = k_cache.shape[2]
    cu, lens = cu_seqlens_q.tolist(), seq_lens.tolist()  # host copies: reference path only
    for b, length in enumerate(lens):
        lo, hi = cu[b], cu[b + 1]
        if hi <= lo:
            continue
        if length <= 0:
            out[lo:hi] = 0
            continue
        if hi - lo > length:
            raise ValueError(f"paged_attention: sequence {b} has {hi - lo} queries > {length} KV")
        ids = block_tables[b, : -(-length // bs)].long()
        k = gather_kv(k_cache, k_scale, ids, length)  # [Hkv, L, D]
        v = gather_kv(v_cache, v_scale, ids, length)
        out[lo:hi] = attend_one(q[lo:hi], k, v, scale).to(out.dtype)
    return out
