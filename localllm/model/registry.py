"""The one architecture registry: every supported architecture, how its files are read (GGUF:
formats/gguf_config.py; Hugging Face folders: sources/hf_config.py) and which forward
implementation runs it (the runner)."""

from __future__ import annotations

from dataclasses import dataclass

from localllm.model.llama import LlamaModel


@dataclass(frozen=True)
class ArchSpec:
    rope_style: str  # how Q/K pairs are rotated for this GGUF arch (llama.cpp's rope type)
    model_class: type[LlamaModel]  # the forward code
    qkv_bias: bool = False
    qk_norm: bool = False
    hf_architectures: tuple[str, ...] = ()  # config.json `architectures` read as this arch


# llama.cpp: LLM_ARCH_LLAMA uses LLAMA_ROPE_TYPE_NORM (adjacent pairs; the converter permutes
# HF Q/K rows for it); qwen2/qwen3 use LLAMA_ROPE_TYPE_NEOX (half split, no permutation).
# Hugging Face checkpoints of every arch here rotate half-split pairs ("neox").
ARCHS: dict[str, ArchSpec] = {
    "llama": ArchSpec(
        rope_style="interleaved",
        model_class=LlamaModel,
        hf_architectures=("LlamaForCausalLM", "MistralForCausalLM"),
    ),
    "qwen2": ArchSpec(
        rope_style="neox",
        model_class=LlamaModel,
        qkv_bias=True,
        hf_architectures=("Qwen2ForCausalLM",),
    ),
    "qwen3": ArchSpec(
        rope_style="neox",
        model_class=LlamaModel,
        qk_norm=True,
        hf_architectures=("Qwen3ForCausalLM",),
    ),
}

HF_ROPE_STYLE = "neox"


def arch_of_hf(architecture: str) -> str | None:
    """The registry key of a config.json `architectures` entry, if it is supported."""
    return next((k for k, s in ARCHS.items() if architecture in s.hf_architectures), None)


def hf_architectures() -> list[str]:
    return sorted(a for s in ARCHS.values() for a in s.hf_architectures)
