"""Model forward code per architecture, chosen through a registry."""

from __future__ import annotations

from localllm.model.llama import LlamaModel

# every supported GGUF architecture -> the forward implementation that runs it
MODEL_CLASSES = {
    "llama": LlamaModel,
    "qwen2": LlamaModel,
    "qwen3": LlamaModel,
}
