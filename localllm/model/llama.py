"""Forward pass of the Llama family (llama, qwen2 with q/k/v bias, qwen3 with q/k RMSNorm).

Plain functions over ModelWeights; every op goes through the kernel registry (`ops`), so the
same code is the CPU reference path and the Triton GPU path.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from localllm.config import ModelConfig
from localllm.kernels.fused.qkv_rope import Heads
from localllm.kernels.fused.quant_act import QAct, int8_layout, plain
from localllm.kernels.linear.qlinear import linear_stacked
from localllm.kernels.registry import Ops
from localllm.model.batch import ForwardBatch, KVCache
from localllm.model.weights import LayerWeights, ModelWeights


@dataclass(frozen=True)
class _ActLayouts:
    """Per layer, the int8 activation layout of each GEMV input (None: float activations):
    attention input (QKV), attention output (O), FFN input (gate/up), SiLU output (down)."""

    qkv: str | None = None
    o: str | None = None
    gate_up: str | None = None
    down: str | None = None

    @classmethod
    def of(cls, layer: LayerWeights) -> _ActLayouts:
        return cls(int8_layout([w.fmt for w in layer.wqkv]), int8_layout([layer.wo.fmt]),
                   int8_layout([w.fmt for w in layer.w_gate_up]), int8_layout([layer.w_down.fmt]))  # fmt: skip


class LlamaModel:
    def __init__(self, cfg: ModelConfig, weights: ModelWeights, ops: Ops, cos_sin: torch.Tensor,
                 int8_act: bool = False) -> None:  # fmt: skip
        """int8_act: one-row GEMVs read int8 activations (quantized per 32 elements by the
        norm / SiLU kernel that produces them, `kernels/quant_act.py`), as llama.cpp's do."""
        self.cfg = cfg
        self.w = weights
        self.ops = ops
        self.cos_sin = cos_sin  # [max_pos, head_dim]
        self.scale = cfg.head_dim**-0.5
        self.heads = Heads(
            cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.rope_style == "interleaved"
        )
        self.int8_act = int8_act
        self.act = [
            _ActLayouts.of(layer) if int8_act else _ActLayouts() for layer in weights.layers
        ]
        self.lm_head_int8 = int8_act and int8_layout([weights.lm_head.fmt]) is not None

    def _attention(
        self, i: int, layer: LayerWeights, x: torch.Tensor | QAct, fb: ForwardBatch, kv: KVCache
    ) -> torch.Tensor:
        cfg, ops = self.cfg, self.ops
        T = x.shape[0]
        q_norm, k_norm = layer.q_norm, layer.k_norm  # [head_dim] each (qwen3) or None
        if q_norm is None or k_norm is None:  # one op: projection, RoPE and KV store (fused)
            qkv = ops.qkv_rope_store(x, layer.wqkv, layer.bqkv, self.heads, fb.positions,
                                     self.cos_sin, kv.k[i], kv.v[i], kv.k_scale[i], kv.v_scale[i],
                                     fb.slot_mapping)  # [T, q + 2 kv]  # fmt: skip
            q = qkv[:, : cfg.q_size].view(T, cfg.n_heads, cfg.head_dim)
        else:
            qkv = linear_stacked(ops.qlinear, x, layer.wqkv, layer.bqkv)  # [T, q + 2 kv]
            q = qkv[:, : cfg.q_size].view(T, cfg.n_heads, cfg.head_dim)
            k = qkv[:, cfg.q_size : cfg.q_size + cfg.kv_size].view(T, cfg.n_kv_heads, cfg.head_dim)
            v = qkv[:, cfg.q_size + cfg.kv_size :].view(T, cfg.n_kv_heads, cfg.head_dim)
            q = plain(ops.rms_norm(q.reshape(-1, cfg.head_dim), q_norm, cfg.rms_eps)).view(q.shape)
            k = plain(ops.rms_norm(k.reshape(-1, cfg.head_dim), k_norm, cfg.rms_eps)).view(k.shape)
            ops.rope_store_kv(
                q,
                k,
                v,
                fb.positions,
                self.cos_sin,
                cfg.rope_style == "interleaved",
                kv.k[i],
                kv.v[i],
                kv.k_scale[i],
                kv.v_scale[i],
                fb.slot_mapping,
            )
        o = ops.paged_attention(
            q,
            kv.k[i],
            kv.v[i],
            kv.k_scale[i],
            kv.v_scale[i],
            fb.block_tables,
            fb.cu_seqlens_q,
            fb.seq_lens,
            fb.max_q_len,
            fb.max_seq_len,
            self.scale,
            quant=self.act[i].o,
            long_context=fb.long_context,
        )  # [T, Hq, D], or a QAct [1, Hq D] with its int8 form
        if not isinstance(o, QAct):
            o = o.reshape(T, cfg.q_size)
            o = QAct(o) if self.act[i].o else o  # int8 wanted: quantized by the GEMV
        return ops.qlinear(o, layer.wo)

    def _mlp(self, i: int, layer: LayerWeights, x: torch.Tensor | QAct) -> torch.Tensor:
        F = self.cfg.ffn_dim
        gu = linear_stacked(self.ops.qlinear, x, layer.w_gate_up)  # [T, 2F]
        return self.ops.qlinear(
            self.ops.silu_mul(gu[:, :F], gu[:, F:], quant=self.act[i].down), layer.w_down
        )

    def forward(self, fb: ForwardBatch, kv: KVCache) -> torch.Tensor:
        """Returns the final-normed hidden states of the rows in fb.logits_indices: [S, dim]."""
        ops, eps = self.ops, self.cfg.rms_eps
        h = self.w.embed(fb.input_ids)  # [T, D]
        residual = h
        x = ops.rms_norm(h, self.w.layers[0].attn_norm, eps, quant=self.act[0].qkv)
        for i, layer in enumerate(self.w.layers):
            if i > 0:
                x, residual = ops.add_rms_norm(
                    h, residual, layer.attn_norm, eps, quant=self.act[i].qkv
                )
            h = self._attention(i, layer, x, fb, kv)
            x, residual = ops.add_rms_norm(
                h, residual, layer.ffn_norm, eps, quant=self.act[i].gate_up
            )
            h = self._mlp(i, layer, x)
        if fb.logits_indices.numel() == 0:  # a prefill chunk that samples nothing
            return h[:0]
        if not fb.logits_all_rows:
            h = h.index_select(0, fb.logits_indices)
            residual = residual.index_select(0, fb.logits_indices)
        x, _ = ops.add_rms_norm(h, residual, self.w.norm, eps)
        return plain(x)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[S, dim] -> [S, vocab] float32."""
        x = QAct(hidden) if self.lm_head_int8 else hidden
        return self.ops.qlinear(x, self.w.lm_head, out_dtype=torch.float32)
