"""What Ollama's `/api/tags`, `/api/show` and `/api/ps` say about the one loaded model.

Read once from the GGUF header (memory-mapped, no weights read): parameter count (sum of
tensor sizes), quantization (llama.cpp's general.file_type, else the commonest tensor type),
architecture and context length. The `digest` is an id for the file (sha256 of its path,
size and mtime), not a content hash: hashing gigabytes at startup buys a client nothing.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gguf import LlamaFileType

from localllm.formats.gguf import GGUFFile

OLLAMA_API_VERSION = "0.9.0"  # the Ollama API whose shapes these routes follow


@dataclass(frozen=True)
class ModelFacts:
    size: int  # bytes on disk
    modified_at: str
    digest: str
    arch: str
    n_params: int
    quantization: str
    metadata: dict[str, Any]  # scalar GGUF keys (model_info), or config.json's
    format: str = "gguf"  # "gguf" | "safetensors" (a Hugging Face folder)


def _quantization(f: GGUFFile) -> str:
    ft = f.get("general.file_type")
    if isinstance(ft, int) and ft in LlamaFileType._value2member_map_:
        return LlamaFileType(ft).name.removeprefix("MOSTLY_")
    common = Counter(t.qname for t in f.tensors.values() if len(t.shape) > 1).most_common(1)
    return common[0][0] if common else "unknown"


def _folder_facts(path: str) -> ModelFacts:
    """A Hugging Face folder: the figures `localllm info` reads (config.json, safetensors)."""
    from pathlib import Path

    from localllm.hub.info import model_report

    r = model_report(Path(path))
    st = os.stat(os.path.join(path, "config.json"))
    ident = f"{os.path.abspath(path)}:{r.file_bytes}:{st.st_mtime_ns}".encode()
    return ModelFacts(
        size=r.file_bytes,
        modified_at=datetime.fromtimestamp(st.st_mtime, UTC).isoformat().replace("+00:00", "Z"),
        digest=hashlib.sha256(ident).hexdigest(),
        arch=r.arch,
        n_params=r.params,
        quantization=r.quant,
        metadata={k: v for k, v in r.metadata.items() if isinstance(v, int | float | str | bool)},
        format="safetensors",
    )


@functools.lru_cache(maxsize=4)
def model_facts(path: str) -> ModelFacts:
    if os.path.isdir(path):
        return _folder_facts(path)
    f = GGUFFile(path)
    st = os.stat(path)
    ident = f"{os.path.abspath(path)}:{st.st_size}:{st.st_mtime_ns}".encode()
    scalars = {
        k: v
        for k, v in f.metadata.items()
        if isinstance(v, int | float | str | bool) and not k.startswith("tokenizer.")
    }
    return ModelFacts(
        size=st.st_size,
        modified_at=datetime.fromtimestamp(st.st_mtime, UTC).isoformat().replace("+00:00", "Z"),
        digest=hashlib.sha256(ident).hexdigest(),
        arch=f.arch,
        n_params=sum(math.prod(t.shape) for t in f.tensors.values()),
        quantization=_quantization(f),
        metadata=scalars,
    )


def parameter_size(n: int) -> str:
    """Ollama's style: 135M, 7.2B."""
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}".replace(".0", "")
    return str(n)


def details(facts: ModelFacts) -> dict[str, Any]:
    return {
        "parent_model": "",
        "format": facts.format,
        "family": facts.arch,
        "families": [facts.arch],
        "parameter_size": parameter_size(facts.n_params),
        "quantization_level": facts.quantization,
    }


def tag_name(name: str) -> str:
    return name if ":" in name else f"{name}:latest"


def list_entry(name: str, facts: ModelFacts) -> dict[str, Any]:
    return {
        "name": tag_name(name),
        "model": tag_name(name),
        "modified_at": facts.modified_at,
        "size": facts.size,
        "digest": facts.digest,
        "details": details(facts),
    }
