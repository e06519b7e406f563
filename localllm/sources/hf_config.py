"""ModelConfig from a Hugging Face `config.json` (LlamaForCausalLM, MistralForCausalLM,
Qwen2ForCausalLM, Qwen3ForCausalLM), through the architecture registry.

Pure logic over the parsed JSON. Every field that changes the forward pass is either honoured
or refused with its name: a config we cannot run exactly never loads as something else.
"""

from __future__ import annotations

from typing import Any

from localllm.config import ModelConfig, RopeScaling
from localllm.errors import ModelLoadError
from localllm.model.registry import ARCHS, HF_ROPE_STYLE, arch_of_hf, hf_architectures

# HF defaults of the config classes (transformers' LlamaConfig / Qwen2Config / Qwen3Config)
_DEFAULT_EPS = 1e-6
_DEFAULT_THETA = 10000.0
_DEFAULT_CONTEXT = 2048


class _Fields:
    """Typed reads of config.json fields; a wrong type is a ModelLoadError naming the field."""

    def __init__(self, cfg: dict[str, Any], path: str) -> None:
        self.cfg, self.path = cfg, path

    def _bad(self, key: str, want: str) -> ModelLoadError:
        return ModelLoadError(
            self.path, f"config.json: {key} must be {want}, got {self.cfg[key]!r}"
        )

    def int(self, key: str, default: int | None = None) -> int:
        v = self.cfg.get(key, default)
        if v is None:
            raise ModelLoadError(self.path, f"config.json has no {key}")
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise self._bad(key, "a non-negative integer")
        return v

    def float(self, key: str, default: float) -> float:
        v = self.cfg.get(key)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            raise self._bad(key, "a positive number")
        return float(v)

    def flag(self, key: str, default: bool) -> bool:
        v = self.cfg.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise self._bad(key, "true or false")
        return v


def hf_arch(cfg: dict[str, Any], path: str) -> str:
    """The registry key for config.json's `architectures[0]`."""
    archs = cfg.get("architectures")
    name = archs[0] if isinstance(archs, list) and archs else None
    arch = arch_of_hf(name) if isinstance(name, str) else None
    if arch is None:
        supported = ", ".join(hf_architectures())
        raise ModelLoadError(path, f"unsupported architecture {name!r} (supported: {supported})")
    return arch


def _rope_params(cfg: dict[str, Any], path: str) -> dict[str, Any]:
    """transformers 5 writes `rope_parameters` (with rope_theta inside), older versions
    `rope_scaling` (and a top-level rope_theta)."""
    key = "rope_parameters" if "rope_parameters" in cfg else "rope_scaling"
    rs = cfg.get(key)
    if rs is None:
        return {}
    if not isinstance(rs, dict):
        raise ModelLoadError(path, f"config.json: {key} must be an object, got {rs!r}")
    return rs


def _rope_theta(cfg: dict[str, Any], f: _Fields, path: str) -> float:
    theta = _rope_params(cfg, path).get("rope_theta")
    if theta is None:
        return f.float("rope_theta", _DEFAULT_THETA)
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or theta <= 0:
        raise ModelLoadError(
            path, f"config.json: rope_theta must be a positive number, got {theta!r}"
        )
    return float(theta)


def _rope_scaling(cfg: dict[str, Any], path: str) -> RopeScaling | None:
    rs = _rope_params(cfg, path)
    kind = rs.get("rope_type", rs.get("type"))
    if kind in (None, "default"):
        return None
    try:
        factor = float(rs.get("factor", 1.0))
        if kind == "linear":
            return RopeScaling("linear", factor)
        if kind == "llama3":
            return RopeScaling(
                "llama3",
                factor,
                low_freq_factor=float(rs.get("low_freq_factor", 1.0)),
                high_freq_factor=float(rs.get("high_freq_factor", 4.0)),
                original_context=int(rs.get("original_max_position_embeddings", 8192)),
            )
    except (TypeError, ValueError) as e:
        raise ModelLoadError(path, f"config.json: bad rope_scaling ({e})") from None
    raise ModelLoadError(
        path, f"unsupported rope scaling type {kind!r} (supported: linear, llama3)"
    )


def _refuse_unsupported(cfg: dict[str, Any], arch: str, f: _Fields, path: str) -> None:
    """Fields that would change the forward pass in ways this engine does not implement."""
    act = cfg.get("hidden_act", "silu")
    if act != "silu":
        raise ModelLoadError(path, f"unsupported hidden_act {act!r} (only silu)")
    if f.flag("mlp_bias", False):
        raise ModelLoadError(path, "MLP biases (mlp_bias: true) are not supported")
    # qwen2 always has q/k/v biases (and none on o_proj); elsewhere attention_bias also adds
    # an o_proj bias, which the forward does not have
    if arch != "qwen2" and f.flag("attention_bias", False):
        raise ModelLoadError(path, "attention biases (attention_bias: true) are not supported")
    partial = cfg.get("partial_rotary_factor", 1.0)
    if partial not in (None, 1, 1.0):
        raise ModelLoadError(path, f"partial rotary embeddings ({partial}) are not supported")
    if arch in ("qwen2", "qwen3") and f.flag("use_sliding_window", False):
        raise ModelLoadError(path, "sliding-window attention (use_sliding_window) is not supported")


def _context(cfg: dict[str, Any], arch: str, f: _Fields) -> int:
    """max_position_embeddings; a Mistral sliding window caps it (attention over the whole
    context is exact up to the window length)."""
    ctx = f.int("max_position_embeddings", _DEFAULT_CONTEXT)
    window = cfg.get("sliding_window")
    if arch == "llama" and isinstance(window, int) and 0 < window < ctx:
        return window
    return ctx


def model_config_from_hf(cfg: dict[str, Any], path: str) -> ModelConfig:
    """The ModelConfig of a parsed config.json (path: the folder, for error messages)."""
    if isinstance(cfg.get("text_config"), dict):
        raise ModelLoadError(path, "multimodal checkpoints (text_config) are not supported")
    arch = hf_arch(cfg, path)
    spec = ARCHS[arch]
    f = _Fields(cfg, path)
    _refuse_unsupported(cfg, arch, f, path)
    dim, heads = f.int("hidden_size"), f.int("num_attention_heads")
    if heads == 0 or dim == 0:
        raise ModelLoadError(path, "config.json: hidden_size and num_attention_heads must be > 0")
    try:
        return ModelConfig(
            arch=arch,
            vocab_size=f.int("vocab_size"),
            dim=dim,
            n_layers=f.int("num_hidden_layers"),
            n_heads=heads,
            n_kv_heads=f.int("num_key_value_heads", heads) or heads,
            head_dim=f.int("head_dim", dim // heads) or dim // heads,
            ffn_dim=f.int("intermediate_size"),
            context_length=_context(cfg, arch, f),
            rope_theta=_rope_theta(cfg, f, path),
            rope_scaling=_rope_scaling(cfg, path),
            rope_style=HF_ROPE_STYLE,
            rms_eps=f.float("rms_norm_eps", _DEFAULT_EPS),
            tie_embeddings=f.flag("tie_word_embeddings", False),
            qkv_bias=spec.qkv_bias,
            qk_norm=spec.qk_norm,
            name=str(cfg.get("_name_or_path") or ""),
        )
    except (ValueError, ZeroDivisionError) as e:
        raise ModelLoadError(path, f"inconsistent config.json ({e})") from None
