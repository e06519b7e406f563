"""Iteration-level scheduler: waiting/running queues, one flat token budget per step. Pure Python.

Each step (vLLM-v1 style):
  1. running sequences, decodes first (1 + len(draft_ids) tokens each), then running prefills
     (a chunk of min(remaining, budget, long_prefill_threshold) tokens), in arrival order. When
     the pool is short, the work shrinks to what fits (fewer drafts, a smaller chunk); when not
     even one token fits, the newest running sequence is preempted by recompute (its blocks
     freed, num_computed = 0, pushed to the front of waiting, output kept) and we retry.
  2. waiting sequences FCFS (no skipping past one that does not fit) while the budget, the
     max_num_seqs cap and free blocks allow: prefix-cache hit first, then the first chunk.
     Nothing is admitted in a step that had to preempt.
A sequence is always described by how much of token_ids has K/V (num_computed): a prefill chunk,
a decode, a speculative verify and a recompute after preemption are the same operation.
"""

from __future__ import annotations

import time
from collections import deque

from localllm.core import SeqStatus, SequenceState, check_context
from localllm.engine.block_manager import BlockManager, cdiv
from localllm.engine.scheduler_types import ScheduledBatch, ScheduledSeq, SchedulerConfig
from localllm.errors import RequestError

__all__ = ["ScheduledBatch", "ScheduledSeq", "Scheduler", "SchedulerConfig"]


class Scheduler:
    def __init__(self, config: SchedulerConfig, block_manager: BlockManager) -> None:
        self._long_left = 0  # prefill tokens long prompts may still take this step (schedule())
        self.config = config
        self.block_manager = block_manager
        self.waiting: deque[SequenceState] = deque()
        self.running: list[SequenceState] = []  # admission order: the last one is preempted first
        self.num_preemptions = 0

    # ---- queue management ---------------------------------------------------------------------
    def add(self, seq: SequenceState) -> None:
        self._check_fits(seq)
        seq.status = SeqStatus.WAITING
        self.waiting.append(seq)

    def _check_fits(self, seq: SequenceState) -> None:
        prompt, completion = seq.prompt_len, seq.params.max_tokens
        if prompt < 1:
            raise RequestError("the prompt must contain at least one token", param="messages")
        check_context(prompt, completion, self.config.max_model_len)
        bm = self.block_manager
        capacity = bm.num_blocks * bm.block_size
        if prompt > capacity:
            raise RequestError(
                f"The KV cache holds at most {capacity} tokens ({bm.num_blocks} blocks of "
                f"{bm.block_size}). However, your prompt has {prompt} tokens. Please reduce the "
                f"length of the messages.",
                code="context_length_exceeded",
                param="messages",
            )

    def finish(self, seq: SequenceState, reason: str) -> None:
        """Mark seq finished, free its blocks and drop it from whichever queue holds it."""
        if seq.status is SeqStatus.RUNNING:
            self.running.remove(seq)
        elif seq.status is SeqStatus.WAITING and seq in self.waiting:
            self.waiting.remove(seq)
        seq.status = SeqStatus.FINISHED
        seq.finish_reason = reason
        seq.draft_ids = []
        if seq.finish_time is None:
            seq.finish_time = time.monotonic()
        self.block_manager.free(seq)

    def abort(self, request_id: str) -> list[SequenceState]:
        """Finish every waiting or running seq of request_id with reason "abort"."""
        hit = [s for s in (*self.running, *self.waiting) if s.request_id == request_id]
        for seq in hit:
            self.finish(seq, "abort")
        return hit

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    # ---- one step -----------------------------------------------------------------------------
    def schedule(self) -> ScheduledBatch:
        batch = ScheduledBatch()
        scheduled: dict[int, ScheduledSeq] = {}  # seq_id -> item, in scheduling order
        budget = self.config.max_num_batched_tokens
        decodes = [s for s in self.running if not s.in_prefill]
        prefills = [s for s in self.running if s.in_prefill]
        for seq in decodes:
            if seq.status is SeqStatus.RUNNING:  # else preempted earlier in this loop
                budget = self._schedule_running(seq, budget, scheduled, batch)
        self._start_long_share(bool(scheduled), budget)
        for seq in prefills:
            if seq.status is SeqStatus.RUNNING:
                budget = self._schedule_running(seq, budget, scheduled, batch)
        if not batch.preempted:
            self._admit_waiting(budget, scheduled, batch)
        batch.items = list(scheduled.values())
        batch.kv_copies = self.block_manager.take_copies()
        return batch

    def _start_long_share(self, decoding: bool, budget: int) -> None:
        """While streams decode, long prompts get at most decode_prefill_chunk tokens of the
        step, so it stays short (inter-token latency); short prompts are not held back."""
        cap = self.config.decode_prefill_chunk
        self._long_left = cap if decoding and cap else budget

    @staticmethod
    def _prefill_work(seq: SequenceState) -> int:
        """Tokens of seq's prefill, all chunks (what decides whether its prompt is long)."""
        return seq.num_tokens - seq.num_cached_prompt

    def _allowed(self, work: int, budget: int) -> int:
        """Prefill tokens a prompt with `work` uncached tokens may take of the step's budget."""
        if work <= self.config.short_prefill:
            return budget
        return min(budget, self._long_left)

    def _took(self, work: int, n: int) -> None:
        if work > self.config.short_prefill:
            self._long_left -= n

    def _schedule_running(
        self,
        seq: SequenceState,
        budget: int,
        scheduled: dict[int, ScheduledSeq],
        batch: ScheduledBatch,
    ) -> int:
        """Schedule one running seq (a prefill within its `_allowed` share); new budget. When
        blocks are short, first shrink the work to what fits (fewer drafts, a smaller prefill
        chunk), then preempt the newest running seq."""
        if self.never_fits(seq):
            self.finish(seq, "length")
            batch.finished.append(seq)
            return budget
        work = self._prefill_work(seq)
        item = self._plan(seq, self._allowed(work, budget) if seq.in_prefill else budget)
        if item is None:
            return budget
        while not self.block_manager.allocate(seq, item.num_tokens):
            fit = self._tokens_that_fit(seq)
            if fit > 0:  # fit < item.num_tokens, so this plan is smaller and will allocate
                item = self._plan(seq, fit)
                assert item is not None
                continue
            victim = self.running[-1]
            budget += self._preempt(victim, scheduled, batch)
            if victim is seq:
                return budget
        scheduled[seq.seq_id] = item
        if seq.in_prefill:
            self._took(work, item.num_tokens)
        return budget - item.num_tokens

    def _admit_waiting(
        self, budget: int, scheduled: dict[int, ScheduledSeq], batch: ScheduledBatch
    ) -> None:
        bm = self.block_manager
        while self.waiting and budget > 0 and len(self.running) < self.config.max_num_seqs:
            seq = self.waiting[0]
            if self.never_fits(seq):
                self.finish(seq, "length")
                batch.finished.append(seq)
                continue
            hit = bm.get_computed_prefix(seq)
            remaining = seq.num_tokens - hit.num_tokens
            n = self._chunk(remaining, self._allowed(remaining, budget))
            if n < 1:
                break  # only long prompts wait, and their share of this step is spent
            if not bm.allocate(seq, n, hit):
                break  # FCFS: nobody overtakes the head of the queue
            self.waiting.popleft()
            seq.status = SeqStatus.RUNNING
            if seq.scheduled_time is None:
                seq.scheduled_time = time.monotonic()
            self.running.append(seq)
            start = seq.num_computed
            seq.draft_ids = []  # nothing to verify before the first forward
            is_last = start + n == seq.num_tokens
            scheduled[seq.seq_id] = ScheduledSeq(seq, start, n, [], is_last, not seq.in_prefill)
            self._took(remaining, n)
            budget -= n

    def _plan(self, seq: SequenceState, budget: int) -> ScheduledSeq | None:
        """The work for seq this step within budget (None when the budget is spent)."""
        if budget < 1:
            return None
        start = seq.num_computed
        if not seq.in_prefill:  # decode: the last sampled token, plus the drafts that fit
            seq.draft_ids = seq.draft_ids[: budget - 1]
            draft = list(seq.draft_ids)
            return ScheduledSeq(seq, start, 1 + len(draft), draft, True, is_decode=True)
        n = self._chunk(seq.num_tokens - start, budget)
        return ScheduledSeq(seq, start, n, [], start + n == seq.num_tokens)

    def _chunk(self, remaining: int, budget: int) -> int:
        n = min(remaining, budget)
        if self.config.long_prefill_threshold:
            n = min(n, self.config.long_prefill_threshold)
        return n

    def _tokens_that_fit(self, seq: SequenceState) -> int:
        """How many more tokens seq can compute with its blocks plus the free ones."""
        bm = self.block_manager
        blocks = len(seq.block_table) + bm.num_free_blocks
        return blocks * bm.block_size - seq.num_computed

    def never_fits(self, seq: SequenceState) -> bool:
        """True when seq's tokens alone need more blocks than the whole pool has."""
        bm = self.block_manager
        return cdiv(seq.num_tokens, bm.block_size) > bm.num_blocks

    def _preempt(
        self, seq: SequenceState, scheduled: dict[int, ScheduledSeq], batch: ScheduledBatch
    ) -> int:
        """Recompute-preempt seq; returns the budget its dropped item (if any) gave back."""
        self.running.remove(seq)
        self.block_manager.free(seq)
        seq.num_computed = 0
        seq.draft_ids = []
        seq.status = SeqStatus.WAITING
        seq.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(seq)
        batch.preempted.append(seq)
        item = scheduled.pop(seq.seq_id, None)
        return item.num_tokens if item is not None else 0

    def schedule_ahead(self, prev: ScheduledBatch) -> ScheduledBatch | None:
        """The step after `prev`, scheduled while prev is still on the device (step overlap,
        engine/overlap.py): every running sequence again, in prev's order; a decode with one
        query token (the one prev samples) at position start + 1, a prompt in prefill with its
        next chunk, as schedule() would size it. None when that is not the whole next step: a
        sequence waits for admission, one left or joined, lacks a block (no preemption here;
        the next plain schedule() deals with it), or the next chunk would be the prompt's last
        (its first token goes through a plain step)."""
        if self.waiting or len(self.running) != len(prev.items):
            return None
        decodes = prev.num_decode
        budget = self.config.max_num_batched_tokens - decodes
        self._start_long_share(decodes > 0, budget)
        items = []
        for it in prev.items:
            seq = it.seq
            if seq.status is not SeqStatus.RUNNING or seq.num_computed != it.start:
                return None
            if it.is_decode:
                n, nxt = 2, ScheduledSeq(seq, it.start + 1, 1, [], True, is_decode=True)
            else:
                start = it.start + it.num_tokens
                allowed = self._allowed(self._prefill_work(seq), budget)
                chunk = self._chunk(seq.num_tokens - start, allowed)
                if chunk < 1 or start + chunk >= seq.num_tokens:
                    return None
                n, nxt = it.num_tokens + chunk, ScheduledSeq(seq, start, chunk, [], False)
            if not self.block_manager.allocate(seq, n):  # prev's tokens and this step's
                return None
            items.append(nxt)
        return ScheduledBatch(items)

    # ---- after the forward --------------------------------------------------------------------
    def update(self, batch: ScheduledBatch, accepted: dict[int, list[int]]) -> None:
        """Advance each scheduled seq by what the forward computed and append sampled tokens.

        accepted[seq_id] is [] for a non-final prefill chunk, else [d_1..d_a, t]: a accepted
        drafts then one new token. num_computed becomes start + 1 + a for a decode (the K/V of
        rejected drafts is dropped by truncating the block table) and start + num_tokens for a
        prefill chunk.
        """
        bm = self.block_manager
        for item in batch.items:
            seq = item.seq
            if seq.status is not SeqStatus.RUNNING:  # finished or aborted since schedule()
                continue
            tokens = accepted.get(seq.seq_id, [])
            self._check_accepted(item, tokens)
            rejected = len(item.draft_ids) - (len(tokens) - 1) if item.draft_ids else 0
            seq.num_computed = item.start + item.num_tokens - rejected
            seq.token_ids.extend(tokens)
            seq.draft_ids = []
            if rejected:
                bm.truncate(seq, seq.num_tokens)
            bm.cache_computed(seq)

    @staticmethod
    def _check_accepted(item: ScheduledSeq, tokens: list[int]) -> None:
        if not item.needs_logits:
            if tokens:
                raise ValueError(f"tokens sampled for a non-final prefill chunk of {item.seq}")
            return
        a = len(tokens) - 1
        if not 0 <= a <= len(item.draft_ids) or tokens[:a] != item.draft_ids[:a]:
            raise ValueError(
                f"accepted tokens {tokens} are not a prefix of drafts {item.draft_ids} + 1 token"
            )
