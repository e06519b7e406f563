"""A Hugging Face model folder as found on disk: `config.json` and safetensors headers.

Only what `list` and `info` show is read (no tensor data): the safetensors header is an
8-byte little-endian length followed by JSON `{name: {dtype, shape, data_offsets}}`.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localllm.config import ModelConfig
from localllm.errors import ModelLoadError

_MAX_HEADER = 100 << 20  # the format's own limit on the JSON header


@dataclass(frozen=True)
class SafetensorsEntry:
    name: str
    dtype: str  # "F16", "BF16", "I32" ...
    shape: tuple[int, ...]
    nbytes: int


def is_hf_folder(path: Path) -> bool:
    """A folder with `config.json` and at least one safetensors file."""
    return (path / "config.json").is_file() and any(path.glob("*.safetensors"))


def weight_files(path: Path) -> list[Path]:
    return sorted(path.glob("*.safetensors"))


def folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in weight_files(path))


def read_config(path: Path) -> dict[str, Any]:
    try:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ModelLoadError(str(path / "config.json"), f"cannot read it ({e})") from None
    if not isinstance(cfg, dict):
        raise ModelLoadError(str(path / "config.json"), "not a JSON object")
    return cfg


def read_header(file: Path) -> list[SafetensorsEntry]:
    """The tensor entries of one safetensors file, in file order."""
    try:
        with open(file, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > _MAX_HEADER:
                raise ValueError(f"header of {n} bytes")
            header = json.loads(f.read(n))
    except (OSError, ValueError, struct.error) as e:
        raise ModelLoadError(str(file), f"not a readable safetensors file ({e})") from None
    out = []
    for name, v in header.items():
        if name == "__metadata__":
            continue
        start, end = v["data_offsets"]
        out.append(SafetensorsEntry(name, v["dtype"], tuple(v["shape"]), int(end - start)))
    return sorted(out, key=lambda e: e.name)


def quant_name(cfg: dict[str, Any]) -> str:
    """ "AWQ-4bit" from a quantization_config, else the stored dtype ("BF16")."""
    q = cfg.get("quantization_config")
    if isinstance(q, dict) and q.get("quant_method"):
        bits = q.get("bits") or q.get("w_bit")
        return f"{str(q['quant_method']).upper()}{f'-{bits}bit' if bits else ''}"
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "?")
    return {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}.get(dtype, dtype.upper())


def arch_name(cfg: dict[str, Any]) -> str:
    archs = cfg.get("architectures")
    if isinstance(archs, list) and archs:
        return str(archs[0])
    return str(cfg.get("model_type", "?"))


def context_length(cfg: dict[str, Any]) -> int | None:
    v = cfg.get("max_position_embeddings")
    return int(v) if isinstance(v, int) else None


def model_config(cfg: dict[str, Any]) -> ModelConfig:
    """The shapes of a config.json that size the KV cache (KeyError when one is missing)."""
    text = cfg.get("text_config", cfg)
    heads = int(text["num_attention_heads"])
    dim = int(text["hidden_size"])
    return ModelConfig(
        arch=str(text.get("model_type", "?")),
        vocab_size=int(text.get("vocab_size", 0)),
        dim=dim,
        n_layers=int(text["num_hidden_layers"]),
        n_heads=heads,
        n_kv_heads=int(text.get("num_key_value_heads") or heads),
        head_dim=int(text.get("head_dim") or dim // heads),
        ffn_dim=int(text.get("intermediate_size", 0)),
        context_length=int(text.get("max_position_embeddings", 0)),
    )
