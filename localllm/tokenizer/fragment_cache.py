"""The token ids of long raw-text fragments, kept for the next request that sends them again.

A chat turn re-sends every earlier message, and an agent or editor plugin re-sends the same long
system prompt (and tool list) with each request. `Tokenizer.encode` cuts the text at special
tokens first, so each message is a fragment of its own whose ids do not depend on the text
around it. With a byte-level BPE vocabulary encoding them again costs nearly as much as the
engine's whole turn after a prefix-cache hit (this sandbox's CPU: a 4,207-token ChatML
conversation in 8.6-8.9 ms with SmolLM2's vocabulary, against ~12.5 ms for an 8B model's cached
3,900 + 100-token turn on an H200); SentencePiece's engine caches its own segments, so there a
repeat is cheap already. A least-recently-used map from (fragment, space prefix) to its ids;
fragments shorter than `min_chars` are not kept (cheap to encode, and they would churn the map).
Thread-safe: the server encodes on its request threads.
"""

from __future__ import annotations

import threading
from array import array
from collections import OrderedDict

# fragments of at least this many characters are kept
FRAGMENT_CACHE_MIN_CHARS = 256
# the most characters of fragments kept per tokenizer (with their ids as int64: ~3-6 bytes a
# character, 12-24 MB)
FRAGMENT_CACHE_CHARS = 1 << 22


class FragmentCache:
    def __init__(
        self, min_chars: int = FRAGMENT_CACHE_MIN_CHARS, max_chars: int = FRAGMENT_CACHE_CHARS
    ) -> None:
        self.min_chars = min_chars
        self.max_chars = max_chars
        self._ids: OrderedDict[tuple[str, bool], array[int]] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()
        self.hits = 0

    def get(self, text: str, add_space: bool) -> array[int] | None:
        if len(text) < self.min_chars:
            return None
        with self._lock:
            ids = self._ids.get((text, add_space))
            if ids is not None:
                self._ids.move_to_end((text, add_space))
                self.hits += 1
            return ids

    def put(self, text: str, add_space: bool, ids: list[int]) -> None:
        if not self.min_chars <= len(text) <= self.max_chars:
            return
        with self._lock:
            key = (text, add_space)
            if key in self._ids:
                return
            self._ids[key] = array("q", ids)
            self._chars += len(text)
            while self._chars > self.max_chars:
                (old, _), _ = self._ids.popitem(last=False)
                self._chars -= len(old)

    def __len__(self) -> int:
        return len(self._ids)
