"""Byte-level BPE (GGUF `gpt2`) tokenizer: regex pre-tokenizer, then ranked merges per word.

Pre-tokenization follows llama.cpp's `unicode_regex_split`: each regex of the preset splits
every piece from the previous one, and the text between matches is kept as pieces too. Words
are mapped to GPT-2's printable byte alphabet and merged by the HF `tokenizers` BPE model
(same algorithm as llama.cpp: lowest merge rank first, ties leftmost), which runs in Rust.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache, lru_cache

import regex
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models as hf_models

from localllm.errors import LocalLLMError
from localllm.tokenizer.vocab import TokenType, Vocab

log = logging.getLogger(__name__)

_CONTRACTIONS = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_GPT4_TAIL = r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"


@dataclass(frozen=True)
class PreTokenizer:
    """A llama.cpp pre-tokenizer preset: regexes applied in sequence, and merge options."""

    patterns: tuple[str, ...]
    ignore_merges: bool = False  # a word that is itself a vocab entry is not merged
    add_bos: bool = False  # llama.cpp's default for this preset, before metadata overrides

    def split(self, text: str) -> list[str]:
        pieces = [text]
        for pattern in _compiled(self.patterns):
            out: list[str] = []
            for piece in pieces:
                pos = 0
                for m in pattern.finditer(piece):
                    start, end = m.span()
                    if start > pos:
                        out.append(piece[pos:start])
                    if end > start:
                        out.append(piece[start:end])
                    pos = end
                if pos < len(piece):
                    out.append(piece[pos:])
            pieces = out
        return pieces


@cache
def _compiled(patterns: tuple[str, ...]) -> tuple[regex.Pattern[str], ...]:
    return tuple(regex.compile(p) for p in patterns)


_DEFAULT = PreTokenizer((r"[\p{P}\$\+<=>\^~\|]+", _GPT2, r"\p{N}+", "[0-9][0-9][0-9]"))
_GPT2_PRE = PreTokenizer((_GPT2,))
_LLAMA3 = PreTokenizer(
    (_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}" + _GPT4_TAIL,),
    ignore_merges=True,
    add_bos=True,
)
_QWEN2 = PreTokenizer((_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}" + _GPT4_TAIL,))
_STARCODER = PreTokenizer((r"\p{N}", _GPT2))
_FALCON = PreTokenizer((r"[\p{P}\$\+<=>\^~\|`]+", _GPT2, "[0-9][0-9][0-9]"))

# `tokenizer.ggml.pre` name -> preset (names as llama.cpp's llama_vocab::load accepts them)
PRE_TOKENIZERS: dict[str, PreTokenizer] = {
    "default": _DEFAULT,
    **dict.fromkeys(
        (
            "gpt-2",
            "phi-2",
            "jina-es",
            "jina-de",
            "gigachat",
            "jina-v2-es",
            "jina-v2-de",
            "mpt",
            "olmo",
            "jais",
            "exaone4",
            "mellum",
        ),
        _GPT2_PRE,
    ),
    **dict.fromkeys(
        ("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"),
        _LLAMA3,
    ),
    **dict.fromkeys(("dbrx", "smaug-bpe"), PreTokenizer(_LLAMA3.patterns)),
    **dict.fromkeys(
        ("qwen2", "deepseek-r1-qwen", "kormo", "megrez", "stablelm2", "hunyuan"), _QWEN2
    ),
    **dict.fromkeys(
        ("starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"),
        _STARCODER,
    ),
    "falcon": _FALCON,
}


def pre_tokenizer(name: str | None) -> PreTokenizer:
    if not name:
        return _DEFAULT
    if name not in PRE_TOKENIZERS:
        log.warning("unknown tokenizer.ggml.pre %r, using the default pre-tokenizer", name)
        return _DEFAULT
    return PRE_TOKENIZERS[name]


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
        self._pieces: dict[int, bytes] = {}

    def encode(self, text: str, add_space: bool = False) -> list[int]:
        """Token ids for one raw-text fragment (`add_space` is unused: BPE adds no prefix)."""
        table = _to_alphabet()
        words = [w.encode("utf-8").decode("latin-1").translate(table) for w in self.pre.split(text)]
        if not words:
            return []
        return self._hf.encode(words, is_pretokenized=True, add_special_tokens=False).ids

    def piece_bytes(self, token_id: int) -> bytes:
        hit = self._pieces.get(token_id)
        if hit is None:
            hit = self._piece_bytes(token_id)
            self._pieces[token_id] = hit
        return hit

    def _piece_bytes(self, token_id: int) -> bytes:
        text = self.vocab.tokens[token_id]
        kind = self.vocab.types[token_id]
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
