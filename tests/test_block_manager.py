"""Block manager: unit tests of the prefix cache and a hypothesis state machine over its invariants."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from localllm.core import SamplingParams, SequenceState
from localllm.engine.block_manager import BlockCopy, BlockManager, PrefixHit

BS = 4


def make_seq(tokens: list[int], rid: str = "r") -> SequenceState:
    return SequenceState(rid, list(tokens), SamplingParams(max_tokens=16))


def run_prefill(bm: BlockManager, seq: SequenceState) -> bool:
    """Admit seq with its prefix hit and compute the whole rest in one step."""
    hit = bm.get_computed_prefix(seq)
    if not bm.allocate(seq, seq.num_tokens - hit.num_tokens, hit):
        return False
    seq.num_computed = seq.num_tokens
    bm.cache_computed(seq)
    return True


def test_importing_does_not_import_torch() -> None:
    code = (
        "import sys, localllm.engine.block_manager, localllm.engine.scheduler\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_miss_then_hit_shares_blocks() -> None:
    bm = BlockManager(16, BS)
    a = make_seq(list(range(10)))  # 2 full blocks + 2 tokens
    assert bm.get_computed_prefix(a).blocks == []
    assert run_prefill(bm, a)
    assert bm.num_cached_blocks == 2
    b = make_seq(list(range(8)) + [99, 98, 97])
    hit = bm.get_computed_prefix(b)
    assert hit.blocks == a.block_table[:2] and hit.num_tokens == 8 and hit.partial is None
    assert bm.allocate(b, 3, hit)
    assert bm.take_copies() == []
    assert b.num_computed == 8 and b.num_cached_prompt == 8
    assert b.block_table[:2] == a.block_table[:2]
    assert all(bm.ref_count(x) == 2 for x in hit.blocks)
    assert all(bm.writable_from(x) == BS for x in hit.blocks)
    assert bm.writable_from(b.block_table[2]) == 0
    assert bm.stats()["hits"] == 8 and bm.stats()["queries"] == 10 + 11


def test_prefix_never_covers_whole_sequence() -> None:
    bm = BlockManager(16, BS)
    a = make_seq(list(range(8)))  # exactly 2 full blocks
    assert run_prefill(bm, a)
    assert bm.num_cached_blocks == 2
    again = make_seq(list(range(8)))
    assert bm.get_computed_prefix(again).blocks == a.block_table[:1]  # last block recomputed
    longer = make_seq(list(range(9)))
    assert bm.get_computed_prefix(longer).blocks == a.block_table[:2]


def test_hit_needs_the_same_whole_prefix() -> None:
    bm = BlockManager(16, BS)
    a = make_seq([1, 2, 3, 4, 5, 6, 7, 8, 9])
    assert run_prefill(bm, a)
    # same second block after a different first block: a unit is keyed by the prefix before it
    assert bm.get_computed_prefix(make_seq([0, 2, 3, 4, 5, 6, 7, 8, 9])).num_tokens == 0
    assert bm.get_computed_prefix(make_seq([1, 2, 3, 4, 5, 6, 7, 9, 9])).blocks == a.block_table[:1]
    # the ids are compared as int64, not truncated: 2**40 + 1 is not 1
    assert bm.get_computed_prefix(make_seq([2**40 + 1, 2, 3, 4, 5])).num_tokens == 0


def test_units_after_an_evicted_unit_are_unreachable_then_dropped() -> None:
    bm = BlockManager(3, BS)
    a = make_seq(list(range(12)))  # 3 blocks, all cached
    assert run_prefill(bm, a)
    head = a.block_table[0]
    bm.free(a)  # released tail first: the head is the most recent in the LRU
    bm._lru.move_to_end(head, last=False)  # make the head the next victim
    b = make_seq([50, 51])
    assert bm.allocate(b, 2, PrefixHit.none())  # evicts the head block
    assert bm.get_computed_prefix(make_seq(list(range(13)))).num_tokens == 0
    assert bm.num_cached_blocks == 2  # its children stay until their own blocks go
    bm.clear_cache()
    assert bm.num_cached_blocks == 0 and not bm._index


def test_disabled_prefix_caching_caches_nothing() -> None:
    bm = BlockManager(8, BS, enable_prefix_caching=False)
    a = make_seq(list(range(9)))
    assert run_prefill(bm, a)
    assert bm.num_cached_blocks == 0
    assert bm.get_computed_prefix(make_seq(list(range(9)))) == PrefixHit.none()
    bm.free(a)
    assert bm.num_free_blocks == 8 and bm.num_used_blocks == 0


def test_allocate_failure_changes_nothing() -> None:
    bm = BlockManager(4, BS)
    a = make_seq(list(range(9)))
    assert run_prefill(bm, a)  # 3 blocks, 2 cached
    bm.free(a)
    b = make_seq(list(range(8)) + [50] * 10)  # hit 2 evictable blocks, needs 3 more: 5 > 4
    hit = bm.get_computed_prefix(b)
    assert len(hit.blocks) == 2
    before = (bm.num_free_blocks, bm.num_cached_blocks, bm.stats())
    assert not bm.allocate(b, 10, hit)
    assert (bm.num_free_blocks, bm.num_cached_blocks, bm.stats()) == before
    assert b.block_table == [] and b.num_computed == 0
    assert bm.allocate(b, 8, hit)  # 2 hit + 2 new blocks fit
    assert bm.num_free_blocks == 0


def test_free_sends_cached_to_lru_and_uncached_to_free_list() -> None:
    bm = BlockManager(8, BS)
    a = make_seq(list(range(6)))
    assert run_prefill(bm, a)  # block 0 cached, block 1 partial
    assert bm.num_used_blocks == 2 and bm.num_free_blocks == 6
    bm.free(a)
    assert a.block_table == []
    assert bm.num_used_blocks == 0 and bm.num_free_blocks == 8 and bm.num_cached_blocks == 1
    bm.clear_cache()
    assert bm.num_cached_blocks == 0 and len(bm._free) == 8


def test_eviction_takes_free_blocks_first_then_lru_order() -> None:
    bm = BlockManager(4, BS)
    a, b = make_seq([1] * 5), make_seq([2] * 5)
    assert run_prefill(bm, a) and run_prefill(bm, b)  # each: 1 cached block + 1 partial
    cached_a, cached_b = a.block_table[0], b.block_table[0]
    bm.free(a)  # a's cached block released first: least recently used
    bm.free(b)
    c = make_seq([3] * 3)
    assert bm.allocate(c, 3, bm.get_computed_prefix(c))
    assert bm.stats()["evictions"] == 0  # a truly free block was available
    d = make_seq([4] * 3)
    assert bm.allocate(d, 3, bm.get_computed_prefix(d))
    e = make_seq([5] * 3)
    assert bm.allocate(e, 3, bm.get_computed_prefix(e))
    assert bm.stats()["evictions"] == 1
    assert e.block_table == [cached_a]  # LRU victim
    assert bm.get_computed_prefix(make_seq([1] * 5)).blocks == []
    assert bm.get_computed_prefix(make_seq([2] * 5)).blocks == [cached_b]


def test_hit_refreshes_nothing_until_released_again() -> None:
    bm = BlockManager(3, BS)
    a, b = make_seq([1] * 5), make_seq([2] * 5)
    assert run_prefill(bm, a)
    bm.free(a)
    assert run_prefill(bm, b)
    bm.free(b)  # LRU now: a's block (older), b's block
    a2 = make_seq([1] * 5)
    assert run_prefill(bm, a2)  # takes a's cached block back, then frees -> most recent
    bm.free(a2)
    big = make_seq([7] * 8)
    assert bm.allocate(big, 8, PrefixHit.none())  # 2 blocks: free one, evict LRU = b's block
    assert bm.get_computed_prefix(make_seq([2] * 5)).blocks == []
    assert len(bm.get_computed_prefix(make_seq([1] * 5)).blocks) == 1


def test_free_releases_tail_first_so_prefixes_survive_eviction() -> None:
    bm = BlockManager(3, BS)
    a = make_seq(list(range(12)))
    assert run_prefill(bm, a) and bm.num_cached_blocks == 3
    head = a.block_table[:2]
    bm.free(a)
    b = make_seq([40, 41])
    assert bm.allocate(b, 2, PrefixHit.none())  # evicts one block: a's last
    assert bm.get_computed_prefix(make_seq(list(range(13)))).blocks == head


def test_duplicate_block_is_not_indexed_twice() -> None:
    bm = BlockManager(8, BS)
    a, b = make_seq([1, 2, 3, 4, 5]), make_seq([1, 2, 3, 4, 6])
    none = PrefixHit.none()
    assert bm.allocate(a, 5, none) and bm.allocate(b, 5, none)  # both computed without a hit
    for s in (a, b):
        s.num_computed = 5
        bm.cache_computed(s)
    assert bm.num_cached_blocks == 1
    assert bm.is_cached(a.block_table[0]) and not bm.is_cached(b.block_table[0])
    bm.free(b)
    assert bm.num_cached_blocks == 1 and bm.num_free_blocks == 6


def test_truncate_releases_tail_blocks() -> None:
    bm = BlockManager(8, BS)
    a = make_seq([1, 2, 3])
    assert bm.allocate(a, 3, PrefixHit.none())
    a.num_computed = 3
    assert bm.allocate(a, 1 + 6)  # decode with 6 draft slots: positions 3..9 -> 3 blocks
    assert len(a.block_table) == 3
    a.token_ids += [7, 8]
    a.num_computed = 4
    bm.truncate(a, a.num_tokens)  # 5 tokens -> 2 blocks
    assert len(a.block_table) == 2 and bm.num_used_blocks == 2


def test_computed_blocks_only_for_admission() -> None:
    bm = BlockManager(8, BS)
    a = make_seq(list(range(9)))
    assert run_prefill(bm, a)
    with pytest.raises(ValueError):
        bm.allocate(a, 1, PrefixHit.none())


# ---- prefix hits that end inside a block --------------------------------------------------------


def test_hit_inside_a_block_copies_its_leading_units() -> None:
    bm = BlockManager(16, 8, cache_unit=2)  # 4 units a block
    a = make_seq(list(range(20)))  # blocks 0-7, 8-15, then 16..19 in a third
    assert run_prefill(bm, a)
    assert bm.num_cached_blocks == 3  # the last block's two whole units are cached too
    b = make_seq(list(range(13)) + [99, 98])  # matches 8 + 4 tokens (12 is in an odd unit)
    hit = bm.get_computed_prefix(b)
    assert hit.blocks == a.block_table[:1] and hit.partial == a.block_table[1]
    assert hit.num_tokens == 12 and len(hit.nodes) == 6
    assert bm.allocate(b, 3, hit)
    assert b.num_computed == 12 and b.num_cached_prompt == 12
    assert b.block_table[0] == a.block_table[0] and b.block_table[1] != a.block_table[1]
    assert bm.ref_count(a.block_table[1]) == 2  # held for its copy
    assert bm.writable_from(b.block_table[1]) == 0  # its own: nothing of it is cached yet
    assert bm.take_copies() == [BlockCopy(a.block_table[1], b.block_table[1], 4)]
    assert bm.ref_count(a.block_table[1]) == 1 and bm.take_copies() == []
    assert bm.stats()["hits"] == 12
    b.num_computed = b.num_tokens
    bm.cache_computed(b)  # units 12-13 of b's second block are new: cached under it
    assert bm.cached_tokens(b.block_table[1]) == tuple(range(8, 13)) + (99,)
    assert bm.writable_from(b.block_table[1]) == 6
    c = make_seq(list(range(13)) + [99, 98, 97, 96])
    assert bm.get_computed_prefix(c).partial == b.block_table[1]
    assert bm.get_computed_prefix(c).num_tokens == 14


def test_partial_source_is_not_evicted_before_its_copy_is_taken() -> None:
    bm = BlockManager(4, 8, cache_unit=4)
    a = make_seq(list(range(12)))  # block 0 whole, block 1 holds one cached unit (8..11)
    assert run_prefill(bm, a)
    head, src = a.block_table
    bm.free(a)
    assert bm.num_free_blocks == 4
    b = make_seq(list(range(12)) + [7])
    hit = bm.get_computed_prefix(b)
    assert hit.blocks == [head] and hit.partial == src and hit.num_tokens == 12
    assert bm.allocate(b, 1, hit)  # shares block 0, holds src, takes a new block for 8..12
    assert bm.num_free_blocks == 1
    other = make_seq([50] * 9)
    assert not bm.allocate(other, 9, PrefixHit.none())  # 2 blocks: src may not be evicted
    copies = bm.take_copies()
    assert copies == [BlockCopy(src, b.block_table[1], 4)]
    assert bm.num_free_blocks == 2 and bm.allocate(other, 9, PrefixHit.none())
    assert bm.stats()["evictions"] == 1 and src in other.block_table


def test_allocate_failure_with_a_partial_hit_changes_nothing() -> None:
    bm = BlockManager(3, 8, cache_unit=4)
    a = make_seq(list(range(12)))
    assert run_prefill(bm, a)
    bm.free(a)
    b = make_seq(list(range(12)) + [5] * 20)
    hit = bm.get_computed_prefix(b)
    before = (bm.num_free_blocks, bm.stats(), [bm.ref_count(i) for i in range(3)])
    assert not bm.allocate(b, 20, hit)  # 1 shared + src held + 3 new > 3
    assert (bm.num_free_blocks, bm.stats(), [bm.ref_count(i) for i in range(3)]) == before
    assert bm.take_copies() == [] and b.block_table == []


def test_a_unit_is_a_divisor_of_the_block() -> None:
    with pytest.raises(ValueError):
        BlockManager(4, 8, cache_unit=3)
    assert BlockManager(4, 8, cache_unit=16).unit == 8  # never more than a block


# ---- stateful property test -------------------------------------------------------------------

NUM_BLOCKS = 10
# a tiny alphabet and a few common prefixes, so that prefixes (and hashes' inputs) collide often
PREFIXES = [[], [0, 1, 0, 1], [0, 1, 0, 1, 1, 1, 0, 0], [1] * 8, [0] * 12]
tokens_st = st.builds(
    lambda head, tail: (head + tail) or [0],
    st.sampled_from(PREFIXES),
    st.lists(st.integers(0, 1), max_size=10),
)


class BlockManagerMachine(RuleBasedStateMachine):
    """Drives a BlockManager like an engine would, with a shadow KV pool that records which token
    each slot holds (copies applied when taken, before the step writes). Every computed position
    must read back its own token."""

    UNIT = BS  # tokens per prefix-cache key

    def __init__(self) -> None:
        super().__init__()
        self.bm = BlockManager(NUM_BLOCKS, BS, cache_unit=self.UNIT)
        self.seqs: list[SequenceState] = []
        self.kv: dict[int, list[int | None]] = {b: [None] * BS for b in range(NUM_BLOCKS)}

    def _copy(self) -> None:
        for c in self.bm.take_copies():
            assert 0 < c.num_tokens < BS
            self.kv[c.dst][: c.num_tokens] = self.kv[c.src][: c.num_tokens]

    def _write(self, seq: SequenceState, tokens: list[int]) -> None:
        """Write K/V for tokens at positions num_computed.. (slots must be writable)."""
        for i, tok in enumerate(tokens):
            pos = seq.num_computed + i
            block = seq.block_table[pos // BS]
            assert pos % BS >= self.bm.writable_from(block), f"slot {pos} of {seq} is read-only"
            self.kv[block][pos % BS] = tok

    @rule(tokens=tokens_st, chunk=st.integers(1, 14), sampled=st.integers(0, 1))
    def admit(self, tokens: list[int], chunk: int, sampled: int) -> None:
        seq = make_seq(tokens)
        hit = self.bm.get_computed_prefix(seq)
        assert hit.num_tokens < seq.num_tokens and hit.num_tokens % self.bm.unit == 0
        assert hit.num_tokens == len(hit.blocks) * BS + (hit.num_tokens % BS)
        assert (hit.partial is None) == (hit.num_tokens % BS == 0)
        for i, block in enumerate(hit.blocks):
            assert self.kv[block] == tokens[i * BS : (i + 1) * BS]
        if hit.partial is not None:
            r, first = hit.num_tokens % BS, len(hit.blocks) * BS
            assert self.kv[hit.partial][:r] == tokens[first : first + r]
        n = min(chunk, seq.num_tokens - hit.num_tokens)
        free_before = self.bm.num_free_blocks
        if not self.bm.allocate(seq, n, hit):
            assert seq.block_table == [] and self.bm.num_free_blocks == free_before
            assert self.bm.take_copies() == []
            return
        assert seq.num_computed == hit.num_tokens
        self._copy()
        self._write(seq, seq.token_ids[seq.num_computed : seq.num_computed + n])
        seq.num_computed += n
        if seq.num_computed == seq.num_tokens:
            seq.token_ids.append(sampled)
        self.bm.cache_computed(seq)
        self.seqs.append(seq)

    @precondition(lambda self: self.seqs)
    @rule(data=st.data(), chunk=st.integers(1, 9), drafts=st.lists(st.integers(0, 1), max_size=5))
    def step(self, data: st.DataObject, chunk: int, drafts: list[int]) -> None:
        seq = data.draw(st.sampled_from(self.seqs))
        if seq.num_computed < seq.num_tokens:  # prefill chunk, or a decode with drafts
            n = min(chunk, seq.num_tokens - seq.num_computed)
            if seq.num_computed + n < seq.num_tokens:
                drafts = []
            if not self.bm.allocate(seq, n + len(drafts)):
                return
            self._write(seq, seq.token_ids[seq.num_computed : seq.num_computed + n] + drafts)
            seq.num_computed += n
            if seq.num_computed == seq.num_tokens:  # logits: accept a drafts + one new token
                a = data.draw(st.integers(0, len(drafts)))
                seq.token_ids += drafts[:a] + [data.draw(st.integers(0, 1))]
                seq.num_computed += a
                self.bm.truncate(seq, seq.num_tokens)
        self.bm.cache_computed(seq)

    @precondition(lambda self: self.seqs)
    @rule(data=st.data())
    def free(self, data: st.DataObject) -> None:
        seq = data.draw(st.sampled_from(self.seqs))
        self.seqs.remove(seq)
        self.bm.free(seq)

    @rule()
    def clear_cache(self) -> None:
        self.bm.clear_cache()
        referenced = [b for b in range(NUM_BLOCKS) if self.bm.ref_count(b) > 0]
        assert self.bm.num_cached_blocks == sum(self.bm.is_cached(b) for b in referenced)

    @rule()
    def free_all(self) -> None:
        for seq in self.seqs:
            self.bm.free(seq)
        self.seqs = []
        assert self.bm.num_used_blocks == 0
        assert self.bm.num_free_blocks == NUM_BLOCKS  # every block free or evictable
        self.bm.clear_cache()
        assert len(self.bm._free) == NUM_BLOCKS and self.bm.num_cached_blocks == 0
        assert not self.bm._index

    @invariant()
    def ref_counts_match_block_tables(self) -> None:
        counts = [0] * NUM_BLOCKS
        for seq in self.seqs:
            for block in seq.block_table:
                counts[block] += 1
        for b in range(NUM_BLOCKS):
            assert self.bm.ref_count(b) == counts[b] >= 0
            if counts[b] > 1:
                assert self.bm.writable_from(b) == BS, "a shared block is read-only"
                assert self.bm.is_cached(b), "only cached blocks may be shared"
        assert self.bm.num_used_blocks == sum(c > 0 for c in counts)
        assert self.bm.num_used_blocks + self.bm.num_free_blocks == NUM_BLOCKS

    @invariant()
    def computed_positions_hold_their_tokens(self) -> None:
        for seq in self.seqs:
            assert len(seq.block_table) * BS >= seq.num_computed
            for pos in range(seq.num_computed):
                assert self.kv[seq.block_table[pos // BS]][pos % BS] == seq.token_ids[pos]

    @invariant()
    def cached_blocks_hold_their_chain_tokens(self) -> None:
        for b in range(NUM_BLOCKS):
            toks = self.bm.cached_tokens(b)
            if toks is not None:
                assert 0 < len(toks) <= BS and len(toks) % self.bm.unit == 0
                assert self.kv[b][: len(toks)] == list(toks)


class UnitMachine(BlockManagerMachine):
    """Two-token keys in four-token blocks: hits that end inside a block, and their copies."""

    UNIT = 2


_settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
BlockManagerMachine.TestCase.settings = _settings
UnitMachine.TestCase.settings = _settings
TestBlockManagerMachine = BlockManagerMachine.TestCase
TestUnitMachine = UnitMachine.TestCase
