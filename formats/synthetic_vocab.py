"""The tokenizer part of a synthetic GGUF model: a vocabulary read from a vocab-only GGUF file
(the benchmark models use the Llama SentencePiece vocab of the test data) or the minimal
byte-fallback vocabulary of tiny test models, padded to the model's size."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from gguf import TokenType

from localllm.formats.gguf import GGUFFile


@dataclass(frozen=True)
class Vocab:
    tokens: list[str]
    scores: list[float]
    types: list[int]
    special: dict[str, Any]  # tokenizer.ggml.* scalars: bos/eos/unk ids, add_bos_token, pre ...
    model: str = "llama"  # tokenizer.ggml.model: "llama" (SentencePiece) or "gpt2" (BPE)
    merges: list[str] = field(default_factory=list)  # BPE merges ("a b"), empty for SentencePiece

    def padded(self, n: int) -> Vocab:
        """Pad with unused tokens the way llama.cpp's converter does ([PADi], -10000, UNUSED)."""
        if n < len(self.tokens):
            raise ValueError(f"vocab size {n} is smaller than the tokenizer's {len(self.tokens)}")
        extra = range(len(self.tokens), n)
        return Vocab(
            self.tokens + [f"[PAD{i}]" for i in extra],
            self.scores + [-10000.0] * len(extra),
            self.types + [int(TokenType.UNUSED)] * len(extra),
            self.special,
            self.model,
            self.merges,
        )


def byte_vocab() -> Vocab:
    """A minimal SentencePiece vocab: <unk>, <s>, </s> and the 256 byte-fallback pieces."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [int(TokenType.UNKNOWN), int(TokenType.CONTROL), int(TokenType.CONTROL)]
    special = {
        "bos_token_id": 1,
        "eos_token_id": 2,
        "unknown_token_id": 0,
        "add_bos_token": True,
        "add_eos_token": False,
    }
    return Vocab(tokens, [0.0] * len(tokens), types + [int(TokenType.BYTE)] * 256, special)


def load_vocab(path: str | os.PathLike[str]) -> Vocab:
    """The tokenizer of a (vocab-only) GGUF file."""
    g = GGUFFile(path, check_types=False)
    tokens = list(g.require("tokenizer.ggml.tokens"))
    scores = list(g.get("tokenizer.ggml.scores", [0.0] * len(tokens)))
    types = list(g.get("tokenizer.ggml.token_type", [int(TokenType.NORMAL)] * len(tokens)))
    prefix = "tokenizer.ggml."
    skip = {"tokens", "scores", "token_type", "model", "merges"}
    special = {
        k[len(prefix) :]: v
        for k, v in g.metadata.items()
        if k.startswith(prefix) and k[len(prefix) :] not in skip and not isinstance(v, list)
    }
    model = str(g.get("tokenizer.ggml.model", "llama"))
    return Vocab(tokens, scores, types, special, model, list(g.get("tokenizer.ggml.merges", [])))
