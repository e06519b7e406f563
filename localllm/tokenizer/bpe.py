"""Byte-level BPE (GGUF `gpt2`) tokenizer: regex pre-tokenizer, then ranked merges per word.

Pre-tokenization follows llama.cpp's `unicode_regex_split` with the preset of the file's
`tokenizer.ggml.pre` (the registry is `tokenizer.pre`). Words
are mapped to GPT-2's printable byte alphabet and merged by the HF `tokenizers` BPE model
(same algorithm as llama.cpp: lowest merge rank first, ties leftmost), which runs in Rust.
"""

from __future__ import annotations

from functools import lru_cache

from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models as hf_models

from localllm.errors import LocalLLMError
from localllm.tokenizer.pre import PreTokenizer, pre_tokenizer
from localllm.tokenizer.vocab import TokenType, Vocab

__all__ = ["BpeEngine", "PreTokenizer", "byte_alphabet", "bytelevel_piece_bytes", "pre_tokenizer"]


@lru_cache(maxsize=1)
def byte_alphabet() -> tuple[str, ...]:
    """GPT-2's map from each byte to a printable character (`bytes_to_unicode`)."""
    keep = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return tuple(table[b] for b in range(256))


@lru_cache(maxsize=1)
def _to_alphabet() -> dict[int, str]:
    return dict(enumerate(byte_alphabet()))  # for str.translate on latin-1 decoded bytes


@lru_cache(maxsize=1)
def _from_alphabet() -> dict[str, int]:
    return {c: b for b, c in enumerate(byte_alphabet())}


class BpeEngine:
    """Encodes raw text (no special tokens) and renders pieces for a `gpt2` vocabulary."""

    def __init__(self, vocab: Vocab, merges: list[str], pre: PreTokenizer) -> None:
        self.vocab = vocab
        self.pre = pre
        pairs = []
        for line in merges:
            cut = line.find(" ", 1)
            if cut < 0:
                raise LocalLLMError(f"tokenizer merges: bad entry {line!r}")
            pairs.append((line[:cut], line[cut + 1 :]))
        try:
            model = hf_models.BPE(
                vocab=dict(vocab.token_to_id), merges=pairs, ignore_merges=pre.ignore_merges
            )
        except Exception as e:  # tokenizers raises its own Exception type on bad merges
            raise LocalLLMError(f"tokenizer merges do not fit the vocabulary ({e})") from None
        self._hf = HFTokenizer(model)
        self._hf.encode(["a"], is_pretokenized=True)  # the first call pays a ~0.3 s set-up

    def encode(self, text: str, add_space: bool = False) -> list[int]:
        """Token ids for one raw-text fragment (`add_space` is unused: BPE adds no prefix)."""
        table = _to_alphabet()
        words = [w.encode("utf-8").decode("latin-1").translate(table) for w in self.pre.split(text)]
        if not words:
            return []
        return self._hf.encode(words, is_pretokenized=True, add_special_tokens=False).ids

    def piece_bytes(self, token_id: int) -> bytes:
        return bytelevel_piece_bytes(self.vocab, token_id)


def bytelevel_piece_bytes(vocab: Vocab, token_id: int) -> bytes:
    """The bytes a token renders to (GPT-2's byte alphabet mapped back to bytes)."""
    text = vocab.tokens[token_id]
    kind = vocab.types[token_id]
    if kind in (TokenType.USER_DEFINED, TokenType.CONTROL, TokenType.UNKNOWN):
        return text.encode("utf-8")
    if kind != TokenType.NORMAL:
        return b""
    back = _from_alphabet()
    out = bytearray()
    for c in text:
        b = back.get(c)
        if b is None:
            out += c.encode("utf-8")  # not a byte-alphabet char: keep it as text
        else:
            out.append(b)
    return bytes(out)
