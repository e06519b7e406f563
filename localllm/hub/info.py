"""`localllm info`: what a model file or folder holds and the memory it needs.

Metadata and tensor types come from the GGUF header or the folder's config.json and
safetensors headers; memory figures from `memory.py` (the engine's own KV arithmetic).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localllm.config import ModelConfig
from localllm.errors import LocalLLMError
from localllm.formats.gguf import GGUFFile
from localllm.formats.gguf_config import model_config_from_gguf
from localllm.hub.memory import GpuRoom, KVNeed, engine_default, kv_needs
from localllm.hub.names import shard_names
from localllm.hub.summary import gguf_context, gguf_quant, hf_arch, hf_context, hf_quant
from localllm.sources.hf import FORMAT as HF_FORMAT
from localllm.sources.hf_config import model_config_from_hf
from localllm.sources.hf_entries import list_tensors
from localllm.sources.hf_files import folder_size, read_json, weight_files

_SHORT = 120  # longer metadata strings are cut (chat templates)


@dataclass(frozen=True)
class TypeStats:
    name: str  # GGML type ("Q4_K") or safetensors dtype ("BF16")
    count: int
    nbytes: int


@dataclass
class ModelReport:
    path: Path
    format: str  # "GGUF v3" | "Hugging Face folder"
    arch: str
    quant: str
    file_bytes: int
    params: int  # elements over all tensors (packed int4 folders: storage elements)
    weight_bytes: int  # tensor data, what the weights take in memory
    trained_context: int | None
    metadata: dict[str, Any]
    tensor_types: list[TypeStats]
    config: ModelConfig | None  # None: localllm cannot run this architecture
    unsupported: str = ""  # why config is None
    context: int = 0  # the context the KV figures are for
    block_size: int = 0  # set from the engine's default or the caller's
    kv: list[KVNeed] = field(default_factory=list)
    gpu: GpuRoom | None = None


def _type_stats(items: list[tuple[str, int]]) -> list[TypeStats]:
    count: dict[str, int] = defaultdict(int)
    size: dict[str, int] = defaultdict(int)
    for name, nbytes in items:
        count[name] += 1
        size[name] += nbytes
    return sorted((TypeStats(n, count[n], size[n]) for n in count), key=lambda t: -t.nbytes)


def _gguf_report(path: Path) -> ModelReport:
    g = GGUFFile(path, check_types=False)
    tensors = list(g.tensors.values())
    try:
        cfg, why = model_config_from_gguf(g), ""
    except LocalLLMError as e:
        cfg, why = None, str(e)
    parts = [path.with_name(n) for n in shard_names(path.name)]
    return ModelReport(
        path=path,
        format=f"GGUF v{g.version}",
        arch=str(g.get("general.architecture", "?")),
        quant=gguf_quant(g),
        file_bytes=sum(p.stat().st_size for p in parts if p.exists()),
        params=sum(math.prod(t.shape) for t in tensors),
        weight_bytes=sum(t.nbytes for t in tensors),
        trained_context=gguf_context(g),
        metadata=dict(g.metadata),
        tensor_types=_type_stats([(t.qname, t.nbytes) for t in tensors]),
        config=cfg,
        unsupported=why,
    )


def _folder_report(path: Path) -> ModelReport:
    cfg = read_json(path / "config.json")
    entries = list_tensors(weight_files(path))
    try:
        mc, why = model_config_from_hf(cfg, str(path)), ""
    except LocalLLMError as e:
        mc, why = None, str(e)
    return ModelReport(
        path=path,
        format=HF_FORMAT,
        arch=hf_arch(cfg),
        quant=hf_quant(cfg),
        file_bytes=folder_size(path),
        params=sum(math.prod(e.shape) for e in entries),
        weight_bytes=sum(e.nbytes for e in entries),
        trained_context=hf_context(cfg),
        metadata=cfg,
        tensor_types=_type_stats([(e.dtype, e.nbytes) for e in entries]),
        config=mc,
        unsupported=why,
    )


def model_report(
    path: Path,
    *,
    context: int | None = None,
    block_size: int | None = None,
    gpu: GpuRoom | None = None,
) -> ModelReport:
    """Everything `info` prints; KV figures for `context` tokens (default: the trained one)."""
    if context is not None and context < 1:
        raise LocalLLMError(f"--ctx must be >= 1, got {context}")
    report = _folder_report(path) if path.is_dir() else _gguf_report(path)
    report.block_size = int(block_size or engine_default("block_size"))
    report.context = context or report.trained_context or 0
    if report.config is not None and report.context:
        report.kv = kv_needs(report.config, report.context, report.block_size)
    report.gpu = gpu
    return report


def metadata_lines(md: dict[str, Any]) -> list[tuple[str, str]]:
    """Metadata as (key, value) lines: arrays by their length, long strings cut."""
    out = []
    for key, value in md.items():
        if isinstance(value, list):
            text = f"[{len(value)} items]" if len(value) > 8 else str(value)
        elif isinstance(value, dict):
            text = f"{{{len(value)} keys}}"
        else:
            text = str(value)
        first = text.splitlines()[0] if text else ""
        if len(first) > _SHORT or first != text:
            text = first[:_SHORT] + f"… ({len(text)} chars)"
        out.append((key, text))
    return out
