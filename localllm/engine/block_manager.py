"""KV block ids, reference counts, a prefix cache (a trie of token units), LRU eviction. Pure Python.

Every block of the paged KV pool is in exactly one of three states:
  used       ref_count > 0 (in one or more block tables; > 1 only for shared cached blocks)
  evictable  ref_count == 0 and cached (holds keys; kept in an LRU until someone needs the room)
  free       ref_count == 0 and not cached

Prefix cache keys. The cache is keyed in units of `unit` tokens (config.PREFIX_CACHE_UNIT, or the
block size when that is smaller), so a block of `block_size` tokens holds `block_size // unit`
units. The index is a trie over units: it maps (the node of the prefix before a unit, the unit's
token ids as int64 little-endian bytes) to (the unit's node, block, u), where that block's units
0..u hold the last u + 1 units of the prefix. A node therefore names one whole token prefix up
to the end of its unit; the root (node 0) is the empty prefix of this pool's model. A hit
compares the token ids themselves (dict keys), so it is exact without a hash to trust, and a
lookup costs a dict probe per unit, not a sha256 (BENCHMARKS.md, session 41: the lookup of a
3,900 + 100-token turn 463-752 -> 206-235 us on the sandbox's CPU). Node ids are never reused:
the units cached after a unit that is evicted are no longer reachable, and go when their own
blocks are evicted. Only units of computed tokens are cached; a cached unit is read-only (its
owner may still append past it: `writable_from`).

Hits. A prompt shares every whole block of its cached prefix by reference. When its cached prefix
ends inside a block (it matched that block's first units only), it cannot share that block (it
would write its own tokens after them), so it takes a new block and the leading tokens are copied
into it on the device: a `BlockCopy` the scheduler hands the engine with the step
(`take_copies`), run before the step's forward. So 64-token blocks (decode attention reads one
page number per 64-token tile: kernels/attention) reuse a prefix to the same 16 tokens as
16-token blocks do.

Duplicates. When `cache_computed` finds that a unit is already cached under another block,
the index is left alone (no dedupe): swapping block ids under a running sequence would change which
K/V it reads. The sequence's own copy goes back to the free list when released, unless it holds
later units of its own that are cached.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from localllm.config import PREFIX_CACHE_UNIT
from localllm.core import SequenceState

Key = tuple[int, bytes]  # (node of the prefix before a unit, the unit's token ids)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class PrefixHit:
    """What the prefix cache holds of a sequence's leading tokens (`get_computed_prefix`)."""

    blocks: list[int]  # whole cached blocks, shared by reference at the head of the block table
    num_tokens: int  # tokens served: len(blocks) * block_size + those of `partial`
    partial: int | None = None  # a cached block whose leading tokens come next, to be copied
    nodes: tuple[int, ...] = ()  # the trie nodes of the units served (cache_computed goes on)

    @classmethod
    def none(cls) -> PrefixHit:
        return cls([], 0)

    @property
    def held(self) -> list[int]:
        """The cached blocks the hit takes a reference to: its blocks, then its partial one."""
        return self.blocks if self.partial is None else [*self.blocks, self.partial]


@dataclass(frozen=True)
class BlockCopy:
    """Copy the K/V (and scales) of the first num_tokens slots of block src into block dst."""

    src: int
    dst: int
    num_tokens: int


class BlockManager:
    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        enable_prefix_caching: bool = True,
        cache_unit: int = PREFIX_CACHE_UNIT,
    ) -> None:
        if num_blocks < 1 or block_size < 1 or cache_unit < 1:
            raise ValueError(
                f"need num_blocks, block_size and cache_unit >= 1, got {num_blocks}, "
                f"{block_size}, {cache_unit}"
            )
        self.unit = min(cache_unit, block_size)
        if block_size % self.unit:
            raise ValueError(
                f"block_size {block_size} is not a multiple of cache_unit {cache_unit}"
            )
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.units_per_block = block_size // self.unit
        self.enable_prefix_caching = enable_prefix_caching
        self._ref = [0] * num_blocks  # per block id
        self._keys: list[dict[int, Key] | None] = [None] * num_blocks  # unit -> its index key
        self._tokens: list[bytes | None] = [None] * num_blocks  # the block's leading token ids
        self._index: dict[Key, tuple[int, int, int]] = {}  # -> (node, block id, unit in block)
        self._next_node = 1  # node 0: the empty prefix
        self._free: list[int] = list(range(num_blocks - 1, -1, -1))  # pop() gives low ids first
        self._lru: OrderedDict[int, None] = OrderedDict()  # evictable blocks, oldest first
        self._seq_nodes: dict[int, list[int]] = {}  # seq_id -> trie nodes of its leading units
        self._copies: list[BlockCopy] = []  # made by admissions, until take_copies()
        self._num_used = 0
        self._num_cached = 0
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
        """Blocks holding at least one cached unit."""
        return self._num_cached

    def ref_count(self, block_id: int) -> int:
        return self._ref[block_id]

    @property
    def copies_slots(self) -> bool:
        """Whether a hit can end inside a block, so admissions may hand out copies
        (take_copies)."""
        return self.enable_prefix_caching and self.units_per_block > 1

    def is_cached(self, block_id: int) -> bool:
        return self._keys[block_id] is not None

    def cached_tokens(self, block_id: int) -> tuple[int, ...] | None:
        """Token ids of a cached block's leading units, through its last cached one (None when
        not cached)."""
        raw = self._tokens[block_id]
        return None if raw is None else tuple(array("q", raw))

    def writable_from(self, block_id: int) -> int:
        """The first slot of the block its one owner may write: past its cached units. A block
        with more than one reference is read-only (block_size)."""
        if self._ref[block_id] != 1:
            return self.block_size
        keys = self._keys[block_id]
        return (max(keys) + 1) * self.unit if keys else 0

    # ---- prefix cache -------------------------------------------------------------------------
    def get_computed_prefix(self, seq: SequenceState) -> PrefixHit:
        """The longest cached prefix of seq.token_ids, in whole units; never all of its tokens.
        A 4,000-token prompt's lookup probes ~250 units while its first token waits: the ids
        become bytes once."""
        if not self.enable_prefix_caching:
            return PrefixHit.none()
        unit, upb = self.unit, self.units_per_block
        n_units = (seq.num_tokens - 1) // unit  # leave >= 1 token to compute
        raw = array("q", seq.token_ids[: n_units * unit]).tobytes()
        step = 8 * unit
        node, blocks, partial, nodes = 0, [], None, []
        index = self._index
        for j in range(n_units):
            hit = index.get((node, raw[j * step : (j + 1) * step]))
            if hit is None:
                break
            node, bid, u = hit
            nodes.append(node)
            partial = None if u == upb - 1 else bid
            if partial is None:
                blocks.append(bid)
        return PrefixHit(blocks, len(nodes) * unit, partial, tuple(nodes))

    def cache_computed(self, seq: SequenceState) -> None:
        """Register each unit of seq's computed tokens not yet cached, the last block's too."""
        if not self.enable_prefix_caching:
            return
        unit, upb = self.unit, self.units_per_block
        nodes = self._seq_nodes.setdefault(seq.seq_id, [])
        done = len(nodes)
        n_units = min(seq.num_computed // unit, len(seq.block_table) * upb)
        if n_units <= done:
            return
        base = done - done % upb  # the first unit of the first block touched
        raw = array("q", seq.token_ids[base * unit : n_units * unit]).tobytes()
        step = 8 * unit
        node = nodes[-1] if nodes else 0
        index, blk_keys, stored = self._index, self._keys, self._tokens
        for j in range(done, n_units):
            key = (node, raw[(j - base) * step : (j - base + 1) * step])
            hit = index.get(key)
            if hit is not None:  # cached already, maybe under another block: left there
                node = hit[0]
                nodes.append(node)
                continue
            node, self._next_node = self._next_node, self._next_node + 1
            nodes.append(node)
            i, u = divmod(j, upb)
            bid = seq.block_table[i]
            have = blk_keys[bid]
            if have is None:
                have = blk_keys[bid] = {}
                self._num_cached += 1
            have[u] = key
            index[key] = (node, bid, u)
            first = (i * upb - base) * step
            stored[bid] = raw[first : (j - base + 1) * step]

    def clear_cache(self) -> None:
        """Drop the keys of all unreferenced cached blocks; they return to the free list."""
        while self._lru:
            bid, _ = self._lru.popitem(last=False)
            self._uncache(bid)
            self._free.append(bid)

    def _uncache(self, bid: int) -> None:
        keys = self._keys[bid]
        if keys is None:
            return
        for u, key in keys.items():
            hit = self._index.get(key)
            if hit is not None and hit[1:] == (bid, u):
                del self._index[key]
        self._keys[bid] = None
        self._tokens[bid] = None
        self._num_cached -= 1

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

    def _check_admission(self, seq: SequenceState, hit: PrefixHit) -> None:
        if seq.block_table or seq.num_computed:
            raise ValueError(f"a prefix hit is only for a sequence being admitted: {seq}")
        if any(self._keys[bid] is None for bid in hit.held):
            raise ValueError("a prefix hit must come from get_computed_prefix (uncached block)")

    def _release(self, bids: Iterable[int]) -> None:
        """Drop one reference to each block, in order: one loop, not a call per block (a long
        turn ends by releasing ~250 blocks, on the path to its final event)."""
        ref, lru, keys, free = self._ref, self._lru, self._keys, self._free
        for bid in bids:
            n = ref[bid] - 1
            if n < 0:
                raise RuntimeError(f"block {bid} released more often than taken")
            ref[bid] = n
            if n == 0:
                self._num_used -= 1
                if keys[bid] is not None:
                    lru[bid] = None  # most recently released: evicted last
                else:
                    free.append(bid)

    def allocate(
        self, seq: SequenceState, num_new_tokens: int, hit: PrefixHit | None = None
    ) -> bool:
        """Make seq.block_table cover seq.num_computed + num_new_tokens tokens.

        hit (admission only) comes from get_computed_prefix: its blocks head the block table,
        its partial block's leading tokens are copied into the next one (take_copies), and it
        sets seq.num_computed (and, on a first admission, seq.num_cached_prompt).
        Returns False and changes nothing when the pool is short.
        """
        if hit is not None:
            self._check_admission(seq, hit)
            num_computed, have, held = hit.num_tokens, len(hit.blocks), hit.held
        else:
            num_computed, have, held = seq.num_computed, len(seq.block_table), []
        need = cdiv(num_computed + num_new_tokens, self.block_size) - have
        revived = sum(1 for bid in held if self._ref[bid] == 0)  # evictable ones we take back
        if need > self.num_free_blocks - revived:
            return False
        if hit is not None:
            self._admit(seq, hit, held, revived)
        for _ in range(need):
            seq.block_table.append(self._take_new())
        if hit is not None and hit.partial is not None:  # its leading slots go to the next block
            copy = BlockCopy(hit.partial, seq.block_table[have], num_computed % self.block_size)
            self._copies.append(copy)
        return True

    def _admit(self, seq: SequenceState, hit: PrefixHit, held: list[int], revived: int) -> None:
        """held: hit's blocks, then its partial block (referenced until its copy is taken);
        revived: how many of them are evictable (unreferenced) now, as `allocate` counted."""
        ref, lru = self._ref, self._lru
        for bid in held:  # one loop, not a call per block: ~250 before a long turn's first token
            if ref[bid] == 0:
                del lru[bid]
            ref[bid] += 1
        self._num_used += revived
        seq.block_table = list(hit.blocks)
        seq.num_computed = hit.num_tokens
        if seq.num_preemptions == 0:  # usage reports what the first admission found cached
            seq.num_cached_prompt = min(seq.num_computed, seq.prompt_len)
        if self.enable_prefix_caching:
            self._seq_nodes[seq.seq_id] = list(hit.nodes)
            self.queries += seq.num_tokens
            self.hits += seq.num_computed

    def take_copies(self) -> list[BlockCopy]:
        """The copies this scheduling pass's admissions need, in order; run them on the device
        before the step's forward. Their source blocks lose the reference that kept them from
        being evicted during the pass: any later writer of a source runs after the copy."""
        copies, self._copies = self._copies, []
        self._release(c.src for c in copies)
        return copies

    def truncate(self, seq: SequenceState, num_tokens: int) -> None:
        """Shrink seq.block_table to what num_tokens need; the blocks past it are released."""
        keep = cdiv(max(num_tokens, 0), self.block_size)
        if len(seq.block_table) > keep:
            self._release(reversed(seq.block_table[keep:]))  # tail first, as before
            del seq.block_table[keep:]
        nodes = self._seq_nodes.get(seq.seq_id)
        if nodes is not None and len(nodes) > num_tokens // self.unit:
            del nodes[num_tokens // self.unit :]

    def free(self, seq: SequenceState) -> None:
        """Release all of seq's blocks, tail first (so a prefix outlives its continuations)."""
        self._release(reversed(seq.block_table))
        seq.block_table = []
        self._seq_nodes.pop(seq.seq_id, None)

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
