"""llguidance tokenizer built from our TokenTable."""

from __future__ import annotations

import llguidance as llg

from localllm.structured.vocab import TokenTable
from localllm.tokenizer import Tokenizer

SPECIAL_PREFIX = b"\xff"  # llguidance's mark for a token that is not text


class _Vocab:
    """The object llguidance's `TokenizerWrapper` reads: token bytes, ids, and encode()."""

    def __init__(self, tok: Tokenizer, table: TokenTable) -> None:
        self._tok = tok
        self.eos_token_id = table.stop_ids[0]
        self.bos_token_id = table.bos_id
        self.tokens = [
            b if s is None else SPECIAL_PREFIX + s.encode("utf-8")
            for b, s in zip(table.token_bytes, table.special_texts)
        ]
        self.special_token_ids = sorted(table.special_ids)

    def __call__(self, text: bytes | str) -> list[int]:
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        return self._tok.encode(text, add_special=False, parse_special=False, continuation=True)


def llg_tokenizer(tok: Tokenizer, table: TokenTable) -> llg.LLTokenizer:
    return llg.LLTokenizer(llg.TokenizerWrapper(_Vocab(tok, table)), eos_token=list(table.stop_ids))
