"""Tokenizers from GGUF metadata: SentencePiece-style (spm.py), byte-level BPE (bpe.py), the
vocabulary and its special ids (vocab.py), and the incremental detokenizer."""

from __future__ import annotations

from localllm.tokenizer.tokenizer import IncrementalDetokenizer, Tokenizer

__all__ = ["IncrementalDetokenizer", "Tokenizer"]
