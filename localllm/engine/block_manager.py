"""KV block ids, reference counts, a hash-chained prefix cache and LRU eviction. Pure Python.

Every block of the paged KV pool is in exactly one of three states:
  used       ref_count > 0 (in one or more block tables; > 1 only for shared cached blocks)
  evictable  ref_count == 0 and cached (holds a key; kept in an LRU until someone needs the room)
  free       ref_count == 0 and not cached

Prefix cache keys. Block i of a sequence gets key_i = sha256(key_{i-1} || token ids of block i as
int64 little-endian), with key_{-1} = sha256(model_id). A key therefore names the whole token
prefix up to the end of its block, for one model. sha256 is collision-resistant, and a hit also
compares the block's stored token ids, so a hit is exact. Only full blocks of computed tokens are
cached, and a cached block is read-only: `is_writable` is False for it.

Duplicates. When `cache_full_blocks` finds that an identical block (same key) is already cached
under another block id, the sequence keeps its own private copy and the index is left alone
(no dedupe): swapping block ids under a running sequence would change which K/V it reads.
The private copy goes back to the free list when released.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from collections.abc import Iterable

from localllm.core import SequenceState


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class BlockManager:
    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        enable_prefix_caching: bool = True,
        model_id: str = "",
    ) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError(
                f"need num_blocks >= 1 and block_size >= 1, got {num_blocks}, {block_size}"
            )
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.model_id = model_id
        self._root = hashlib.sha256(model_id.encode()).digest()
        self._ref = [0] * num_blocks  # per block id
        self._key: list[bytes | None] = [None] * num_blocks
        self._tokens: list[bytes | None] = [None] * num_blocks  # token ids as int64 LE bytes
        self._index: dict[bytes, int] = {}  # key -> block id
        self._free: list[int] = list(range(num_blocks - 1, -1, -1))  # pop() gives low ids first
        self._lru: OrderedDict[int, None] = OrderedDict()  # evictable blocks, oldest first
        self._seq_keys: dict[int, list[bytes]] = {}  # seq_id -> keys of its leading full blocks
        self._num_used = 0
        self.hits = 0  # prompt tokens served from the cache (token-level)
        self.queries = 0  # tokens looked up at admission
        self.evictions = 0

    # ---- counts -------------------------------------------------------------------------------
    @property
    def num_free_blocks(self) -> int:
        """Blocks allocatable now: truly free + cached but unreferenced (evictable)."""
        return len(self._free) + len(self._lru)

    @property
    def num_used_blocks(self) -> int:
        return self._num_used

    @property
    def num_cached_blocks(self) -> int:
        return len(self._index)

    def ref_count(self, block_id: int) -> int:
        return self._ref[block_id]

    def is_cached(self, block_id: int) -> bool:
        return self._key[block_id] is not None

    def cached_tokens(self, block_id: int) -> tuple[int, ...] | None:
        """Token ids a cached block holds (None when not cached)."""
        raw = self._tokens[block_id]
        return None if raw is None else tuple(array("q", raw))

    def is_writable(self, block_id: int) -> bool:
        return self._ref[block_id] == 1 and self._key[block_id] is None

    # ---- prefix cache -------------------------------------------------------------------------
    def _hash(self, parent: bytes, tokens: bytes) -> bytes:
        """The key of a block holding `tokens` (int64 LE bytes) after the block keyed `parent`."""
        return hashlib.sha256(parent + tokens).digest()

    def _blocks(self, seq: SequenceState, first: int, end: int) -> list[bytes]:
        """The token ids of seq's blocks first..end-1 as int64 LE bytes, one conversion for all
        (a 4,000-token prompt's lookup hashes ~250 blocks while its first token waits)."""
        bs = self.block_size
        raw = array("q", seq.token_ids[first * bs : end * bs]).tobytes()
        step = 8 * bs
        return [raw[j : j + step] for j in range(0, len(raw), step)]

    def get_computed_prefix(self, seq: SequenceState) -> list[int]:
        """Longest chain of cached full blocks matching seq.token_ids; never all of them."""
        if not self.enable_prefix_caching:
            return []
        max_blocks = (seq.num_tokens - 1) // self.block_size  # leave >= 1 token to compute
        parent, found = self._root, []
        index, stored, key = self._index, self._tokens, self._hash
        for tokens in self._blocks(seq, 0, max_blocks):
            parent = key(parent, tokens)
            bid = index.get(parent)
            if bid is None or stored[bid] != tokens:
                break
            found.append(bid)
        return found

    def cache_full_blocks(self, seq: SequenceState) -> None:
        """Register each block of seq now full of computed tokens in the prefix cache."""
        if not self.enable_prefix_caching:
            return
        keys = self._seq_keys.setdefault(seq.seq_id, [])
        n_full = min(seq.num_computed // self.block_size, len(seq.block_table))
        parent = keys[-1] if keys else self._root
        for i, tokens in enumerate(self._blocks(seq, len(keys), n_full), len(keys)):
            parent = self._hash(parent, tokens)
            keys.append(parent)
            bid = seq.block_table[i]
            if self._key[bid] is None and parent not in self._index:
                self._key[bid] = parent
                self._tokens[bid] = tokens
                self._index[parent] = bid

    def clear_cache(self) -> None:
        """Drop the keys of all unreferenced cached blocks; they return to the free list."""
        while self._lru:
            bid, _ = self._lru.popitem(last=False)
            self._uncache(bid)
            self._free.append(bid)

    def _uncache(self, bid: int) -> None:
        key = self._key[bid]
        if key is not None and self._index.get(key) == bid:
            del self._index[key]
        self._key[bid] = None
        self._tokens[bid] = None

    # ---- allocation ---------------------------------------------------------------------------
    def _take_new(self) -> int:
        if self._free:
            bid = self._free.pop()
        else:
            bid, _ = self._lru.popitem(last=False)  # least recently released cached block
            self._uncache(bid)
            self.evictions += 1
        self._ref[bid] = 1
        self._num_used += 1
        return bid

    def _check_admission(self, seq: SequenceState, cached: list[int]) -> None:
        if seq.block_table or seq.num_computed:
            raise ValueError(f"computed_blocks are only for a sequence being admitted: {seq}")
        if any(self._key[bid] is None for bid in cached):
            raise ValueError("computed_blocks must come from get_computed_prefix (uncached block)")

    def _release(self, bids: Iterable[int]) -> None:
        """Drop one reference to each block, in order: one loop, not a call per block (a long
        turn ends by releasing ~250 blocks, on the path to its final event)."""
        ref, lru, key, free = self._ref, self._lru, self._key, self._free
        for bid in bids:
            n = ref[bid] - 1
            if n < 0:
                raise RuntimeError(f"block {bid} released more often than taken")
            ref[bid] = n
            if n == 0:
                self._num_used -= 1
                if key[bid] is not None:
                    lru[bid] = None  # most recently released: evicted last
                else:
                    free.append(bid)

    def allocate(
        self, seq: SequenceState, num_new_tokens: int, computed_blocks: list[int] | None = None
    ) -> bool:
        """Make seq.block_table cover seq.num_computed + num_new_tokens tokens.

        computed_blocks (admission only) come from get_computed_prefix: they head the block table
        and set seq.num_computed (and, on a first admission, seq.num_cached_prompt).
        Returns False and changes nothing when the pool is short.
        """
        admitting = computed_blocks is not None
        cached = computed_blocks or []
        if admitting:
            self._check_admission(seq, cached)
        num_computed = len(cached) * self.block_size if admitting else seq.num_computed
        have = len(cached) if admitting else len(seq.block_table)
        need = cdiv(num_computed + num_new_tokens, self.block_size) - have
        revived = sum(1 for bid in cached if self._ref[bid] == 0)  # evictable ones we take back
        if need > self.num_free_blocks - revived:
            return False
        if admitting:
            self._admit(seq, cached, revived)
        for _ in range(need):
            seq.block_table.append(self._take_new())
        return True

    def _admit(self, seq: SequenceState, cached: list[int], revived: int) -> None:
        """revived: how many of `cached` are evictable (unreferenced) now, as `allocate` counted."""
        ref, lru = self._ref, self._lru
        for bid in cached:  # one loop, not a call per block: ~250 before a long turn's first token
            if ref[bid] == 0:
                del lru[bid]
            ref[bid] += 1
        self._num_used += revived
        seq.block_table = list(cached)
        seq.num_computed = len(cached) * self.block_size
        if seq.num_preemptions == 0:  # usage reports what the first admission found cached
            seq.num_cached_prompt = min(seq.num_computed, seq.prompt_len)
        if self.enable_prefix_caching:
            self._seq_keys[seq.seq_id] = [self._key[bid] for bid in cached]  # type: ignore[misc]
            self.queries += seq.num_tokens
            self.hits += seq.num_computed

    def truncate(self, seq: SequenceState, num_tokens: int) -> None:
        """Shrink seq.block_table to what num_tokens need; the blocks past it are released."""
        keep = cdiv(max(num_tokens, 0), self.block_size)
        if len(seq.block_table) > keep:
            self._release(reversed(seq.block_table[keep:]))  # tail first, as before
            del seq.block_table[keep:]
        keys = self._seq_keys.get(seq.seq_id)
        if keys is not None and len(keys) > keep:
            del keys[keep:]

    def free(self, seq: SequenceState) -> None:
        """Release all of seq's blocks, tail first (so a prefix outlives its continuations)."""
        self._release(reversed(seq.block_table))
        seq.block_table = []
        self._seq_keys.pop(seq.seq_id, None)

    def stats(self) -> dict:
        return {
            "used": self.num_used_blocks,
            "free": self.num_free_blocks,
            "cached": self.num_cached_blocks,
            "hits": self.hits,
            "queries": self.queries,
            "hit_rate": self.hits / self.queries if self.queries else 0.0,
            "evictions": self.evictions,
        }
