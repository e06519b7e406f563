"""What the safetensors shards of a folder hold (headers only, through the `safetensors`
library) and the one table translating Hugging Face tensor names to the engine's (GGUF)
names and back."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from safetensors import SafetensorError, safe_open

from localllm.errors import ModelLoadError

_ITEMSIZE = {"F16": 2, "BF16": 2, "F32": 4, "F64": 8, "I8": 1, "U8": 1, "I16": 2, "I32": 4,
             "I64": 8, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}  # fmt: skip

_GLOBAL = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
_BLOCK = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
_BLOCK_BACK = {v: k for k, v in _BLOCK.items()}
_GLOBAL_BACK = {v: k for k, v in _GLOBAL.items()}
_HF_LAYER = re.compile(r"model\.layers\.(\d+)\.(.+)")
OUR_LAYER = re.compile(r"blk\.(\d+)\.(.+)")
# buffers some checkpoints save that the forward recomputes
IGNORED = re.compile(r".*\.rotary_emb\.inv_freq")


def our_name(hf_name: str) -> str | None:
    """`model.layers.3.self_attn.q_proj.weight` -> `blk.3.attn_q.weight` (None: unknown)."""
    m = _HF_LAYER.fullmatch(hf_name)
    if m:
        rest = _BLOCK.get(m.group(2))
        return f"blk.{m.group(1)}.{rest}" if rest else None
    return _GLOBAL.get(hf_name)


def hf_name(name: str) -> str:
    """The inverse of `our_name`."""
    m = OUR_LAYER.fullmatch(name)
    if m and m.group(2) in _BLOCK_BACK:
        return f"model.layers.{m.group(1)}.{_BLOCK_BACK[m.group(2)]}"
    return _GLOBAL_BACK.get(name, name)


@dataclass(frozen=True)
class TensorEntry:
    hf_name: str
    file: Path
    dtype: str  # safetensors dtype: "F16", "BF16", "I32" ...
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * _ITEMSIZE.get(self.dtype, 1)


def list_tensors(files: list[Path]) -> list[TensorEntry]:
    """Every tensor of the shards (headers only), in name order; duplicates are refused."""
    out: dict[str, TensorEntry] = {}
    for file in files:
        try:
            with safe_open(file, framework="pt") as f:
                for name in f.keys():
                    sl = f.get_slice(name)
                    if name in out:
                        raise ModelLoadError(
                            str(file), f"tensor {name!r} is also in {out[name].file.name}"
                        )
                    out[name] = TensorEntry(name, file, str(sl.get_dtype()), tuple(sl.get_shape()))  # fmt: skip
        except (OSError, SafetensorError) as e:
            raise ModelLoadError(str(file), f"not a readable safetensors file ({e})") from None
    return [out[k] for k in sorted(out)]
