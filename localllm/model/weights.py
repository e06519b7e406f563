"""Model weights on the device, in the layout the kernels read (packed once at load)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from gguf import GGMLQuantizationType

from localllm.config import ModelConfig
from localllm.errors import ModelLoadError
from localllm.formats.gguf import RawTensor
from localllm.formats.quants import check_supported, dequantize, dequantize_tensor
from localllm.kernels.linear.qlinear import (
    QuantWeight,
    concat_weights,
    dequantize_weight,
    pack_weight,
)

if TYPE_CHECKING:
    from localllm.sources.base import Tensors

_FLOAT_QTYPES = {GGMLQuantizationType.F32, GGMLQuantizationType.F16, GGMLQuantizationType.BF16}


class Embedding:
    """Token embedding table kept in its file format; only looked-up rows are dequantized."""

    def __init__(self, raw: RawTensor, device: torch.device, dtype: torch.dtype) -> None:
        self.qtype = raw.qtype
        self.dtype = dtype
        if raw.qtype in _FLOAT_QTYPES:
            self.table = dequantize_tensor(raw, device).to(dtype)  # [V, D]
            self.quantized = False
        else:
            self.table = torch.from_numpy(np.array(raw.data, copy=True)).to(
                device
            )  # [V, row_bytes]
            self.quantized = True

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:  # ids [T] -> [T, D]
        rows = self.table.index_select(0, ids)
        if not self.quantized:
            return rows
        return dequantize(rows, self.qtype).to(self.dtype)


@dataclass
class LayerWeights:
    attn_norm: torch.Tensor  # [D]
    wqkv: list[QuantWeight]  # one fused [q+2kv, D] weight, or runs of one format: [wq+wk, wv]
    bqkv: torch.Tensor | None  # [q+2kv] (qwen2)
    q_norm: torch.Tensor | None  # [head_dim] (qwen3)
    k_norm: torch.Tensor | None
    wo: QuantWeight  # [D, q]
    ffn_norm: torch.Tensor  # [D]
    w_gate_up: list[QuantWeight]  # one fused [2F, D] weight, or [gate, up]
    w_down: QuantWeight  # [D, F]


@dataclass
class ModelWeights:
    embed: Embedding
    layers: list[LayerWeights]
    norm: torch.Tensor  # [D]
    lm_head: QuantWeight  # [V, D]
    rope_freqs: torch.Tensor | None  # [head_dim / 2] per-dim divisors (GGUF rope_freqs.weight)

    @property
    def nbytes(self) -> int:
        return weight_bytes(self)


def _raw(g: Tensors, name: str) -> RawTensor:
    """A tensor stored as such (norms, biases, embeddings: never AWQ-quantized)."""
    t = g.tensor(name)
    if not isinstance(t, RawTensor):
        raise ModelLoadError(
            g.path, f"tensor {name!r} is quantized, which only linear weights may be"
        )
    return t


def _norm(g: Tensors, name: str, device: torch.device) -> torch.Tensor:
    return dequantize_tensor(_raw(g, name), device).float()  # norms stay fp32


def _linear(
    g: Tensors, name: str, cfg_shape: tuple[int, int], device: torch.device, dtype: torch.dtype
) -> QuantWeight:
    raw = g.tensor(name)
    if tuple(raw.shape) != cfg_shape:
        raise ModelLoadError(g.path, f"tensor {name!r} has shape {raw.shape}, expected {cfg_shape}")
    if isinstance(raw, RawTensor):
        check_supported(raw.qtype, g.path, name)
    return pack_weight(raw, device, dtype)


def _fuse(ws: list[QuantWeight]) -> list[QuantWeight]:
    """Stack runs of neighbouring weights that share a format (Q4_K_M: [q+k (Q4_K), v (Q6_K)])."""
    out: list[QuantWeight] = []
    for w in ws:
        fused = concat_weights([out[-1], w]) if out else None
        if fused is not None:
            out[-1] = fused
        else:
            out.append(w)
    return out


def _layer(
    g: Tensors, cfg: ModelConfig, i: int, device: torch.device, dtype: torch.dtype
) -> LayerWeights:
    p = f"blk.{i}."
    D, F = cfg.dim, cfg.ffn_dim
    qkv = [
        _linear(g, p + "attn_q.weight", (cfg.q_size, D), device, dtype),
        _linear(g, p + "attn_k.weight", (cfg.kv_size, D), device, dtype),
        _linear(g, p + "attn_v.weight", (cfg.kv_size, D), device, dtype),
    ]
    bias = None
    if cfg.qkv_bias:
        parts = [dequantize_tensor(_raw(g, p + f"attn_{x}.bias"), device) for x in "qkv"]
        bias = torch.cat(parts).to(dtype)
    gate_up = [
        _linear(g, p + "ffn_gate.weight", (F, D), device, dtype),
        _linear(g, p + "ffn_up.weight", (F, D), device, dtype),
    ]
    return LayerWeights(
        attn_norm=_norm(g, p + "attn_norm.weight", device),
        wqkv=_fuse(qkv),
        bqkv=bias,
        q_norm=_norm(g, p + "attn_q_norm.weight", device) if cfg.qk_norm else None,
        k_norm=_norm(g, p + "attn_k_norm.weight", device) if cfg.qk_norm else None,
        wo=_linear(g, p + "attn_output.weight", (D, cfg.q_size), device, dtype),
        ffn_norm=_norm(g, p + "ffn_norm.weight", device),
        w_gate_up=_fuse(gate_up),
        w_down=_linear(g, p + "ffn_down.weight", (D, F), device, dtype),
    )


def load_weights(
    g: Tensors, cfg: ModelConfig, device: torch.device, dtype: torch.dtype
) -> ModelWeights:
    """Read every tensor of a model into device memory, packed for the kernels."""
    embd = _raw(g, "token_embd.weight")
    check_supported(embd.qtype, g.path, embd.name)
    if embd.shape != (cfg.vocab_size, cfg.dim):
        raise ModelLoadError(
            g.path,
            f"token_embd.weight has shape {embd.shape}, expected {(cfg.vocab_size, cfg.dim)}",
        )
    head_name = "token_embd.weight" if cfg.tie_embeddings else "output.weight"
    rope_freqs = None
    if "rope_freqs.weight" in g:
        rope_freqs = dequantize_tensor(_raw(g, "rope_freqs.weight"), "cpu").float()
    return ModelWeights(
        embed=Embedding(embd, device, dtype),
        layers=[_layer(g, cfg, i, device, dtype) for i in range(cfg.n_layers)],
        norm=_norm(g, "output_norm.weight", device),
        lm_head=_linear(g, head_name, (cfg.vocab_size, cfg.dim), device, dtype),
        rope_freqs=rope_freqs,
    )


def linear_weights(w: ModelWeights) -> list[QuantWeight]:
    out = [w.lm_head]
    for layer in w.layers:
        out += [*layer.wqkv, layer.wo, *layer.w_gate_up, layer.w_down]
    return out


def cache_dense(w: ModelWeights, dtype: torch.dtype, budget_bytes: int) -> bool:
    """Dequantize every linear weight once (the CPU reference path) if it fits in budget_bytes;
    otherwise the reference dequantizes per call. Returns whether it cached."""
    ws = linear_weights(w)
    need = sum(x.n * x.k for x in ws) * torch.empty((), dtype=dtype).element_size()
    if need > budget_bytes:
        return False
    for x in ws:
        x.dense = dequantize_weight(x, dtype)
    return True


def weight_bytes(w: ModelWeights) -> int:
    """Bytes a decode step reads from the weights (everything but the embedding table)."""
    return sum(x.nbytes for x in linear_weights(w)) + w.norm.numel() * 4
