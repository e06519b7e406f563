"""The one architecture registry: every supported GGUF architecture, how its file is read
(formats/gguf_config.py) and which forward implementation runs it (the runner)."""

from __future__ import annotations

from dataclasses import dataclass

from localllm.model.llama import LlamaModel


@dataclass(frozen=True)
class ArchSpec:
    rope_style: str  # how Q/K pairs are rotated for this GGUF arch (llama.cpp's rope type)
    model_class: type[LlamaModel]  # the forward code
    qkv_bias: bool = False
    qk_norm: bool = False


# llama.cpp: LLM_ARCH_LLAMA uses LLAMA_ROPE_TYPE_NORM (adjacent pairs; the converter permutes
# HF Q/K rows for it); qwen2/qwen3 use LLAMA_ROPE_TYPE_NEOX (half split, no permutation).
ARCHS: dict[str, ArchSpec] = {
    "llama": ArchSpec(rope_style="interleaved", model_class=LlamaModel),
    "qwen2": ArchSpec(rope_style="neox", model_class=LlamaModel, qkv_bias=True),
    "qwen3": ArchSpec(rope_style="neox", model_class=LlamaModel, qk_norm=True),
}
