"""Our vocabulary as a grammar engine sees it: the exact bytes each token adds to the output.

A grammar constrains the bytes of the generated text, so the engine must know, for every id,
the bytes our detokenizer emits for it when the output continues a prompt
(`IncrementalDetokenizer(continuation=True)`): `▁` is a space, `<0xNN>` byte-fallback tokens
are that one byte, byte-level BPE pieces map back through GPT-2's byte alphabet, and
user-defined tokens (`<tool_call>` in Qwen's vocabulary) are their text. Control, unknown,
unused and undefined tokens add no text: they are *special* and a grammar never allows them
(nor user-defined tokens of a SentencePiece vocabulary, after which the detokenizer drops a
space, so their bytes are not fixed);
the stop ids (EOS, `<|im_end|>` ...) are allowed exactly when the grammar may end.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from localllm.tokenizer import Tokenizer
from localllm.tokenizer.vocab import TokenType

# token types whose bytes are output text
TEXT_TYPES = frozenset({TokenType.NORMAL, TokenType.BYTE, TokenType.USER_DEFINED})


@dataclass(frozen=True)
class TokenTable:
    """Per-token output bytes and the ids a grammar treats specially."""

    token_bytes: tuple[bytes, ...]  # [vocab_size] what each id adds to the text
    special_texts: tuple[str | None, ...]  # [vocab_size] the text of special ids, else None
    stop_ids: tuple[int, ...]  # ids that end generation, sorted
    bos_id: int | None
    vocab_size: int

    @classmethod
    def from_tokenizer(cls, tok: Tokenizer) -> TokenTable:
        data: list[bytes] = []
        special: list[str | None] = []
        # after a user-defined token the SentencePiece detokenizer drops the next piece's
        # leading space, so its bytes depend on context there: those tokens are special
        text_types = TEXT_TYPES - {TokenType.USER_DEFINED} if tok.add_space_prefix else TEXT_TYPES
        for i in range(tok.vocab_size):
            if tok.token_type(i) in text_types and i not in tok.stop_ids:
                data.append(tok.token_bytes(i))
                special.append(None)
            else:
                data.append(b"")
                special.append(tok.token_text(i))
        stop = sorted(tok.stop_ids)
        if not stop:
            raise ValueError("the vocabulary names no end-of-generation token")
        return cls(tuple(data), tuple(special), tuple(stop), tok.bos_id, tok.vocab_size)

    def is_special(self, token_id: int) -> bool:
        return self.special_texts[token_id] is not None

    @cached_property
    def special_ids(self) -> frozenset[int]:
        return frozenset(i for i, s in enumerate(self.special_texts) if s is not None)

    @cached_property
    def _by_bytes(self) -> dict[bytes, int]:
        out: dict[bytes, int] = {}
        for i, b in enumerate(self.token_bytes):
            if b and self.special_texts[i] is None:
                out.setdefault(b, i)
        return out

    def greedy_encode(self, data: bytes) -> list[int]:
        """A tokenization of `data` by longest match: valid (its bytes are `data`), not always
        the one the model's tokenizer picks. Tests and drafts use it where the canonical one
        would add SentencePiece's leading space."""
        table, longest = self._by_bytes, max(map(len, self._by_bytes))
        out, pos = [], 0
        while pos < len(data):
            for n in range(min(longest, len(data) - pos), 0, -1):
                hit = table.get(data[pos : pos + n])
                if hit is not None:
                    out.append(hit)
                    pos += n
                    break
            else:
                raise ValueError(f"no token spells byte {data[pos]:#04x}")
        return out

    def text_bytes(self, ids: list[int]) -> bytes:
        """The output bytes of `ids` (special ids add nothing)."""
        return b"".join(self.token_bytes[i] for i in ids)
