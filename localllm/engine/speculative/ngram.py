"""Prompt-lookup drafting: an n-gram index over one sequence's tokens, updated per token.

Pure Python. For each n in [n_min, n_max] the index maps the n-gram ending just before
position j (tokens[j-n:j]) to the largest such j seen so far, for every j <= len - 1, i.e.
every n-gram that has at least one token after it. Proposing looks up the sequence's own
suffix of length n (longest first): a hit at j means the suffix occurred earlier and was
followed by tokens[j:], which become the draft. Appending a token adds one entry per n, so a
step costs O(n_max - n_min + k) dictionary operations whatever the context length.

A match close to the end (j + k > len) is continued periodically: if the text repeats with
period p = len - j, the tokens after the end are the draft's own earlier tokens, which is
what a repeated line or a loop of the same phrase looks like.

Keys pack an n-gram into one int (a leading 1 bit, then KEY_BITS per token), so n-grams of
different lengths share one dict without colliding and no tuples are kept per position.
"""

from __future__ import annotations

from collections.abc import Sequence

KEY_BITS = 24  # token ids below 2**24 (16.7M) pack exactly; larger ids are folded by a mask
_MASK = (1 << KEY_BITS) - 1


def _key(tokens: Sequence[int], lo: int, hi: int) -> int:
    key = 1
    for i in range(lo, hi):
        key = (key << KEY_BITS) | (tokens[i] & _MASK)
    return key


class NgramIndex:
    """The lookup index of one sequence; `tokens` is its (growing) token list, read in place."""

    def __init__(self, n_min: int, n_max: int) -> None:
        if not 1 <= n_min <= n_max:
            raise ValueError(f"need 1 <= n_min <= n_max, got n_min={n_min}, n_max={n_max}")
        self.n_min = n_min
        self.n_max = n_max
        self._latest: dict[int, int] = {}  # packed n-gram -> latest position after it
        self._synced = 0  # tokens[:_synced] are indexed (entries for every j < _synced)

    def __len__(self) -> int:
        return self._synced

    def sync(self, tokens: Sequence[int], budget: int | None = None) -> bool:
        """Index the tokens appended since the last call (all of them the first time), at most
        `budget` of them (a long prompt is indexed over a few steps instead of stalling one);
        True when the index has caught up."""
        if len(tokens) < self._synced:  # the list was cut (never in the engine): start over
            self._latest.clear()
            self._synced = 0
        latest = self._latest
        end = len(tokens) if budget is None else min(len(tokens), self._synced + budget)
        for j in range(max(self._synced, 1), end):
            key = 0  # tokens[j-n:j] packed, first token in the highest bits
            for n in range(1, min(self.n_max, j) + 1):
                key |= (tokens[j - n] & _MASK) << (KEY_BITS * (n - 1))
                if n >= self.n_min:
                    latest[key | (1 << (KEY_BITS * n))] = j
        self._synced = max(self._synced, end)
        return self._synced == len(tokens)

    def lookup(self, tokens: Sequence[int]) -> tuple[int, int] | None:
        """(n, j) of the longest suffix n-gram seen earlier and where its continuation starts."""
        L = self._synced
        for n in range(min(self.n_max, L - 1), self.n_min - 1, -1):
            j = self._latest.get(_key(tokens, L - n, L))
            if j is not None:
                return n, j
        return None

    def propose(self, tokens: Sequence[int], k: int) -> list[int]:
        """Up to k draft tokens continuing tokens (call sync first); [] when nothing matches."""
        if k < 1:
            return []
        hit = self.lookup(tokens)
        if hit is None:
            return []
        L, j = self._synced, hit[1]
        draft: list[int] = []
        for m in range(k):
            i = j + m
            draft.append(tokens[i] if i < L else draft[i - L])
        return draft
