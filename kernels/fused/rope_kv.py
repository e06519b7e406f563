"""RoPE + paged KV store reference (KV quantization rules: `attention/kv_dtypes.py`).

Paged cache layout (allocated by localllm/kv_cache.py):
  k_cache, v_cache  [num_blocks, n_kv_heads, block_size, head_dim]  fp32/fp16/bf16/int8/fp8-e4m3
  k_scale, v_scale  [num_blocks, n_kv_heads, block_size] fp32 for int8/fp8, else None
A token's slot is block_id * block_size + offset; slot -1 means "do not store" (padding rows).
"""

from __future__ import annotations

import torch

from localllm.kernels.attention.kv_dtypes import is_quantized, quantize_kv


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool) -> None:
    """Rotate x [T, H, D] in place; cos/sin [T, D/2] fp32. Computes in fp32."""
    if interleaved:  # GGUF llama pairs (x[2i], x[2i+1])
        x0, x1 = x[..., 0::2], x[..., 1::2]
    else:  # neox pairs (x[i], x[i + D/2])
        half = x.shape[-1] // 2
        x0, x1 = x[..., :half], x[..., half:]
    a, b = x0.float(), x1.float()  # [T, H, D/2]
    c, s = cos[:, None, :], sin[:, None, :]
    r0 = a * c - b * s
    r1 = a * s + b * c
    x0.copy_(r0)
    x1.copy_(r1)


def store_kv(
    x: torch.Tensor, cache: torch.Tensor, scale: torch.Tensor | None, slot_mapping: torch.Tensor
) -> None:
    """Write x [T, Hkv, D] to the cache slots in slot_mapping [T] (-1 = skip), quantizing."""
    keep = slot_mapping >= 0
    slots = slot_mapping[keep]
    block_size = cache.shape[2]
    blk, off = slots // block_size, slots % block_size  # [n] each
    rows = x[keep]  # [n, Hkv, D]
    if is_quantized(cache.dtype):
        if scale is None:
            raise ValueError(f"a {cache.dtype} KV cache needs a scale tensor")
        values, s = quantize_kv(rows, cache.dtype)
        cache[blk, :, off] = values
        scale[blk, :, off] = s
    else:
        cache[blk, :, off] = rows.to(cache.dtype)


def check_rope_store_args(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    positions: torch.Tensor,
    cos_sin: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    T, _, D = q.shape
    if k.shape[0] != T or v.shape != k.shape or k.shape[2] != D:
        raise ValueError(
            f"rope_store_kv: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if k.shape[1] == 0 or q.shape[1] % k.shape[1]:
        raise ValueError(
            f"rope_store_kv: {q.shape[1]} query heads are not a multiple of {k.shape[1]} KV heads"
        )
    if positions.shape != (T,) or slot_mapping.shape != (T,):
        raise ValueError("rope_store_kv: positions and slot_mapping must be [num_tokens]")
    if cos_sin.shape[-1] != D or D % 2:
        raise ValueError(f"rope_store_kv: cos_sin {tuple(cos_sin.shape)} does not fit head_dim {D}")
    kv_shape = (k.shape[1], D)
    if k_cache.shape != v_cache.shape or (k_cache.shape[1], k_cache.shape[3]) != kv_shape:
        raise ValueError(f"rope_store_kv: caches {tuple(k_cache.shape)} do not fit k {kv_shape}")


def rope_store_kv(
    q: torch.Tensor,  # [T, Hq, D], rotated in place
    k: torch.Tensor,  # [T, Hkv, D], rotated in place
    v: torch.Tensor,  # [T, Hkv, D]
    positions: torch.Tensor,  # [T] int64
    cos_sin: torch.Tensor,  # [max_pos, D] fp32 = cat(cos, sin)
    interleaved: bool,
    k_cache: torch.Tensor,  # [num_blocks, Hkv, block_size, D]
    v_cache: torch.Tensor,
    k_scale: torch.Tensor | None,  # [num_blocks, Hkv, block_size] fp32 or None
    v_scale: torch.Tensor | None,
    slot_mapping: torch.Tensor,  # [T] int64, -1 = skip
) -> None:
    check_rope_store_args(q, k, v, positions, cos_sin, k_cache, v_cache, slot_mapping)
    half = q.shape[-1] // 2
    cs = cos_sin.index_select(0, positions).float()  # [T, D]
    cos, sin = cs[:, :half], cs[:, half:]
    apply_rope(q, cos, sin, interleaved)
    apply_rope(k, cos, sin, interleaved)
    store_kv(k, k_cache, k_scale, slot_mapping)
    store_kv(v, v_cache, v_scale, slot_mapping)
