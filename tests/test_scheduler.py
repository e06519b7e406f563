"""Scheduler: token budget, chunked prefill, admission, preemption and speculative updates, driven
by a fake deterministic "model" that also checks the K/V it is asked to read was written."""

from __future__ import annotations

import pytest

from localllm.core import SamplingParams, SeqStatus, SequenceState
from localllm.engine.block_manager import BlockManager, cdiv
from localllm.engine.scheduler import ScheduledBatch, Scheduler, SchedulerConfig
from localllm.errors import RequestError

BS = 4


def next_token(context: list[int]) -> int:
    """The fake model's greedy choice: a deterministic function of the whole context."""
    return (sum(context) * 31 + len(context) * 7) % 97


def reference(prompt: list[int], n: int) -> list[int]:
    ids = list(prompt)
    for _ in range(n):
        ids.append(next_token(ids))
    return ids


class FakeEngine:
    """Schedules, "runs" a forward over a shadow paged KV pool, verifies drafts greedily."""

    def __init__(self, sched: Scheduler, proposer=None) -> None:
        self.sched = sched
        self.proposer = proposer  # (seq) -> list[int] of drafts, or None
        self.kv: dict[int, list[int | None]] = {}  # block -> token whose K/V each slot holds
        self.batches: list[ScheduledBatch] = []

    def forward(self, batch: ScheduledBatch) -> dict[int, list[int]]:
        accepted: dict[int, list[int]] = {}
        for c in batch.kv_copies:  # before the forward, as the runner does
            self.kv[c.dst] = self.kv[c.src][: c.num_tokens] + [None] * (BS - c.num_tokens)
        for item in batch.items:
            seq, table = item.seq, item.seq.block_table
            for pos in range(item.start):  # the cached/computed context must hold the right ids
                assert self.kv[table[pos // BS]][pos % BS] == seq.token_ids[pos], (seq, pos)
            for i, tok in enumerate(item.token_ids):
                pos = item.start + i
                assert pos % BS >= self.sched.block_manager.writable_from(table[pos // BS])
                self.kv.setdefault(table[pos // BS], [None] * BS)[pos % BS] = tok
            if not item.needs_logits:
                accepted[seq.seq_id] = []
                continue
            ctx, out = list(seq.token_ids), []
            for d in item.draft_ids:
                if d != next_token(ctx):
                    break
                out.append(d)
                ctx.append(d)
            accepted[seq.seq_id] = out + [next_token(ctx)]
        return accepted

    def step(self) -> ScheduledBatch:
        if self.proposer is not None:
            for seq in self.sched.running:
                if not seq.in_prefill:
                    seq.draft_ids = self.proposer(seq)
        batch = self.sched.schedule()
        self.batches.append(batch)
        assert not {id(s) for s in batch.preempted} & {id(it.seq) for it in batch.items}
        self.sched.update(batch, self.forward(batch))
        for item in batch.items:
            seq = item.seq
            if seq.num_output >= seq.params.max_tokens:
                del seq.token_ids[seq.prompt_len + seq.params.max_tokens :]
                self.sched.finish(seq, "length")
        return batch

    def run(self, max_steps: int = 1000) -> None:
        for _ in range(max_steps):
            if not self.sched.has_unfinished():
                return
            self.step()
        raise AssertionError("scheduler did not finish")


def make(num_blocks: int = 64, unit: int = BS, **cfg) -> Scheduler:
    return Scheduler(SchedulerConfig(**cfg), BlockManager(num_blocks, BS, cache_unit=unit))


def make_seq(prompt: list[int], max_tokens: int = 8, rid: str = "r") -> SequenceState:
    return SequenceState(rid, list(prompt), SamplingParams(max_tokens=max_tokens, temperature=0.0))


def prompt_of(n: int, salt: int = 0) -> list[int]:
    return [(i * 13 + salt) % 50 for i in range(n)]


def test_budget_respected_and_outputs_match_reference() -> None:
    sched = make(max_num_batched_tokens=16, max_num_seqs=8)
    seqs = [make_seq(prompt_of(5 + 7 * i, i), max_tokens=6, rid=f"r{i}") for i in range(6)]
    for s in seqs:
        sched.add(s)
    eng = FakeEngine(sched)
    eng.run()
    assert all(b.num_tokens <= 16 for b in eng.batches)
    for s in seqs:
        assert s.token_ids == reference(s.token_ids[: s.prompt_len], 6)
        assert s.finish_reason == "length" and s.block_table == []
    assert sched.block_manager.num_used_blocks == 0


def test_chunked_prefill_interleaves_with_decodes_and_decodes_come_first() -> None:
    sched = make(max_num_batched_tokens=8)
    short = make_seq(prompt_of(3), max_tokens=20, rid="short")
    sched.add(short)
    eng = FakeEngine(sched)
    eng.step()  # short's prefill
    long = make_seq(prompt_of(30, 1), max_tokens=2, rid="long")
    sched.add(long)
    chunks = []
    while long.in_prefill or long.num_computed == 0:
        batch = eng.step()
        kinds = [(it.seq.request_id, it.is_decode) for it in batch.items]
        assert kinds[0] == ("short", True), kinds  # the decode is never starved
        assert batch.num_decode == 1 and batch.num_prefill == 1
        item = batch.items[1]
        chunks.append(item.num_tokens)
        assert item.needs_logits == (item.start + item.num_tokens == long.prompt_len)
    assert chunks == [7, 7, 7, 7, 2]
    eng.run()
    assert long.token_ids == reference(long.token_ids[:30], 2)
    assert short.token_ids == reference(short.token_ids[:3], 20)


def test_decode_of_newer_seq_goes_before_older_prefill_chunk() -> None:
    sched = make(max_num_batched_tokens=8, long_prefill_threshold=6)
    long, short = make_seq(prompt_of(30), rid="long"), make_seq(prompt_of(2, 1), rid="short")
    sched.add(long)
    sched.add(short)
    eng = FakeEngine(sched)
    first = eng.step()
    assert [(it.seq.request_id, it.num_tokens) for it in first.items] == [("long", 6), ("short", 2)]
    short.draft_ids = [1, 2, 3]
    batch = eng.step()
    got = [(it.seq.request_id, it.num_tokens, it.is_decode) for it in batch.items]
    assert got == [("short", 4, True), ("long", 4, False)]


def test_long_prefill_threshold_caps_chunks() -> None:
    sched = make(max_num_batched_tokens=64, long_prefill_threshold=5)
    a, b = make_seq(prompt_of(12), rid="a"), make_seq(prompt_of(3, 2), rid="b")
    sched.add(a)
    sched.add(b)
    batch = FakeEngine(sched).step()
    assert [(it.seq.request_id, it.num_tokens) for it in batch.items] == [("a", 5), ("b", 3)]


def test_max_num_seqs_respected() -> None:
    sched = make(max_num_seqs=2)
    seqs = [make_seq(prompt_of(4, i), max_tokens=3, rid=f"r{i}") for i in range(5)]
    for s in seqs:
        sched.add(s)
    eng = FakeEngine(sched)
    while sched.has_unfinished():
        batch = eng.step()
        assert len(batch.items) <= 2 and len(sched.running) <= 2
    assert [s.finish_reason for s in seqs] == ["length"] * 5


def test_fcfs_admission_does_not_skip_a_head_that_does_not_fit() -> None:
    sched = make(num_blocks=6)
    first = make_seq(prompt_of(12), max_tokens=12, rid="first")  # 3 blocks
    sched.add(first)
    eng = FakeEngine(sched)
    eng.step()
    big, small = make_seq(prompt_of(16, 1), rid="big"), make_seq(prompt_of(2, 2), rid="small")
    sched.add(big)  # needs 4 blocks, only 3 free (first will need a 4th at token 13)
    sched.add(small)
    batch = eng.step()
    assert [it.seq.request_id for it in batch.items] == ["first"]
    assert list(sched.waiting) == [big, small]
    eng.run()
    assert big.scheduled_time is not None and small.scheduled_time is not None
    assert big.scheduled_time <= small.scheduled_time


def test_preemption_of_newest_on_tiny_pool_then_resume() -> None:
    sched = make(num_blocks=5, max_num_batched_tokens=32)
    old = make_seq(prompt_of(6), max_tokens=10, rid="old")  # grows to 16 tokens: 4 blocks
    new = make_seq(prompt_of(6, 3), max_tokens=10, rid="new")
    later = make_seq(prompt_of(6, 5), max_tokens=2, rid="later")  # 2 blocks: must wait
    for s in (old, new, later):
        sched.add(s)
    eng = FakeEngine(sched)
    snapshot = None
    while snapshot is None:
        batch = eng.step()
        if batch.preempted:
            assert batch.preempted == [new] and new.status is SeqStatus.WAITING
            assert sched.num_preemptions == 1 and new.num_preemptions == 1
            assert new.num_computed == 0 and new.block_table == []
            assert list(sched.waiting)[:2] == [new, later]  # pushed to the front
            snapshot = list(new.token_ids)
    eng.run()
    assert new.token_ids[: len(snapshot)] == snapshot  # generated output kept through recompute
    assert old.token_ids == reference(old.token_ids[:6], 10)
    assert new.token_ids == reference(new.token_ids[:6], 10)
    assert old.num_preemptions == 0 and later.finish_reason == "length"


@pytest.mark.parametrize("grower", ["old", "new"])
def test_newest_is_preempted_even_when_it_asks(grower: str) -> None:
    sched = make(num_blocks=4)
    # the grower reaches 9 tokens (a 3rd block) at step 3, the other one stays within 2 blocks
    lens = {"old": 7, "new": 5} if grower == "old" else {"old": 5, "new": 7}
    old = make_seq(prompt_of(lens["old"]), max_tokens=8, rid="old")
    new = make_seq(prompt_of(lens["new"], 1), max_tokens=8, rid="new")
    sched.add(old)
    sched.add(new)
    eng = FakeEngine(sched)
    assert [len(eng.step().items), len(eng.step().items)] == [2, 2]
    batch = eng.step()
    assert batch.preempted == [new] and [it.seq for it in batch.items] == [old]
    assert new.block_table == [] and len(old.block_table) == (3 if grower == "old" else 2)
    eng.run()
    assert old.token_ids == reference(old.token_ids[: old.prompt_len], 8)
    assert new.token_ids == reference(new.token_ids[: new.prompt_len], 8)


def test_sequence_larger_than_pool_finishes_with_length() -> None:
    sched = make(num_blocks=2, max_model_len=64)
    s = make_seq(prompt_of(6), max_tokens=20)
    sched.add(s)
    eng = FakeEngine(sched)
    eng.run()
    assert s.finish_reason == "length" and s.num_tokens == 9  # 8 computed slots + last sampled
    assert any(s in b.finished for b in eng.batches)


def test_context_length_exceeded() -> None:
    sched = make(max_model_len=32)
    with pytest.raises(RequestError) as err:
        sched.add(make_seq(prompt_of(30), max_tokens=10))
    assert err.value.code == "context_length_exceeded" and err.value.param == "messages"
    assert str(err.value).startswith(
        "This model's maximum context length is 32 tokens. However, you requested 40 tokens "
        "(30 in the prompt, 10 for the completion)."
    )
    tiny = make(num_blocks=2, max_model_len=100)
    with pytest.raises(RequestError) as err:
        tiny.add(make_seq(prompt_of(9), max_tokens=1))
    assert err.value.code == "context_length_exceeded" and "8 tokens" in str(err.value)
    assert not sched.has_unfinished() and not tiny.has_unfinished()


def test_abort_frees_blocks_of_running_and_waiting() -> None:
    sched = make(max_num_seqs=1)
    a, b = make_seq(prompt_of(9), rid="x"), make_seq(prompt_of(5), rid="x")
    c = make_seq(prompt_of(5, 1), rid="y")
    for s in (a, b, c):
        sched.add(s)
    eng = FakeEngine(sched)
    eng.step()
    assert a.block_table and sched.block_manager.num_used_blocks == 3
    assert sched.abort("x") == [a, b]
    assert sched.block_manager.num_used_blocks == 0
    assert a.finish_reason == b.finish_reason == "abort" and a.block_table == []
    assert list(sched.waiting) == [c] and sched.running == []
    eng.run()
    assert c.finish_reason == "length"


def test_speculative_partial_acceptance_truncates_blocks() -> None:
    sched = make()
    s = make_seq(prompt_of(6), max_tokens=50)
    sched.add(s)
    eng = FakeEngine(sched)
    eng.step()  # prefill: 7 tokens, 6 computed
    good = reference(s.token_ids, 2)[-2:]
    s.draft_ids = good + [(good[-1] + 1) % 97] + [1, 2, 3, 4]  # 2 right, then wrong
    batch = sched.schedule()
    item = batch.items[0]
    assert item.is_decode and item.start == 6 and item.num_tokens == 8
    assert len(s.block_table) == cdiv(6 + 8, BS)
    sched.update(batch, eng.forward(batch))
    assert s.num_computed == 6 + 1 + 2
    assert s.token_ids == reference(s.token_ids[:6], 4)
    assert len(s.block_table) == cdiv(s.num_tokens, BS) == 3
    assert s.draft_ids == []


def test_speculative_decoding_is_lossless_end_to_end() -> None:
    def proposer(seq: SequenceState) -> list[int]:  # right for even lengths, wrong on odd ones
        guess = reference(seq.token_ids, 3)[-3:]
        return guess if seq.num_tokens % 2 == 0 else [guess[0], 96 - guess[1]]

    sched = make(max_num_batched_tokens=10)
    seqs = [make_seq(prompt_of(5 + i, i), max_tokens=12, rid=f"r{i}") for i in range(3)]
    for s in seqs:
        sched.add(s)
    eng = FakeEngine(sched, proposer)
    eng.run()
    for s in seqs:
        assert s.token_ids == reference(s.token_ids[: s.prompt_len], 12)
    assert any(len(it.draft_ids) == 3 for b in eng.batches for it in b.items)
    assert all(b.num_tokens <= 10 for b in eng.batches)


def test_drafts_trimmed_to_the_pool_before_preempting() -> None:
    sched = make(num_blocks=2)
    s = make_seq(prompt_of(3), max_tokens=4)
    sched.add(s)
    eng = FakeEngine(sched)
    eng.step()  # 4 tokens, 3 computed, 1 block
    s.draft_ids = [1] * 9  # 4 + 9 slots would need 4 blocks; 2 blocks hold 5 new slots
    batch = sched.schedule()
    assert not batch.preempted and batch.items[0].draft_ids == [1] * 4 == s.draft_ids
    assert batch.items[0].num_tokens == 5 and len(s.block_table) == 2


def test_prefill_chunk_shrinks_to_free_blocks_instead_of_preempting() -> None:
    sched = make(num_blocks=7, max_num_batched_tokens=64, long_prefill_threshold=8)
    a = make_seq(prompt_of(16), max_tokens=8, rid="a")
    b = make_seq(prompt_of(20, 1), max_tokens=1, rid="b")
    sched.add(a)
    sched.add(b)
    eng = FakeEngine(sched)
    first = eng.step()  # a: 8, b: 8 -> 2 + 2 blocks, 3 free
    assert [it.num_tokens for it in first.items] == [8, 8]
    second = eng.step()  # a takes 2 more blocks; 1 block left holds 4 of b's next 8 tokens
    assert [(it.seq.request_id, it.num_tokens) for it in second.items] == [("a", 8), ("b", 4)]
    assert not second.preempted and sched.block_manager.num_free_blocks == 0
    third = eng.step()  # a's first decode needs a 5th block: b (newest) is preempted
    assert third.preempted == [b]
    eng.run()
    assert a.token_ids == reference(a.token_ids[:16], 8)
    assert b.token_ids == reference(b.token_ids[:20], 1)


def test_update_rejects_tokens_that_contradict_drafts() -> None:
    sched = make()
    s = make_seq(prompt_of(5))
    sched.add(s)
    eng = FakeEngine(sched)
    eng.step()
    s.draft_ids = [3, 4]
    batch = sched.schedule()
    with pytest.raises(ValueError):
        sched.update(batch, {s.seq_id: [5, 4, 1]})


def _after_shared_prompt(unit: int, shared: list[int]) -> tuple[Scheduler, FakeEngine, SequenceState, ScheduledBatch]:  # fmt: skip
    """Run a prompt of `shared` + 1 token to the end, then admit `shared` + 2 other tokens:
    (the scheduler, its engine, the second sequence, the step that admitted it)."""
    sched = make(unit=unit)
    sched.add(make_seq(shared + [1], max_tokens=3, rid="a"))
    eng = FakeEngine(sched)
    eng.run()
    b = make_seq(shared + [2, 3], max_tokens=3, rid="b")
    sched.add(b)
    return sched, eng, b, eng.step()


def test_prefix_cache_hit_on_shared_prompt() -> None:
    shared = prompt_of(13)
    _, eng, b, batch = _after_shared_prompt(BS, shared)
    assert b.num_cached_prompt == 12 and batch.items[0].start == 12
    eng.run()
    assert b.token_ids == reference(shared + [2, 3], 3)


def test_prefix_hit_inside_a_block_is_copied_before_the_forward() -> None:
    shared = prompt_of(14)  # one-token keys: a hit may end anywhere in a four-token block
    sched, eng, b, batch = _after_shared_prompt(1, shared)
    assert b.num_cached_prompt == 14 and batch.items[0].start == 14
    assert [(c.dst, c.num_tokens) for c in batch.kv_copies] == [(b.block_table[3], 2)]
    assert eng.step().kv_copies == []
    eng.run()
    assert b.token_ids == reference(shared + [2, 3], 3)
    assert sched.block_manager.num_used_blocks == 0


def test_many_prompts_sharing_prefixes_inside_blocks_match_the_reference() -> None:
    sched = make(num_blocks=24, unit=2, max_num_batched_tokens=12, max_num_seqs=4)
    heads = [prompt_of(9), prompt_of(13, 1), prompt_of(6, 2)]
    seqs = [
        make_seq(heads[i % 3] + prompt_of(1 + i % 4, 10 + i), max_tokens=5, rid=f"r{i}")
        for i in range(12)
    ]
    for s in seqs:
        sched.add(s)
    eng = FakeEngine(sched)
    eng.run()
    for s in seqs:
        assert s.token_ids == reference(s.token_ids[: s.prompt_len], 5)
    assert any(b.kv_copies for b in eng.batches)
    assert sched.block_manager.num_used_blocks == 0
