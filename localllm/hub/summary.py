"""One line about a model for `localllm list`: architecture, quantization, size, context.

Read from the GGUF header (metadata only; the tensors stay memory-mapped and untouched) or
from a Hugging Face folder's `config.json`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gguf import LlamaFileType

from localllm.errors import LocalLLMError
from localllm.formats.gguf import GGUFFile
from localllm.sources.hf_files import read_json


@dataclass(frozen=True)
class ModelSummary:
    arch: str  # GGUF general.architecture, or the HF `architectures[0]`
    quant: str  # "Q4_K_M", "AWQ-4bit", "BF16" ...
    context: int | None  # trained context length in tokens
    error: str = ""  # why the rest is unknown ("" when read)


def gguf_quant(g: GGUFFile) -> str:
    """general.file_type as llama.cpp names it, else the type holding most weight bytes."""
    ft = g.get("general.file_type")
    if isinstance(ft, int):
        try:
            return LlamaFileType(ft).name.removeprefix("MOSTLY_").removeprefix("ALL_")
        except ValueError:
            pass
    by_bytes: Counter[str] = Counter()
    for t in g.tensors.values():
        if len(t.shape) >= 2:
            by_bytes[t.qname] += t.nbytes
    return by_bytes.most_common(1)[0][0] if by_bytes else "?"


def gguf_context(g: GGUFFile) -> int | None:
    arch = g.get("general.architecture")
    v = g.get(f"{arch}.context_length")
    return int(v) if isinstance(v, int) else None


def hf_quant(cfg: dict[str, Any]) -> str:
    """ "AWQ-4bit" from a config.json's quantization_config, else the stored dtype ("BF16")."""
    q = cfg.get("quantization_config")
    if isinstance(q, dict) and q.get("quant_method"):
        bits = q.get("bits") or q.get("w_bit")
        return f"{str(q['quant_method']).upper()}{f'-{bits}bit' if bits else ''}"
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "?")
    return {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}.get(dtype, dtype.upper())


def hf_arch(cfg: dict[str, Any]) -> str:
    archs = cfg.get("architectures")
    if isinstance(archs, list) and archs:
        return str(archs[0])
    return str(cfg.get("model_type", "?"))


def hf_context(cfg: dict[str, Any]) -> int | None:
    v = cfg.get("max_position_embeddings")
    return int(v) if isinstance(v, int) else None


def summarize(path: Path) -> ModelSummary:
    """The summary of a .gguf file or an HF folder; unreadable ones say why in `error`."""
    try:
        if path.is_dir():
            cfg = read_json(path / "config.json")
            return ModelSummary(hf_arch(cfg), hf_quant(cfg), hf_context(cfg))
        g = GGUFFile(path, check_types=False)
        return ModelSummary(str(g.get("general.architecture", "?")), gguf_quant(g), gguf_context(g))
    except LocalLLMError as e:
        return ModelSummary("?", "?", None, error=str(e))
