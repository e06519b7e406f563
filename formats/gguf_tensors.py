"""The tensors a model needs, from its ModelConfig, checked against what a GGUF file holds.

Every tensor the file holds must be one the architecture uses, with the shape the config
implies (torch order, rows first); every required one must be there. So a block left over
after `block_count` was lowered, a norm of the wrong length (which torch would broadcast), or
a tensor the loader does not know (and would silently skip) is refused with its name.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from gguf import GGMLQuantizationType

from localllm.config import ModelConfig
from localllm.errors import ModelLoadError
from localllm.formats.gguf import GGUFFile

Shape = tuple[int, ...]
# 1-D tensors (norms, biases, rope factors) are added to or multiplied with activations
_VECTOR_TYPES = frozenset(
    {GGMLQuantizationType.F32, GGMLQuantizationType.F16, GGMLQuantizationType.BF16}
)
_BLOCK = re.compile(r"blk\.(\d+)\.")


def _block_shapes(cfg: ModelConfig) -> dict[str, Shape]:
    """Per-block tensors (without the `blk.N.` prefix) of the llama family."""
    D, F, q, kv = cfg.dim, cfg.ffn_dim, cfg.q_size, cfg.kv_size
    shapes: dict[str, Shape] = {
        "attn_norm.weight": (D,),
        "attn_q.weight": (q, D),
        "attn_k.weight": (kv, D),
        "attn_v.weight": (kv, D),
        "attn_output.weight": (D, q),
        "ffn_norm.weight": (D,),
        "ffn_gate.weight": (F, D),
        "ffn_up.weight": (F, D),
        "ffn_down.weight": (D, F),
    }
    if cfg.qkv_bias:
        shapes.update({"attn_q.bias": (q,), "attn_k.bias": (kv,), "attn_v.bias": (kv,)})
    if cfg.qk_norm:
        shapes.update(
            {"attn_q_norm.weight": (cfg.head_dim,), "attn_k_norm.weight": (cfg.head_dim,)}
        )
    return shapes


def _llama_family(cfg: ModelConfig) -> tuple[dict[str, Shape], dict[str, Shape]]:
    """(required, optional) tensor shapes by name."""
    required: dict[str, Shape] = {
        "token_embd.weight": (cfg.vocab_size, cfg.dim),
        "output_norm.weight": (cfg.dim,),
    }
    block = _block_shapes(cfg)
    for i in range(cfg.n_layers):
        required.update({f"blk.{i}.{k}": v for k, v in block.items()})
    optional: dict[str, Shape] = {"rope_freqs.weight": (cfg.head_dim // 2,)}
    if not cfg.tie_embeddings:
        required["output.weight"] = (cfg.vocab_size, cfg.dim)
    return required, optional


# architecture -> (required, optional) tensors, for each arch of localllm.model.registry.ARCHS
TENSOR_LAYOUTS: dict[str, Callable[[ModelConfig], tuple[dict[str, Shape], dict[str, Shape]]]] = {
    "llama": _llama_family,
    "qwen2": _llama_family,
    "qwen3": _llama_family,
}


def check_tensors(g: GGUFFile, cfg: ModelConfig) -> None:
    """Refuse a file whose tensors are not exactly the ones `cfg` needs, in those shapes."""
    layout = TENSOR_LAYOUTS.get(cfg.arch)
    if layout is None:
        raise ModelLoadError(g.path, f"no tensor layout is known for architecture {cfg.arch!r}")
    required, optional = layout(cfg)
    for name, t in g.tensors.items():
        want = required.get(name, optional.get(name))
        if want is None:
            raise ModelLoadError(g.path, _unexpected(name, cfg))
        if t.shape != want:
            raise ModelLoadError(g.path, f"tensor {name!r} has shape {t.shape}, expected {want}")
        if len(want) == 1 and t.qtype not in _VECTOR_TYPES:
            raise ModelLoadError(
                g.path, f"tensor {name!r} is {t.qname}; 1-D tensors must be F32, F16 or BF16"
            )
    missing = [name for name in required if name not in g.tensors]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ModelLoadError(g.path, f"missing tensor {missing[0]!r}{more}")


def _unexpected(name: str, cfg: ModelConfig) -> str:
    m = _BLOCK.match(name)
    if m and int(m.group(1)) >= cfg.n_layers:
        return f"tensor {name!r} belongs to no block: {cfg.arch}.block_count is {cfg.n_layers}"
    return f"unexpected tensor {name!r} for a {cfg.arch} model"
