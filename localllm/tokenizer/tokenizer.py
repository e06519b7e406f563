"""Tokenizer built from GGUF metadata (or GPT-2 style BPE files) and a streaming detokenizer.

Encoding reproduces llama.cpp's `llama_tokenize` exactly: special tokens are cut out of the
text first (whole strings, longest first), then each raw fragment goes to the model's engine
(`tokenizer_spm` for `llama`, `tokenizer_bpe` for `gpt2`), with BOS/EOS as the file says.

Decoding rule (the space prefix). SentencePiece-style vocabularies add a space in front of
each raw-text fragment that starts the text or follows a special token (BOS, a control or a
user-defined token), which turns into the leading `▁` of its first piece. `decode` removes
exactly that one space again: from the first text piece of the ids and from the first text
piece after a special token, when the vocabulary adds a space prefix. So
`decode(encode(s)) == s` for ordinary strings (llama.cpp keeps the space when a BOS was
removed; we don't, so that the round trip holds). Pass `continuation=True` when the ids
continue text you already have (a completion after its prompt): the first piece then keeps
its space. llama.cpp's `clean_spaces` post-processing (" ," -> ",") is never applied: it
would corrupt code and break the streaming guarantee.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from localllm.errors import LocalLLMError, ModelLoadError, RequestError
from localllm.tokenizer.bpe import BpeEngine, pre_tokenizer
from localllm.tokenizer.fragment_cache import FragmentCache
from localllm.tokenizer.spm import SpmEngine
from localllm.tokenizer.vocab import (
    MODEL_DEFAULTS,
    PARTITION_TYPES,
    SKIPPED_TYPES,
    ModelDefaults,
    TokenType,
    Vocab,
    partition,
)

if TYPE_CHECKING:
    from localllm.formats.gguf import GGUFFile


class Engine(Protocol):
    def encode(self, text: str, add_space: bool) -> list[int]: ...

    def piece_bytes(self, token_id: int) -> bytes: ...  # uncached: the Tokenizer caches


def _spm_engine(vocab: Vocab, metadata: dict[str, Any]) -> Engine:
    return SpmEngine(vocab)


def _bpe_engine(vocab: Vocab, metadata: dict[str, Any]) -> Engine:
    merges = metadata.get("tokenizer.ggml.merges")
    if not isinstance(merges, list):
        raise LocalLLMError("gpt2 tokenizer without tokenizer.ggml.merges")
    return BpeEngine(vocab, merges, pre_tokenizer(metadata.get("tokenizer.ggml.pre")))


# `tokenizer.ggml.model` -> engine factory
ENGINES = {"llama": _spm_engine, "gpt2": _bpe_engine}


def _vocab_from_metadata(metadata: dict[str, Any], defaults: ModelDefaults | None = None) -> Vocab:
    model = metadata.get("tokenizer.ggml.model")
    if model not in ENGINES:
        raise LocalLLMError(
            f"unsupported tokenizer.ggml.model {model!r} (supported: {', '.join(sorted(ENGINES))})"
        )
    tokens = metadata.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or not tokens:
        raise LocalLLMError("tokenizer metadata has no tokenizer.ggml.tokens")
    n = len(tokens)
    types = metadata.get("tokenizer.ggml.token_type") or [int(TokenType.NORMAL)] * n
    scores = metadata.get("tokenizer.ggml.scores") or [0.0] * n
    d = defaults or MODEL_DEFAULTS[model]
    add_bos, bos_id = d.add_bos, d.bos_id
    if model == "gpt2":
        pre = pre_tokenizer(metadata.get("tokenizer.ggml.pre"))
        add_bos, bos_id = pre.add_bos, bos_id if pre.default_bos else None
    vocab = Vocab(
        list(tokens),
        list(types),
        [float(s) for s in scores],
        model,
        bos_id=bos_id,
        eos_id=d.eos_id,
        unk_id=d.unk_id,
        add_bos=bool(metadata.get("tokenizer.ggml.add_bos_token", add_bos)),
        add_eos=bool(metadata.get("tokenizer.ggml.add_eos_token", False)),
        add_space_prefix=bool(metadata.get("tokenizer.ggml.add_space_prefix", d.add_space_prefix)),
    )
    vocab.find_special_ids(metadata)
    return vocab


class Tokenizer:
    """Text <-> token ids for one model vocabulary (see the module docstring for the rules)."""

    def __init__(self, vocab: Vocab, engine: Engine) -> None:
        self._vocab = vocab
        self._engine = engine
        self._pieces: dict[int, bytes] = {}  # token id -> rendered bytes, filled on first use
        self._fragments = FragmentCache()  # ids of long fragments, for the next request
        self.vocab_size: int = len(vocab.tokens)
        self.bos_id: int | None = vocab.bos_id
        self.eos_id: int | None = vocab.eos_id
        self.stop_ids: frozenset[int] = vocab.stop_ids
        self.add_bos: bool = vocab.add_bos and vocab.bos_id is not None
        self.add_eos: bool = vocab.add_eos and vocab.eos_id is not None
        self.fim_ids: tuple[int, int, int] | None = vocab.fim_ids
        self.add_space_prefix: bool = vocab.add_space_prefix
        self.model: str = vocab.model

    @classmethod
    def from_gguf(
        cls, metadata: dict[str, Any], defaults: ModelDefaults | None = None
    ) -> Tokenizer:
        """From GGUF metadata (`GGUFFile(path).metadata`); `defaults` replace llama.cpp's."""
        vocab = _vocab_from_metadata(metadata, defaults)
        return cls(vocab, ENGINES[vocab.model](vocab, metadata))

    @classmethod
    def from_gguf_file(cls, g: GGUFFile) -> Tokenizer:
        """From an open GGUF file; a tokenizer we cannot build is a ModelLoadError naming it."""
        try:
            return cls.from_gguf(g.metadata)
        except ModelLoadError:
            raise
        except LocalLLMError as e:
            raise ModelLoadError(g.path, str(e)) from None

    @classmethod
    def from_hf_bpe_files(
        cls, encoder_json: str, vocab_bpe: str, pre: str = "llama-bpe"
    ) -> Tokenizer:
        """A byte-level BPE tokenizer from GPT-2 style `encoder.json` + `vocab.bpe` files."""
        try:
            with open(encoder_json, encoding="utf-8") as f:
                encoder: dict[str, int] = json.load(f)
            with open(vocab_bpe, encoding="utf-8") as f:
                merges = [ln.rstrip("\n") for ln in f if ln.strip() and not ln.startswith("#ver")]
        except (OSError, ValueError) as e:
            raise LocalLLMError(f"cannot read BPE tokenizer files: {e}") from None
        n = max(encoder.values()) + 1
        tokens = [f"[EMPTY_{i}]" for i in range(n)]
        types = [int(TokenType.UNUSED)] * n
        for text, i in encoder.items():
            tokens[i], types[i] = text, int(TokenType.NORMAL)
        metadata: dict[str, Any] = {
            "tokenizer.ggml.model": "gpt2",
            "tokenizer.ggml.pre": pre,
            "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.token_type": types,
            "tokenizer.ggml.merges": merges,
        }
        # these files name no special ids; use the conventional texts when they are present
        for key, texts in (
            ("bos", ("<|begin_of_text|>", "<|endoftext|>")),
            ("eos", ("<|end_of_text|>", "<|endoftext|>")),
        ):
            found = next((encoder[t] for t in texts if t in encoder), None)
            if found is not None:
                metadata[f"tokenizer.ggml.{key}_token_id"] = found
        no_defaults = ModelDefaults(
            bos_id=None, eos_id=None, unk_id=None, add_bos=False, add_space_prefix=False
        )
        return cls.from_gguf(metadata, no_defaults)

    def encode(
        self,
        text: str,
        add_special: bool = True,
        parse_special: bool = True,
        continuation: bool = False,
    ) -> list[int]:
        """Token ids of `text`; add_special adds BOS (and EOS) as the model asks.

        continuation=True: the ids continue earlier text, so the first fragment gets no
        SentencePiece space prefix (the ids spell exactly `text`, as `decode(continuation=True)`
        reads them)."""
        out: list[int] = []
        if add_special and self.add_bos:
            out.append(self.bos_id)  # type: ignore[arg-type]
        prev_special = not continuation  # the first fragment gets the space prefix (SentencePiece)
        prefix = self.add_space_prefix
        for frag in partition(self._vocab, text, parse_special):
            if isinstance(frag, int):
                out.append(frag)
                prev_special = True
            else:
                out.extend(self._encode_fragment(frag, prefix and prev_special))
                prev_special = False
        if add_special and self.add_eos:
            out.append(self.eos_id)  # type: ignore[arg-type]
        return out

    def _encode_fragment(self, text: str, add_space: bool) -> Sequence[int]:
        """One raw-text fragment's ids, from the fragment cache when a request sent it before."""
        ids = self._fragments.get(text, add_space)
        if ids is None:
            fresh = self._engine.encode(text, add_space)
            self._fragments.put(text, add_space, fresh)
            return fresh
        return ids

    def decode(
        self, ids: Iterable[int], skip_special: bool = True, continuation: bool = False
    ) -> str:
        """Text of `ids` (invalid UTF-8 as U+FFFD); see the module doc for the space rule."""
        renderer = _Renderer(self, skip_special, continuation)
        data = b"".join(renderer.render(t) for t in ids)
        return data.decode("utf-8", errors="replace")

    def token_bytes(self, token_id: int) -> bytes:
        """The raw bytes a token stands for (special tokens: their text)."""
        self._check(token_id)
        return self._piece(token_id)

    def _piece(self, token_id: int) -> bytes:
        """The engine's bytes of a (checked) token id, each id rendered once."""
        hit = self._pieces.get(token_id)
        if hit is None:
            hit = self._pieces[token_id] = self._engine.piece_bytes(token_id)
        return hit

    def token_to_str(self, token_id: int) -> str:
        """Display form for logprobs: the token's text, bytes that are not UTF-8 as `\\xNN`."""
        return self.token_bytes(token_id).decode("utf-8", errors="backslashreplace")

    def is_special(self, token_id: int) -> bool:
        """Control and unknown tokens: the ones `decode(skip_special=True)` leaves out."""
        self._check(token_id)
        return self._vocab.types[token_id] in SKIPPED_TYPES

    def token_type(self, token_id: int) -> TokenType:
        self._check(token_id)
        return TokenType(self._vocab.types[token_id])

    def token_text(self, token_id: int) -> str:
        """The vocabulary entry as stored in the file (`▁the`, `<0x0A>`, `Ġthe` ...)."""
        self._check(token_id)
        return self._vocab.tokens[token_id]

    def token_id(self, text: str) -> int | None:
        """The id of the vocabulary entry `text`, if there is one."""
        return self._vocab.token_to_id.get(text)

    def _check(self, token_id: int) -> None:
        if not 0 <= token_id < self.vocab_size:
            raise RequestError(
                f"token id {token_id} is outside the vocabulary (0..{self.vocab_size - 1})",
                param="token_id",
            )


class _Renderer:
    """Turns ids into bytes one at a time, applying the space-prefix rule of the module doc."""

    def __init__(self, tok: Tokenizer, skip_special: bool, continuation: bool) -> None:
        self.tok = tok
        self.skip_special = skip_special
        self.strip_next = tok.add_space_prefix and not continuation

    def render(self, token_id: int) -> bytes:
        tok = self.tok
        tok._check(token_id)
        kind = tok._vocab.types[token_id]
        if kind in PARTITION_TYPES:
            self.strip_next = tok.add_space_prefix
            if self.skip_special and kind in SKIPPED_TYPES:
                return b""
            return tok._piece(token_id)
        piece = tok._piece(token_id)
        if piece and self.strip_next:
            self.strip_next = False
            if piece[:1] == b" ":
                piece = piece[1:]
        return piece


class IncrementalDetokenizer:
    """Streams text for ids as they arrive; a delta never ends inside a UTF-8 character.

    Incomplete UTF-8 sequences are held back until their last byte arrives; a sequence that
    can no longer become valid turns into U+FFFD at once. The concatenated deltas (including
    `flush()`) equal `tokenizer.decode(all_ids)` with the same options.
    """

    def __init__(
        self, tokenizer: Tokenizer, skip_special: bool = True, continuation: bool = False
    ) -> None:
        self._renderer = _Renderer(tokenizer, skip_special, continuation)
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._parts: list[str] = []

    def add(self, token_ids: Iterable[int]) -> str:
        data = b"".join(self._renderer.render(t) for t in token_ids)
        delta = self._utf8.decode(data, final=False)
        if delta:
            self._parts.append(delta)
        return delta

    def flush(self) -> str:
        """Text for bytes still held back (an unfinished character becomes U+FFFD)."""
        delta = self._utf8.decode(b"", final=True)
        if delta:
            self._parts.append(delta)
        return delta

    @property
    def text(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""
