"""The engine's speculative bookkeeping: one n-gram index and acceptance estimate per sequence.

Pure Python. Before each schedule, `propose` sets `draft_ids` of the running decode sequences
(the scheduler trims them to the token budget and free blocks); after the forward, the engine
reports each verify step to `observe`. Finished sequences are dropped with `forget`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from localllm.core import SequenceState
from localllm.engine.speculative.ngram import NgramIndex
from localllm.engine.speculative.policy import (
    QUIET_STEPS,
    SYNC_TOKENS_PER_STEP,
    Acceptance,
    SpecPolicy,
    best_draft_len,
)


@dataclass
class _SeqState:
    index: NgramIndex
    acceptance: Acceptance
    shadow_at: int = -1  # position the shadow proposal predicted
    misses: int = 0  # proposals in a row that found no draft


class Speculator:
    def __init__(self, policy: SpecPolicy, max_model_len: int) -> None:
        self.policy = policy
        self.max_model_len = max_model_len
        self._states: dict[int, _SeqState] = {}

    def k_max(self, seq: SequenceState) -> int:
        """Most drafts this sequence may verify per step (its request may override the engine).
        A seeded sampled request does not speculate unless it asks: its random draws would
        then depend on whether it drafted, and so on the batch (the cutoff), and its output
        would no longer be reproducible."""
        p = seq.params
        if p.spec_tokens is not None:
            return p.spec_tokens
        return 0 if p.seed is not None and not p.greedy else self.policy.num_tokens

    def propose(self, decodes: Iterable[SequenceState]) -> None:
        """Set draft_ids of each decoding sequence (none when the batch is too large)."""
        seqs = list(decodes)
        if len(seqs) > self.policy.max_batch:
            for seq in seqs:
                seq.draft_ids = []
            return
        for seq in seqs:
            seq.draft_ids = self._draft(seq)

    def prepare(self, prefills: Iterable[SequenceState], running: int) -> None:
        """Index the prompts of sequences being prefilled, called while their forward runs on
        the device: the prompt is known, and indexing it at the first decode step would put
        ~1 ms per 1K tokens of host work between that step and the next. Not while more
        sequences run than speculate at once (`running`: the engine's): they would not draft."""
        if running > self.policy.max_batch:
            return
        for seq in prefills:
            if self.k_max(seq) > 0:
                self._state(seq).index.sync(seq.token_ids, SYNC_TOKENS_PER_STEP)

    def quiet(self, decodes: Iterable[SequenceState], propose: bool) -> bool:
        """Whether these sequences may take a step launched before their last tokens are known
        (step overlap): none speculates, or each one's last QUIET_STEPS proposals found no
        draft. propose: make this step's proposal first (the step after a launched one has
        none yet; its drafts are dropped: a step launched ahead verifies nothing)."""
        seqs = list(decodes)
        if len(seqs) > self.policy.max_batch:
            return True
        if propose:
            for seq in seqs:  # every sequence's index and shadow check keep up
                self._draft(seq)
        return all(self._misses(seq) >= QUIET_STEPS for seq in seqs)

    def _misses(self, seq: SequenceState) -> int:
        if self.k_max(seq) == 0:
            return QUIET_STEPS
        st = self._states.get(seq.seq_id)
        return st.misses if st is not None else 0

    def _draft(self, seq: SequenceState) -> list[int]:
        draft = self._find_draft(seq)
        st = self._states.get(seq.seq_id)
        if st is not None:
            st.misses = 0 if draft else st.misses + 1
        return draft

    def _find_draft(self, seq: SequenceState) -> list[int]:
        tokens = seq.token_ids
        limit = min(
            self.k_max(seq),
            seq.params.max_tokens - seq.num_output - 1,  # the step's own token comes on top
            self.max_model_len - seq.num_tokens,  # positions of the drafts stay in the context
        )
        if limit < max(1, seq.params.spec_min_tokens):
            return []
        st = self._state(seq)
        if not st.index.sync(tokens, SYNC_TOKENS_PER_STEP):
            return []  # still indexing a long prompt
        acc = st.acceptance
        if acc.shadow is not None and st.shadow_at < len(tokens):
            acc.observe_shadow(tokens[st.shadow_at])
        draft = st.index.propose(tokens, limit)
        if len(draft) < seq.params.spec_min_tokens or not draft:
            return []
        k = best_draft_len(acc.rate, len(draft), self.policy.cost_per_draft, self.policy.cost_fixed)
        if k == 0:  # not worth verifying now: remember the guess and check it next step
            acc.shadow, st.shadow_at = draft[0], len(tokens)
            return []
        return draft[:k] if k >= seq.params.spec_min_tokens else []

    def _state(self, seq: SequenceState) -> _SeqState:
        st = self._states.get(seq.seq_id)
        if st is None:
            index = NgramIndex(self.policy.ngram_min, self.policy.ngram_max)
            st = self._states[seq.seq_id] = _SeqState(index, Acceptance())
        return st

    def observe(self, seq: SequenceState, drafted: int, accepted: int) -> None:
        """A verify step of seq: `accepted` of its `drafted` drafts were taken."""
        seq.spec_proposed += drafted
        seq.spec_accepted += accepted
        seq.spec_steps += 1
        st = self._states.get(seq.seq_id)
        if st is not None and drafted:
            st.acceptance.observe(drafted, accepted)

    def forget(self, seq_id: int) -> None:
        self._states.pop(seq_id, None)

    def __len__(self) -> int:
        return len(self._states)
