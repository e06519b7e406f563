"""What the scheduler hands the engine each step: settings and the scheduled batch. Pure Python."""

from __future__ import annotations

from dataclasses import dataclass, field

from localllm.core import SequenceState
from localllm.engine.block_manager import BlockCopy


@dataclass
class SchedulerConfig:
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 2048  # flat token budget of one forward (prefill + decode)
    max_model_len: int = 2048
    long_prefill_threshold: int = 0  # 0 = none; else the largest prefill chunk of one seq per step
    # 0 = none; else the most prefill tokens (all sequences together) of a step that also
    # decodes, so running streams keep their pace while a long prompt is prefilled
    decode_prefill_chunk: int = 0
    # prompts with at most this many tokens left to prefill are not held to
    # decode_prefill_chunk: they finish in a step or two and start streaming (a burst of short
    # requests is not spread over hundreds of steps); only long prompts are throttled
    short_prefill: int = 256

    def __post_init__(self) -> None:
        if self.max_num_seqs < 1:
            raise ValueError("max_num_seqs must be >= 1")
        if self.max_num_batched_tokens < 1:
            raise ValueError("max_num_batched_tokens must be >= 1")
        if self.max_model_len < 1:
            raise ValueError("max_model_len must be >= 1")
        if self.decode_prefill_chunk < 0:
            raise ValueError("decode_prefill_chunk must be >= 0")
        if self.short_prefill < 0:
            raise ValueError("short_prefill must be >= 0")
        if self.long_prefill_threshold < 0:
            raise ValueError("long_prefill_threshold must be >= 0")


@dataclass
class ScheduledSeq:
    seq: SequenceState
    start: int  # == seq.num_computed at schedule time: first position computed this step
    num_tokens: int  # query tokens this step (prefill chunk, or 1 + len(draft_ids) for decode)
    draft_ids: list[int]  # speculative tokens appended after seq.token_ids[-1] (decode only)
    needs_logits: bool  # sample from this row's last (1 + len(draft_ids)) positions
    is_decode: bool = False  # the seq had all but its last token computed

    @property
    def num_logits(self) -> int:
        """Rows of logits the engine needs for this item (0 for a non-final prefill chunk)."""
        return 1 + len(self.draft_ids) if self.needs_logits else 0

    @property
    def token_ids(self) -> list[int]:
        """The query token ids of this step: a slice of the sequence plus any drafts."""
        end = self.start + self.num_tokens - len(self.draft_ids)
        return self.seq.token_ids[self.start : end] + self.draft_ids


@dataclass
class ScheduledBatch:
    items: list[ScheduledSeq] = field(default_factory=list)  # decodes first, then prefill chunks
    preempted: list[SequenceState] = field(default_factory=list)  # moved back to waiting this step
    finished: list[SequenceState] = field(default_factory=list)  # ended by the scheduler ("length")
    # prefix-cache hits ending inside a block: run before this step's forward (block_manager)
    kv_copies: list[BlockCopy] = field(default_factory=list)

    @property
    def num_tokens(self) -> int:
        return sum(item.num_tokens for item in self.items)

    @property
    def num_decode(self) -> int:
        return sum(1 for item in self.items if item.is_decode)

    @property
    def num_prefill(self) -> int:
        return sum(1 for item in self.items if not item.is_decode)

    @property
    def is_empty(self) -> bool:
        return not self.items
