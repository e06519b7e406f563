"""Synthetic AWQ checkpoints for benchmarks: real shapes, random 4-bit weights.

A Hugging Face folder as AutoAWQ writes one (config.json with `quantization_config`
awq / gemm / 4 bits / zero points, `<module>.qweight|qzeros|scales` for every decoder linear,
fp16 embeddings, norms and LM head, safetensors shards with an index, a byte-level
tokenizer.json). The quants and zero points are uniform random nibbles and the scales
`scale * U(0.5, 1.5)`, so activations keep a sane size through the layers; what a benchmark
measures (bytes read per token, kernel speed) is the same as for a trained checkpoint.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import AddedToken, Tokenizer, decoders, models
from tokenizers import pre_tokenizers as pre

from localllm.tokenizer.bpe import byte_alphabet

SPECIALS = ("<|begin_of_text|>", "<|end_of_text|>")
LAYERS_PER_SHARD = 4


@dataclass(frozen=True)
class AwqSyntheticSpec:
    name: str
    vocab: int
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn: int
    group: int = 128
    rope_theta: float = 500000.0
    context_length: int = 8192
    rms_eps: float = 1e-5
    scale: float = 0.002  # scales ~ scale * U(0.5, 1.5)
    weight_std: float = 0.02  # fp16 tensors ~ N(0, std); norms ~ 1 + N(0, std)

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads


def config_json(s: AwqSyntheticSpec) -> dict[str, object]:
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": s.dim,
        "intermediate_size": s.ffn, "num_hidden_layers": s.n_layers,
        "num_attention_heads": s.n_heads, "num_key_value_heads": s.n_kv_heads,
        "head_dim": s.head_dim, "max_position_embeddings": s.context_length,
        "rms_norm_eps": s.rms_eps, "rope_theta": s.rope_theta, "vocab_size": s.vocab,
        "tie_word_embeddings": False, "hidden_act": "silu", "torch_dtype": "float16",
        "bos_token_id": 256, "eos_token_id": 257,
        "quantization_config": {"quant_method": "awq", "version": "gemm", "bits": 4,
                                "group_size": s.group, "zero_point": True},
    }  # fmt: skip


def _awq_linear(
    n: int, k: int, s: AwqSyntheticSpec, gen: torch.Generator
) -> dict[str, torch.Tensor]:
    """Random qweight int32 [K, N/8], qzeros int32 [K/g, N/8], scales fp16 [K/g, N]."""
    bits = lambda *shape: torch.randint(
        -(2**31), 2**31, shape, generator=gen, dtype=torch.int64
    ).to(torch.int32)  # noqa: E731
    scales = (torch.rand(k // s.group, n, generator=gen) + 0.5) * s.scale
    return {
        "qweight": bits(k, n // 8),
        "qzeros": bits(k // s.group, n // 8),
        "scales": scales.half(),
    }


def _layer(i: int, s: AwqSyntheticSpec, gen: torch.Generator) -> dict[str, torch.Tensor]:
    p = f"model.layers.{i}."
    q, kv, d, f = s.n_heads * s.head_dim, s.n_kv_heads * s.head_dim, s.dim, s.ffn
    out: dict[str, torch.Tensor] = {}
    for mod, (n, k) in {"self_attn.q_proj": (q, d), "self_attn.k_proj": (kv, d), "self_attn.v_proj": (kv, d),
                        "self_attn.o_proj": (d, q), "mlp.gate_proj": (f, d), "mlp.up_proj": (f, d),
                        "mlp.down_proj": (d, f)}.items():  # fmt: skip
        out.update({f"{p}{mod}.{part}": t for part, t in _awq_linear(n, k, s, gen).items()})
    for norm in ("input_layernorm", "post_attention_layernorm"):
        out[f"{p}{norm}.weight"] = (1 + s.weight_std * torch.randn(d, generator=gen)).half()
    return out


def _dense(shape: tuple[int, ...], s: AwqSyntheticSpec, gen: torch.Generator) -> torch.Tensor:
    return (s.weight_std * torch.randn(*shape, generator=gen)).half()


def _tokenizer() -> Tokenizer:
    """Byte-level BPE over the 256 byte symbols (no merges) and two specials (ids 256, 257)."""
    tok = Tokenizer(models.BPE({c: i for i, c in enumerate(byte_alphabet())}, []))
    tok.pre_tokenizer = pre.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    return tok


def write_awq_synthetic(s: AwqSyntheticSpec, out: Path, seed: int = 0) -> Path:
    """Write the folder (config.json last: a folder with it is complete); returns `out`."""
    gen = torch.Generator().manual_seed(seed)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shards = [
        list(range(i, min(i + LAYERS_PER_SHARD, s.n_layers)))
        for i in range(0, s.n_layers, LAYERS_PER_SHARD)
    ]
    weight_map: dict[str, str] = {}
    for j, layers in enumerate([*shards, []]):  # the last shard: embeddings, final norm, head
        file = f"model-{j + 1:05d}-of-{len(shards) + 1:05d}.safetensors"
        tensors: dict[str, torch.Tensor] = {}
        for i in layers:
            tensors.update(_layer(i, s, gen))
        if not layers:
            tensors["model.embed_tokens.weight"] = _dense((s.vocab, s.dim), s, gen)
            tensors["lm_head.weight"] = _dense((s.vocab, s.dim), s, gen)
            tensors["model.norm.weight"] = (
                1 + s.weight_std * torch.randn(s.dim, generator=gen)
            ).half()
        save_file(tensors, tmp / file, metadata={"format": "pt"})
        weight_map.update({name: file for name in tensors})
    (tmp / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    _tokenizer().save(str(tmp / "tokenizer.json"))
    tok_cfg = {"bos_token": SPECIALS[0], "eos_token": SPECIALS[1], "add_bos_token": True}
    (tmp / "tokenizer_config.json").write_text(json.dumps(tok_cfg))
    (tmp / "config.json").write_text(json.dumps(config_json(s), indent=2))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


AWQ_SPECS: dict[str, AwqSyntheticSpec] = {
    "llama3-8b-awq": AwqSyntheticSpec(
        "llama3-8b-awq", vocab=128256, dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, ffn=14336
    ),
}
