"""Triton QKV + RoPE + KV store (contract: `qkv_rope`). A decode token with int8 activations
and a float KV cache takes one dp4a launch per QKV weight with RoPE and the store in its
epilogue: no RoPE kernel and no concatenation of differently quantized q+k / v outputs
(Q4_K_M's Q6_K v layers). Anything else composes the Triton qlinear and rope_store_kv."""

from __future__ import annotations

import torch

from localllm.kernels.fused.qkv_rope import Heads, compose
from localllm.kernels.fused.quant_act import ACT_LAYOUT, QAct
from localllm.kernels.fused.quant_act_triton import fill_lazily
from localllm.kernels.fused.rope_kv_triton import rope_store_kv as rope_store_kv_triton
from localllm.kernels.linear.dp4a_triton import dp4a_rope_launch
from localllm.kernels.linear.qlinear import QuantWeight
from localllm.kernels.linear.qlinear_triton import qlinear_triton
from localllm.kernels.plan import qkv_fusable


def qkv_rope_store(x: torch.Tensor | QAct, ws: list[QuantWeight], bias: torch.Tensor | None,
                   heads: Heads, positions: torch.Tensor, cos_sin: torch.Tensor,
                   k_cache: torch.Tensor, v_cache: torch.Tensor, k_scale: torch.Tensor | None,
                   v_scale: torch.Tensor | None, slot_mapping: torch.Tensor) -> torch.Tensor:  # fmt: skip
    if not isinstance(x, QAct) or not qkv_fusable(x, ws, heads.dim, cos_sin, k_cache, v_cache):
        return compose(qlinear_triton, rope_store_kv_triton, x, ws, bias, heads, positions,
                       cos_sin, k_cache, v_cache, k_scale, v_scale, slot_mapping)  # fmt: skip
    t = x.shape[0]
    total = sum(w.n for w in ws)
    if total != (heads.n_q + 2 * heads.n_kv) * heads.dim:
        raise ValueError(f"qkv_rope_store: weights give {total} rows for {heads}")
    out = torch.empty((t, total), dtype=x.x.dtype, device=x.x.device)  # [T, (Hq + 2 Hkv) D]
    n0, i = 0, 0
    while i < len(ws):  # one launch for each run of (up to) two weights of one int8 layout
        run = ws[i : i + 2]
        if len(run) == 2 and ACT_LAYOUT[run[0].fmt] != ACT_LAYOUT[run[1].fmt]:
            run = run[:1]
        xq, xs = fill_lazily(x, ACT_LAYOUT[run[0].fmt])
        dp4a_rope_launch(xq, xs, [(w.fmt, w.n, w.planes) for w in run],
                         bias, out, n0 // heads.dim, heads.n_q, heads.n_kv, heads.dim, positions,
                         cos_sin, heads.interleaved, k_cache, v_cache, slot_mapping)  # fmt: skip
        n0 += sum(w.n for w in run)
        i += len(run)
    return out
