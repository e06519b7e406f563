"""The tensors of a Hugging Face folder under the engine's (GGUF) names, memory-mapped.

Shards are opened with the `safetensors` library (`safe_open`, framework "pt"): a tensor is a
view of the mapped file, nothing is read until the loader touches it. Names are translated
by one table (`_GLOBAL`, `_BLOCK`), in both directions, so errors name the tensor as the
folder spells it. The set of tensors is checked against the architecture's layout
(`formats/gguf_tensors.TENSOR_LAYOUTS`, the same table the GGUF reader uses).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import torch
from gguf import GGMLQuantizationType as QT
from safetensors import SafetensorError, safe_open

from localllm.config import ModelConfig
from localllm.errors import ModelLoadError
from localllm.formats.gguf import RawTensor
from localllm.formats.gguf_tensors import TENSOR_LAYOUTS

# safetensors dtype -> (GGML type the loader knows, torch dtype, bytes per element)
FLOAT_DTYPES: dict[str, tuple[QT, torch.dtype]] = {
    "F16": (QT.F16, torch.float16),
    "BF16": (QT.BF16, torch.bfloat16),
    "F32": (QT.F32, torch.float32),
}
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
_OUR_LAYER = re.compile(r"blk\.(\d+)\.(.+)")
# buffers some checkpoints save that the forward recomputes
_IGNORED = re.compile(r".*\.rotary_emb\.inv_freq")


def our_name(hf_name: str) -> str | None:
    """`model.layers.3.self_attn.q_proj.weight` -> `blk.3.attn_q.weight` (None: unknown)."""
    m = _HF_LAYER.fullmatch(hf_name)
    if m:
        rest = _BLOCK.get(m.group(2))
        return f"blk.{m.group(1)}.{rest}" if rest else None
    return _GLOBAL.get(hf_name)


def hf_name(name: str) -> str:
    """The inverse of `our_name`."""
    m = _OUR_LAYER.fullmatch(name)
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


class SafetensorsTensors:
    """A folder's weights by the engine's tensor names: `tensor(name)` is a RawTensor whose
    data is a zero-copy numpy view of the memory-mapped shard."""

    def __init__(self, folder: Path, files: list[Path], cfg: ModelConfig) -> None:
        self.path = str(folder)
        self.entries: dict[str, TensorEntry] = {}
        for e in list_tensors(files):
            name = our_name(e.hf_name)
            if name == "output.weight" and cfg.tie_embeddings:
                continue  # a saved copy of the tied embedding: HF ignores it too
            if name is None:
                if _IGNORED.fullmatch(e.hf_name):
                    continue
                raise ModelLoadError(
                    self.path, f"unexpected tensor {e.hf_name!r} for a {cfg.arch} model"
                )
            self.entries[name] = e
        self._check(cfg)
        self._handles: dict[Path, object] = {}

    def _check(self, cfg: ModelConfig) -> None:
        required, optional = TENSOR_LAYOUTS[cfg.arch](cfg)
        for name, e in self.entries.items():
            want = required.get(name, optional.get(name))
            if want is None:
                m = _OUR_LAYER.fullmatch(name)
                where = f": num_hidden_layers is {cfg.n_layers}" if m else ""
                raise ModelLoadError(self.path, f"unexpected tensor {e.hf_name!r}{where}")
            if e.shape != want:
                raise ModelLoadError(
                    self.path,
                    f"tensor {e.hf_name!r} has shape {list(e.shape)}, expected {list(want)}",
                )
            if e.dtype not in FLOAT_DTYPES:
                raise ModelLoadError(
                    self.path, f"tensor {e.hf_name!r} is {e.dtype}; expected F16, BF16 or F32"
                )
        missing = [hf_name(n) for n in required if n not in self.entries]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise ModelLoadError(self.path, f"missing tensor {missing[0]!r}{more}")

    def __contains__(self, name: str) -> bool:
        return name in self.entries

    @property
    def nbytes(self) -> int:
        return sum(e.nbytes for e in self.entries.values())

    def tensor(self, name: str) -> RawTensor:
        e = self.entries.get(name)
        if e is None:
            raise ModelLoadError(self.path, f"missing tensor {hf_name(name)!r}")
        handle = self._handles.get(e.file)
        if handle is None:
            handle = self._handles[e.file] = safe_open(e.file, framework="pt")
        t = handle.get_tensor(e.hf_name)  # type: ignore[attr-defined]  # a view of the map
        qtype = FLOAT_DTYPES[e.dtype][0]
        # GGUF's convention (RawTensor): F16/F32 as their numpy dtype, BF16 as raw bytes
        data = t.view(torch.uint8).numpy() if qtype == QT.BF16 else t.numpy()
        return RawTensor(name, qtype, e.shape, data)
