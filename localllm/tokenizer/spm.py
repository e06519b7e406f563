"""SentencePiece-style (GGUF `llama`) tokenizer: score-ranked merges with byte fallback.

Exactly llama.cpp's `llm_tokenizer_spm_session`: spaces become `▁`, the text starts as one
symbol per character, and the adjacent pair whose concatenation is the highest-scoring vocab
piece is merged (ties: leftmost) until no pair is a piece. Symbols that are not pieces are
emitted as `<0xNN>` byte tokens.

Speed: llama.cpp runs the merge over the whole fragment at once. A merge can never cross a
position where no vocab piece contains the two neighbouring characters, so we cut the text
at such positions (word starts, in practice) and run and cache the merge per segment. The
result is identical; only the work is smaller.
"""

from __future__ import annotations

import heapq
import re

from localllm.tokenizer.vocab import TokenType, Vocab

SPACE = "\u2581"  # ▁
LONG_SEGMENT = 48  # characters; longer segments are cut further by the pair table
CACHE_LIMIT = 1 << 16


class SpmEngine:
    """Encodes raw text (no special tokens) and renders pieces for a `llama` vocabulary."""

    def __init__(self, vocab: Vocab) -> None:
        self.vocab = vocab
        self.ids = vocab.token_to_id
        self.scores = vocab.scores
        self.byte_ids = [self._byte_token(b) for b in range(256)]
        self._cut = self._build_cut_pattern(vocab.tokens)
        self._pairs: frozenset[str] | None = None  # built on first long segment
        self._cache: dict[str, tuple[int, ...]] = {}

    def _byte_token(self, b: int) -> int:
        hit = self.ids.get(f"<0x{b:02X}>")
        if hit is None and b < 0x80:
            hit = self.ids.get(chr(b))
        if hit is None:
            hit = self.vocab.unk_id if self.vocab.unk_id is not None else 0
        return hit

    @staticmethod
    def _build_cut_pattern(tokens: list[str]) -> re.Pattern[str]:
        """A zero-width pattern before each `▁` that follows a char no piece puts before `▁`."""
        before_space = {SPACE}
        for t in tokens:
            start = t.find(SPACE, 1)
            while start > 0:
                before_space.add(t[start - 1])
                start = t.find(SPACE, start + 1)
        chars = "".join(sorted(before_space))
        return re.compile(f"(?<=[^{re.escape(chars)}])(?={SPACE})")

    def encode(self, text: str, add_space: bool) -> list[int]:
        """Token ids for one raw-text fragment; `add_space` prepends the dummy-prefix space."""
        if add_space:
            text = " " + text
        text = text.replace(" ", SPACE)
        out: list[int] = []
        cache = self._cache
        for seg in self._cut.split(text):
            hit = cache.get(seg)
            if hit is None:
                hit = self._encode_segment(seg)
                if len(cache) >= CACHE_LIMIT:
                    cache.clear()
                cache[seg] = hit
            out.extend(hit)
        return out

    def _encode_segment(self, seg: str) -> tuple[int, ...]:
        if len(seg) <= LONG_SEGMENT:
            return tuple(self._merge(seg))
        out: list[int] = []
        for part in self._split_by_pairs(seg):
            out.extend(self._merge(part))
        return tuple(out)

    def _split_by_pairs(self, seg: str) -> list[str]:
        """Cut where no vocab piece contains the two neighbouring characters."""
        if self._pairs is None:
            self._pairs = frozenset(
                t[i : i + 2] for t in self.vocab.tokens for i in range(len(t) - 1)
            )
        pairs = self._pairs
        parts, start = [], 0
        for i in range(1, len(seg)):
            if seg[i - 1 : i + 1] not in pairs:
                parts.append(seg[start:i])
                start = i
        parts.append(seg[start:])
        return parts

    def _merge(self, seg: str) -> list[int]:
        ids, scores = self.ids, self.scores
        syms = list(seg)
        n = len(syms)
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        prv = list(range(-1, n - 1))
        # heap entries: (-score, left index, right index, merged length)
        heap = []
        for i in range(n - 1):
            tid = ids.get(syms[i] + syms[i + 1])
            if tid is not None:
                heap.append((-scores[tid], i, i + 1, 2))
        heapq.heapify(heap)
        while heap:
            _, left, right, size = heapq.heappop(heap)
            a, b = syms[left], syms[right]
            if not a or not b or len(a) + len(b) != size:
                continue  # stale: one side was merged since this pair was queued
            syms[left], syms[right] = a + b, ""
            nxt[left] = nxt[right]
            if nxt[left] >= 0:
                prv[nxt[left]] = left
            for lo, hi in ((prv[left], left), (left, nxt[left])):
                if lo >= 0 and hi >= 0:
                    merged = syms[lo] + syms[hi]
                    tid = ids.get(merged)
                    if tid is not None:
                        heapq.heappush(heap, (-scores[tid], lo, hi, len(merged)))
        out: list[int] = []
        for s in syms:
            if s:
                tid = ids.get(s)
                if tid is not None:
                    out.append(tid)
                else:  # never merged and not a piece: byte fallback
                    out.extend(self.byte_ids[b] for b in s.encode("utf-8"))
        return out

    def piece_bytes(self, token_id: int) -> bytes:
        return spm_piece_bytes(self.vocab, token_id)


def spm_piece_bytes(vocab: Vocab, token_id: int) -> bytes:
    """The bytes a token renders to (`▁` as space, `<0xNN>` as that byte)."""
    text = vocab.tokens[token_id]
    kind = vocab.types[token_id]
    if kind == TokenType.BYTE:
        return bytes([int(text[3:5], 16)])
    if kind == TokenType.NORMAL:
        return text.replace(SPACE, " ").encode("utf-8")
    if kind in (TokenType.USER_DEFINED, TokenType.CONTROL, TokenType.UNKNOWN):
        return text.encode("utf-8")
    return b""  # unused / undefined tokens render as nothing, as in llama.cpp
