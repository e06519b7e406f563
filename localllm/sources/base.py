"""What the engine gets from a model, whatever the files: `ModelSource`.

The engine, the runner and the weight loader see only this: the ModelConfig, the tensors
under the engine's (GGUF) names, memory-mapped, the tokenizer and the chat template.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from localllm.chat_template import ChatTemplate
from localllm.config import ModelConfig
from localllm.formats.awq import AWQTensor
from localllm.formats.gguf import RawTensor
from localllm.tokenizer import Tokenizer


class Tensors(Protocol):
    """A model's tensors by the engine's names (`blk.0.attn_q.weight`), zero-copy views."""

    path: str  # the file or folder, for error messages

    def __contains__(self, name: str) -> bool: ...

    def tensor(self, name: str) -> RawTensor | AWQTensor: ...  # AWQ: quantized linears only

    @property
    def nbytes(self) -> int: ...  # bytes of every tensor, what loading them takes


@dataclass
class ModelSource:
    path: str  # what the user named: a .gguf file or a folder
    format: str  # "GGUF" | "Hugging Face folder"
    config: ModelConfig
    tensors: Tensors
    tokenizer: Tokenizer
    chat_template: ChatTemplate
    model_id: str  # identity of these weights (the speculative verify price's cache key)
