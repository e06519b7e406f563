"""A GGUF file as a ModelSource: config, tokenizer and chat template from its metadata."""

from __future__ import annotations

from localllm.chat_template import ChatTemplate
from localllm.formats.awq import AWQTensor
from localllm.formats.gguf import GGUFFile, RawTensor
from localllm.formats.gguf_config import model_config_from_gguf
from localllm.sources.base import ModelSource
from localllm.tokenizer import Tokenizer


class GGUFTensors:
    def __init__(self, g: GGUFFile) -> None:
        self.g = g
        self.path = g.path

    def __contains__(self, name: str) -> bool:
        return name in self.g.tensors

    def tensor(self, name: str) -> RawTensor | AWQTensor:
        return self.g.tensor(name)

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.g.tensors.values())


def open_gguf(path: str) -> ModelSource:
    g = GGUFFile(path)
    config = model_config_from_gguf(g)
    tokenizer = Tokenizer.from_gguf_file(g)
    return ModelSource(
        path=g.path,
        format=f"GGUF v{g.version}",
        config=config,
        tensors=GGUFTensors(g),
        tokenizer=tokenizer,
        chat_template=ChatTemplate.from_metadata(g.metadata, tokenizer),
        model_id=f"{g.path}:{g.file_size}",
    )
