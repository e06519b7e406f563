"""ModelConfig from GGUF metadata, through a registry of supported architectures.

The hyperparameters are checked against their spec types and ranges first
(`gguf_validate.check_arch_metadata`), the file's tensors against the config after
(`gguf_tensors.check_tensors`): a config returned here describes the file exactly.
"""

from __future__ import annotations

from localllm.config import ModelConfig, RopeScaling
from localllm.errors import ModelLoadError
from localllm.formats.gguf import GGUFFile
from localllm.formats.gguf_tensors import check_tensors
from localllm.formats.gguf_validate import check_arch_metadata
from localllm.model.registry import ARCHS


def _rope_scaling(g: GGUFFile, arch: str) -> RopeScaling | None:
    kind = g.get(f"{arch}.rope.scaling.type")
    factor = g.get(f"{arch}.rope.scaling.factor")
    if kind in (None, "none") or not factor or float(factor) == 1.0:
        return None
    orig = int(g.get(f"{arch}.rope.scaling.original_context_length", 8192))
    if kind == "linear":
        return RopeScaling("linear", float(factor), original_context=orig)
    if kind == "llama3":
        return RopeScaling(
            "llama3",
            float(factor),
            low_freq_factor=float(g.get(f"{arch}.rope.scaling.low_freq_factor", 1.0)),
            high_freq_factor=float(g.get(f"{arch}.rope.scaling.high_freq_factor", 4.0)),
            original_context=orig,
        )
    raise ModelLoadError(g.path, f"unsupported rope scaling type {kind!r}")


def _int(g: GGUFFile, key: str, default: int | None = None) -> int:
    v = g.get(key, default)
    if v is None:
        raise ModelLoadError(g.path, f"missing metadata key {key!r}")
    if isinstance(v, list):  # per-layer arrays (e.g. head_count_kv): we need them uniform
        if len(set(v)) != 1:
            raise ModelLoadError(g.path, f"{key} varies per layer, which is not supported")
        v = v[0]
    return int(v)


def model_config_from_gguf(g: GGUFFile) -> ModelConfig:
    arch = g.arch
    spec = ARCHS.get(arch)
    if spec is None:
        raise ModelLoadError(
            g.path, f"unsupported architecture {arch!r} (supported: {', '.join(sorted(ARCHS))})"
        )
    check_arch_metadata(g.path, arch, g.metadata, g.metadata_types)
    dim = _int(g, f"{arch}.embedding_length")
    n_heads = _int(g, f"{arch}.attention.head_count")
    n_kv = _int(g, f"{arch}.attention.head_count_kv", n_heads)
    head_dim = _int(g, f"{arch}.attention.key_length", dim // n_heads)
    embd = g.tensor("token_embd.weight")
    vocab = int(g.get(f"{arch}.vocab_size", embd.shape[0]))
    rope_dim = g.get(f"{arch}.rope.dimension_count", head_dim)
    if int(rope_dim) != head_dim:
        raise ModelLoadError(
            g.path, f"partial rotary embeddings ({rope_dim} of {head_dim}) are not supported"
        )
    try:
        cfg = ModelConfig(
            arch=arch,
            vocab_size=vocab,
            dim=dim,
            n_layers=_int(g, f"{arch}.block_count"),
            n_heads=n_heads,
            n_kv_heads=n_kv,
            head_dim=head_dim,
            ffn_dim=_int(g, f"{arch}.feed_forward_length"),
            context_length=_int(g, f"{arch}.context_length", 2048),
            rope_theta=float(g.get(f"{arch}.rope.freq_base", 10000.0)),
            rope_scaling=_rope_scaling(g, arch),
            rope_style=spec.rope_style,
            rms_eps=float(g.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)),
            tie_embeddings="output.weight" not in g.tensors,
            qkv_bias=spec.qkv_bias and "blk.0.attn_q.bias" in g.tensors,
            qk_norm=spec.qk_norm,
            name=str(g.get("general.name", "") or ""),
        )
    except ValueError as e:
        raise ModelLoadError(g.path, f"inconsistent model metadata ({e})") from None
    tokens = g.get("tokenizer.ggml.tokens")
    if tokens is not None and len(tokens) != cfg.vocab_size:
        raise ModelLoadError(
            g.path,
            f"the tokenizer has {len(tokens)} tokens but the model's vocabulary is "
            f"{cfg.vocab_size}",
        )
    check_tensors(g, cfg)
    return cfg
