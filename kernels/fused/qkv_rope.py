"""The attention input block of a layer as one op: QKV projection, RoPE of q and k, and the
paged KV store. The reference composes `qlinear` and `rope_store_kv` (pure torch); the Triton
version fuses all three into the dp4a GEMV for decode tokens (`linear/dp4a_triton.py`,
`_dp4a_rope_kernel`) and otherwise composes the Triton ops the same way.
  x [T, K] -> qkv [T, (Hq + 2 Hkv) D] (q and k rotated; k and v also stored in the cache)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from localllm.kernels.fused.quant_act import QAct
from localllm.kernels.fused.rope_kv import rope_store_kv as rope_store_kv_ref
from localllm.kernels.linear.qlinear import QuantWeight, linear_stacked, qlinear_ref


@dataclass(frozen=True)
class Heads:
    n_q: int
    n_kv: int
    dim: int
    interleaved: bool  # RoPE pairs (2i, 2i + 1) (GGUF llama) or (i, i + D/2) (neox)


def compose(qlinear: Callable, rope_store_kv: Callable, x: torch.Tensor | QAct,
            ws: list[QuantWeight], bias: torch.Tensor | None, heads: Heads,
            positions: torch.Tensor, cos_sin: torch.Tensor, k_cache: torch.Tensor,
            v_cache: torch.Tensor, k_scale: torch.Tensor | None, v_scale: torch.Tensor | None,
            slot_mapping: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """qkv from separate ops: the weights' outputs side by side (+ bias), then RoPE + store."""
    qkv = linear_stacked(qlinear, x, ws, bias)
    t, d = qkv.shape[0], heads.dim
    q = qkv[:, : heads.n_q * d].view(t, heads.n_q, d)
    k = qkv[:, heads.n_q * d : (heads.n_q + heads.n_kv) * d].view(t, heads.n_kv, d)
    v = qkv[:, (heads.n_q + heads.n_kv) * d :].view(t, heads.n_kv, d)
    rope_store_kv(q, k, v, positions, cos_sin, heads.interleaved, k_cache, v_cache, k_scale,
                  v_scale, slot_mapping)  # fmt: skip
    return qkv


def qkv_rope_store(x: torch.Tensor | QAct, ws: list[QuantWeight], bias: torch.Tensor | None,
                   heads: Heads, positions: torch.Tensor, cos_sin: torch.Tensor,
                   k_cache: torch.Tensor, v_cache: torch.Tensor, k_scale: torch.Tensor | None,
                   v_scale: torch.Tensor | None, slot_mapping: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """x [T, K] through the QKV weights `ws` (stacked along N: q | k | v, whole heads each) ->
    qkv [T, (Hq + 2 Hkv) D] in x's dtype, with q and k rotated and k, v stored at their slots."""
    return compose(qlinear_ref, rope_store_kv_ref, x, ws, bias, heads, positions, cos_sin,
                   k_cache, v_cache, k_scale, v_scale, slot_mapping)  # fmt: skip
