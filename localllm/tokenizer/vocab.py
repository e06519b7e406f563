"""Vocabulary facts shared by every tokenizer type: token types, special ids, stop and FIM ids.

The rules follow llama.cpp's `llama_vocab::load` so that a GGUF file behaves the same here:
default BOS/EOS per model type, ids out of range ignored, end-of-generation tokens found by
their text as well as by metadata keys, and the special-token partition of the input text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from localllm.errors import LocalLLMError


class TokenType(IntEnum):
    """`tokenizer.ggml.token_type` values (llama.cpp `llama_token_type`)."""

    UNDEFINED = 0
    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3
    USER_DEFINED = 4
    UNUSED = 5
    BYTE = 6


# token types matched as whole strings in the input (llama.cpp `cache_special_tokens`)
PARTITION_TYPES = frozenset({TokenType.CONTROL, TokenType.USER_DEFINED, TokenType.UNKNOWN})
# token types that decode(skip_special=True) drops
SKIPPED_TYPES = frozenset({TokenType.CONTROL, TokenType.UNKNOWN})

# texts of tokens that end generation (llama.cpp `special_eog_ids`)
EOG_TEXTS = frozenset(
    {
        "<|eot_id|>",
        "<|im_end|>",
        "<|end|>",
        "<|return|>",
        "<|call|>",
        "<end_of_turn>",
        "<|endoftext|>",
        "<|eom_id|>",
        "<EOT>",
        "_<EOT>",
        "<|end_of_text|>",
        "<end_of_utterance>",
    }
)
FIM_TEXTS = {
    "pre": (
        "<|fim_prefix|>",
        "<fim-prefix>",
        "<fim_prefix>",
        "<｜fim▁begin｜>",
        "<PRE>",
        "▁<PRE>",
        "<|code_prefix|>",
    ),
    "suf": (
        "<|fim_suffix|>",
        "<fim-suffix>",
        "<fim_suffix>",
        "<｜fim▁hole｜>",
        "<SUF>",
        "▁<SUF>",
        "<|code_suffix|>",
    ),
    "mid": (
        "<|fim_middle|>",
        "<fim-middle>",
        "<fim_middle>",
        "<｜fim▁end｜>",
        "<MID>",
        "▁<MID>",
        "<|code_middle|>",
    ),
}
# metadata keys per FIM role, newest first (the prefix/suffix/middle names are deprecated)
FIM_KEYS = {
    "pre": ("tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"),
    "suf": ("tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"),
    "mid": ("tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"),
}
# FIM helper tokens that llama.cpp also treats as end of generation
FIM_EOG_KEYS = (
    "tokenizer.ggml.fim_pad_token_id",
    "tokenizer.ggml.fim_rep_token_id",
    "tokenizer.ggml.fim_sep_token_id",
)
# gpt-oss (harmony) markers are always rendered, never hidden
ALWAYS_RENDERED = frozenset({"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})


@dataclass(frozen=True)
class ModelDefaults:
    """Per tokenizer model type defaults, as llama.cpp sets them before reading metadata."""

    bos_id: int | None
    eos_id: int | None
    unk_id: int | None
    add_bos: bool
    add_space_prefix: bool


MODEL_DEFAULTS: dict[str, ModelDefaults] = {
    "llama": ModelDefaults(bos_id=1, eos_id=2, unk_id=0, add_bos=True, add_space_prefix=True),
    "gpt2": ModelDefaults(bos_id=11, eos_id=11, unk_id=None, add_bos=False, add_space_prefix=False),
}
# BPE pre-tokenizers for which llama.cpp adds BOS by default
BPE_PRE_ADD_BOS = frozenset(
    {
        "llama3",
        "llama-v3",
        "llama-bpe",
        "falcon3",
        "falcon-h1",
        "pixtral",
        "midm-2.0",
        "lfm2",
        "tekken",
        "chameleon",
    }
)


@dataclass
class Vocab:
    """Token strings, types and scores plus the special ids derived from metadata."""

    tokens: list[str]
    types: list[int]
    scores: list[float]
    model: str  # "llama" | "gpt2"
    bos_id: int | None = None
    eos_id: int | None = None
    unk_id: int | None = None
    add_bos: bool = False
    add_eos: bool = False
    add_space_prefix: bool = False
    stop_ids: frozenset[int] = frozenset()
    fim_ids: tuple[int, int, int] | None = None
    token_to_id: dict[str, int] = field(default_factory=dict)
    partition_ids: list[int] = field(default_factory=list)  # longest text first

    def __post_init__(self) -> None:
        if len(self.types) != len(self.tokens) or len(self.scores) != len(self.tokens):
            raise LocalLLMError(
                "tokenizer metadata: tokens, token_type and scores differ in length"
            )
        for i, text in enumerate(self.tokens):
            if not text:  # llama.cpp renames empty tokens so that they can never match
                self.tokens[i] = text = f"[EMPTY_{i}]"
            self.token_to_id[text] = i  # last id wins on duplicates, as in llama.cpp

    def valid_id(self, value: Any) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return None
        return value if 0 <= value < len(self.tokens) else None

    def find_special_ids(self, metadata: dict[str, Any], extra_stop: Sequence[int] = ()) -> None:
        """Fill bos/eos/unk, stop_ids and fim_ids from metadata keys and token texts;
        `extra_stop`: more end-of-generation ids (an HF generation_config's eos list)."""
        for name in ("bos", "eos", "unk"):
            key = "unknown" if name == "unk" else name
            found = self.valid_id(metadata.get(f"tokenizer.ggml.{key}_token_id"))
            if found is not None:
                setattr(self, f"{name}_id", found)
        for attr in ("bos_id", "eos_id", "unk_id"):
            if self.valid_id(getattr(self, attr)) is None:
                setattr(self, attr, None)
        self.fim_ids = self._find_fim_ids(metadata)
        valid = (self.valid_id(i) for i in extra_stop)
        self.stop_ids = self._find_stop_ids(metadata) | {i for i in valid if i is not None}
        self._fix_types()
        self.partition_ids = sorted(
            (i for i, t in enumerate(self.types) if t in PARTITION_TYPES),
            key=lambda i: -len(self.tokens[i]),
        )

    def _find_fim_ids(self, metadata: dict[str, Any]) -> tuple[int, int, int] | None:
        ids: list[int] = []
        for role in ("pre", "suf", "mid"):
            from_keys = (self.valid_id(metadata.get(k)) for k in FIM_KEYS[role])
            found = next((i for i in from_keys if i is not None), None)
            if found is None:
                found = next(
                    (self.token_to_id[t] for t in FIM_TEXTS[role] if t in self.token_to_id), None
                )
            if found is None:
                return None
            ids.append(found)
        return (ids[0], ids[1], ids[2])

    def _find_stop_ids(self, metadata: dict[str, Any]) -> frozenset[int]:
        stop = {self.token_to_id[t] for t in EOG_TEXTS if t in self.token_to_id}
        keys = ("tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id", *FIM_EOG_KEYS)
        stop.update(i for i in (self.valid_id(metadata.get(k)) for k in keys) if i is not None)
        if self.eos_id is not None:
            stop.add(self.eos_id)
        texts = {self.tokens[i] for i in stop}
        if {"<|return|>", "<|call|>", "<|end|>"} <= texts:  # harmony: <|end|> ends a message only
            stop.discard(self.token_to_id["<|end|>"])
        return frozenset(stop)

    def _fix_types(self) -> None:
        """Stop and FIM tokens are control tokens whatever the file says (llama.cpp does this)."""
        forced = set(self.stop_ids) | set(self.fim_ids or ())
        for i in forced:
            if self.tokens[i] in ALWAYS_RENDERED:
                continue
            self.types[i] = TokenType.CONTROL
        for text in ALWAYS_RENDERED:
            if text in self.token_to_id:
                self.types[self.token_to_id[text]] = TokenType.USER_DEFINED


def partition(vocab: Vocab, text: str, parse_special: bool) -> list[str | int]:
    """Split `text` into raw-text fragments (str) and special token ids (int).

    Special tokens are matched as whole strings, longest first, as llama.cpp's
    `tokenizer_st_partition` does. User-defined tokens are matched even when parse_special is
    False; control and unknown tokens only when it is True.
    """
    if not text:
        return []
    pieces: list[str | int] = [text]
    for tid in vocab.partition_ids:
        if not parse_special and vocab.types[tid] != TokenType.USER_DEFINED:
            continue
        needle = vocab.tokens[tid]
        if needle not in text:
            continue
        pieces = _split_on(pieces, needle, tid)
    return pieces


def _split_on(pieces: Sequence[str | int], needle: str, tid: int) -> list[str | int]:
    out: list[str | int] = []
    for piece in pieces:
        if isinstance(piece, int) or needle not in piece:
            out.append(piece)
            continue
        parts = piece.split(needle)
        for k, part in enumerate(parts):
            if k:
                out.append(tid)
            if part:
                out.append(part)
    return out
