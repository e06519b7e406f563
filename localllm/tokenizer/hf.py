"""The tokenizer of a Hugging Face folder: `tokenizer.json` through the `tokenizers` library.

It sits behind the same `Tokenizer` as the GGUF ones: special tokens (the file's added tokens,
`special` -> control, others user-defined) are cut out of the text first, as for every
model here, and each raw fragment is encoded by the `tokenizers` pipeline (normalizer,
pre-tokenizer, BPE/Unigram model) without its post-processor; BOS/EOS are added by
`Tokenizer.encode` as `tokenizer_config.json` (`add_bos_token`) or, failing that, the file's
post-processor says. A space prefix that the file adds (a Metaspace pre-tokenizer or a
`Prepend("▁")` normalizer, SentencePiece style) is taken out of the pipeline and applied by
`Tokenizer.encode`'s one rule instead (start of text and after special tokens, as llama.cpp).
Pieces render to bytes by the file's decoder family: byte-level (GPT-2 alphabet) or
SentencePiece (`▁`, `<0xNN>` byte fallback).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from tokenizers import Tokenizer as HFTokenizer

from localllm.errors import LocalLLMError
from localllm.tokenizer.bpe import bytelevel_piece_bytes
from localllm.tokenizer.spm import spm_piece_bytes
from localllm.tokenizer.tokenizer import Tokenizer
from localllm.tokenizer.vocab import TokenType, Vocab

PieceBytes = Callable[[Vocab, int], bytes]
# decoder family -> (our vocabulary model name, piece renderer)
DECODERS: dict[str, tuple[str, PieceBytes]] = {
    "bytelevel": ("gpt2", bytelevel_piece_bytes),
    "sentencepiece": ("llama", spm_piece_bytes),
}
_BYTE_PIECE = re.compile(r"<0x[0-9A-F]{2}>")


class HfEngine:
    """Encodes raw fragments with the `tokenizers` pipeline; renders pieces to bytes."""

    def __init__(self, hf: HFTokenizer, vocab: Vocab, pieces: PieceBytes) -> None:
        self.hf, self.vocab, self._pieces = hf, vocab, pieces

    def encode(self, text: str, add_space: bool) -> list[int]:
        if add_space:
            text = " " + text
        return self.hf.encode(text, add_special_tokens=False).ids

    def piece_bytes(self, token_id: int) -> bytes:
        return self._pieces(self.vocab, token_id)


def _types_in(node: Any, children: str) -> list[dict[str, Any]]:
    """A component and, for a Sequence, its parts (flattened)."""
    if not isinstance(node, dict):
        return []
    return [node] + [x for c in node.get(children) or [] for x in _types_in(c, children)]


def decoder_family(tj: dict[str, Any]) -> str:
    types = {d.get("type") for d in _types_in(tj.get("decoder"), "decoders")}
    if "ByteLevel" in types:
        return "bytelevel"
    if types & {"Metaspace", "ByteFallback", "Replace"}:
        return "sentencepiece"
    found = ", ".join(sorted(str(t) for t in types if t)) or "none"
    raise LocalLLMError(
        f"tokenizer.json: unsupported decoder ({found}); byte-level and SentencePiece-style tokenizers are supported"
    )


def take_space_prefix(tj: dict[str, Any]) -> bool:
    """Remove the space prefix the pipeline adds (Metaspace prepend, Prepend("▁") normalizer);
    True if there was one."""
    found = False
    for pre in _types_in(tj.get("pre_tokenizer"), "pretokenizers"):
        if pre.get("type") != "Metaspace":
            continue
        default = "always" if pre.get("add_prefix_space", True) else "never"
        if pre.get("prepend_scheme", default) != "never":
            pre["prepend_scheme"], pre["add_prefix_space"], found = "never", False, True
    norm = tj.get("normalizer")
    if isinstance(norm, dict) and norm.get("type") == "Prepend":
        tj["normalizer"], found = None, True
    elif isinstance(norm, dict) and norm.get("type") == "Sequence":
        keep = [n for n in norm.get("normalizers") or [] if n.get("type") != "Prepend"]
        found = found or len(keep) != len(norm.get("normalizers") or [])
        norm["normalizers"] = keep
    return found


def _special_text(v: Any) -> str | None:
    if isinstance(v, dict):
        v = v.get("content")
    return v if isinstance(v, str) and v else None


def _ids(v: Any) -> list[int]:
    vals = v if isinstance(v, list) else [v]
    return [x for x in vals if isinstance(x, int) and not isinstance(x, bool)]


def _vocab_table(hf: HFTokenizer, n: int, family: str) -> tuple[list[str], list[int]]:
    """Token texts and types for ids [0, n): holes are unused, added tokens control (special)
    or user-defined, `<0xNN>` pieces of a SentencePiece vocabulary bytes."""
    tokens, types = [""] * n, [int(TokenType.UNUSED)] * n
    for text, i in hf.get_vocab(with_added_tokens=True).items():
        tokens[i], types[i] = text, int(TokenType.NORMAL)
        if family == "sentencepiece" and _BYTE_PIECE.fullmatch(text):
            types[i] = int(TokenType.BYTE)
    for i, added in hf.get_added_tokens_decoder().items():
        types[i] = int(TokenType.CONTROL if added.special else TokenType.USER_DEFINED)
    unk = getattr(hf.model, "unk_token", None)
    unk_id = hf.token_to_id(unk) if isinstance(unk, str) else None
    if unk_id is not None:
        types[unk_id] = int(TokenType.UNKNOWN)
    return tokens, types


def _special_ids(
    hf: HFTokenizer, tok_cfg: dict[str, Any], gen_cfg: dict[str, Any]
) -> tuple[int | None, int | None, list[int]]:
    """(bos, eos, every end-of-generation id): tokenizer_config.json's token texts first,
    then generation_config.json (+ config.json) ids; an eos list is all stop ids."""

    def find(key: str) -> int | None:
        text = _special_text(tok_cfg.get(f"{key}_token"))
        found = hf.token_to_id(text) if text else None
        ids = _ids(gen_cfg.get(f"{key}_token_id"))
        return found if found is not None else (ids[0] if ids else None)

    return find("bos"), find("eos"), _ids(gen_cfg.get("eos_token_id"))


def _added_by_post_processor(
    hf: HFTokenizer, bos: int | None, eos: int | None
) -> tuple[bool, bool]:
    with_special = hf.encode("a", add_special_tokens=True).ids
    plain = hf.encode("a", add_special_tokens=False).ids
    add_bos = bos is not None and with_special[:1] == [bos] and plain[:1] != [bos]
    add_eos = eos is not None and with_special[-1:] == [eos] and plain[-1:] != [eos]
    return add_bos, add_eos


def hf_tokenizer(
    tokenizer_json: str, tok_cfg: dict[str, Any], gen_cfg: dict[str, Any], vocab_size: int
) -> Tokenizer:
    """A Tokenizer from the text of tokenizer.json, tokenizer_config.json and the merged
    generation_config.json / config.json ids; `vocab_size`: the model's (embedding rows)."""
    try:
        original = HFTokenizer.from_str(tokenizer_json)
        tj = json.loads(tokenizer_json)
        family = decoder_family(tj)
        prefix = take_space_prefix(tj)
        hf = HFTokenizer.from_str(json.dumps(tj))
    except LocalLLMError:
        raise
    except Exception as e:  # json errors and the library's own exception type
        raise LocalLLMError(f"tokenizer.json: cannot load it ({e})") from None
    n = max(hf.get_vocab(with_added_tokens=True).values(), default=-1) + 1
    if n > vocab_size:
        raise LocalLLMError(
            f"tokenizer.json has {n} tokens but the model's vocabulary is {vocab_size}"
        )
    tokens, types = _vocab_table(hf, vocab_size, family)
    bos, eos, stop = _special_ids(hf, tok_cfg, gen_cfg)
    add_bos, add_eos = _added_by_post_processor(original, bos, eos)
    model, pieces = DECODERS[family]
    vocab = Vocab(
        tokens,
        types,
        [0.0] * vocab_size,
        model,
        add_bos=bool(tok_cfg.get("add_bos_token", add_bos)),
        add_eos=bool(tok_cfg.get("add_eos_token", add_eos)),
        add_space_prefix=prefix,
    )
    unk = next((i for i, t in enumerate(types) if t == TokenType.UNKNOWN), None)
    keys = {"bos": bos, "eos": eos, "unknown": unk}
    vocab.find_special_ids({f"tokenizer.ggml.{k}_token_id": v for k, v in keys.items()}, stop)
    hf.encode_special_tokens = True  # specials are cut out before the pipeline sees the text
    return Tokenizer(vocab, HfEngine(hf, vocab, pieces))
