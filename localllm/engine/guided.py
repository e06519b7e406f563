"""Guided decoding in the engine: per-sequence grammar constraints and their token masks.

A request whose `SamplingParams.constraint` is set gets a `Constraint` (one per sequence, so
n > 1 choices advance independently). Each step the engine asks for the masks of the
constrained sequences that sample *before* it launches the forward: llguidance fills them
on a worker thread with the GIL dropped while the GPU computes, and `apply` waits for them
only when the logits are there. `apply` masks the constrained rows on the device and puts
their argmax into the step's greedy ids (`ops.masked_argmax`: two launches for all of them),
so a greedy constrained row is read like a free greedy one and never reaches the sampler.
Free sequences in the same batch are never touched and cost nothing. Sampled tokens go back
through `accept`; a grammar that admits no more text ends its sequence at once.

Speculative decoding: the proposer cuts each draft with `cut_draft` (the longest prefix the
grammar accepts), so verification never spends a position on a token that cannot be kept.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import torch

from localllm.core import SequenceState
from localllm.kernels.ops import OpSet
from localllm.structured.bitmask import BatchMasker, allocate_bitmask
from localllm.structured.compiler import CompiledGrammar, GrammarCompiler
from localllm.structured.constraint import Constraint
from localllm.structured.spec import ConstraintSpec
from localllm.tokenizer import Tokenizer


@dataclass
class MaskJob:
    """Masks for one step: `bitmask` row k belongs to sampling row `rows[k]`."""

    bitmask: torch.Tensor  # [len(rows), words] int32, pinned on a CUDA machine
    rows: list[tuple[int, int]]  # per bitmask row: (item index, row within the item)
    seconds: float = 0.0  # CPU time llguidance spent filling them


class GuidedDecoding:
    def __init__(self, tokenizer: Tokenizer, model_vocab_size: int, ops: OpSet) -> None:
        """ops: the runner's kernels (the masks are applied where the logits are)."""
        self._tokenizer = tokenizer
        self._vocab = model_vocab_size
        self._ops = ops
        self._compiler: GrammarCompiler | None = None
        self._masker: BatchMasker | None = None
        self._lock = threading.Lock()
        self._constraints: dict[int, Constraint] = {}  # seq_id -> its grammar state
        self._pool: ThreadPoolExecutor | None = None
        self._buffer: torch.Tensor | None = None  # [rows, words] int32, reused every step
        self._index: torch.Tensor | None = None  # [rows] int64 logits row of each mask row
        self.mask_seconds = 0.0  # CPU time spent in masks (all steps)
        self.masked_rows = 0  # masks computed: one per constrained sampled token

    # ---- compiling (any thread) ---------------------------------------------------------
    @property
    def compiler(self) -> GrammarCompiler:
        """Built on first use: the engine's tokenizer in llguidance costs 0.1-1 s once."""
        with self._lock:
            if self._compiler is None:
                self._compiler = GrammarCompiler(self._tokenizer, self._vocab)
                self._masker = BatchMasker(self._compiler.table.vocab_size)
            return self._compiler

    def compile(self, spec: ConstraintSpec) -> CompiledGrammar:
        """Validate and compile (cached); raises ConstraintError naming the problem."""
        return self.compiler.compile(spec)

    # ---- sequences (engine thread) ------------------------------------------------------
    def add(self, seq_id: int, spec: ConstraintSpec) -> None:
        self._constraints[seq_id] = Constraint(self.compiler, self.compile(spec))

    def drop(self, seq_id: int) -> None:
        self._constraints.pop(seq_id, None)

    def __contains__(self, seq_id: int) -> bool:
        return seq_id in self._constraints

    def accept(self, seq_id: int, token_id: int) -> bool:
        """Advance a sequence's grammar; True when it admits no more text (end it now)."""
        c = self._constraints.get(seq_id)
        if c is None:
            return False
        c.accept(token_id)
        return c.finished

    def cut_drafts(self, seqs: list[SequenceState]) -> None:
        """Cut the speculative drafts of constrained sequences to what their grammar accepts."""
        for seq in seqs:
            if seq.draft_ids and seq.seq_id in self._constraints:
                seq.draft_ids = self.cut_draft(seq.seq_id, seq.draft_ids)

    def cut_draft(self, seq_id: int, draft: list[int]) -> list[int]:
        """The longest prefix of a speculative draft the sequence's grammar accepts."""
        c = self._constraints.get(seq_id)
        return draft if c is None else draft[: c.valid_prefix(draft)]

    # ---- masks --------------------------------------------------------------------------
    def start_masks(self, items: list[tuple[int, list[int]]]) -> Future[MaskJob] | None:
        """Begin filling the masks of a step's constrained logits rows on the worker thread.

        items: (seq_id, draft_ids) of every batch item that gets logits, in batch order; an
        item's rows are its mask now and after each of its drafts (speculative verification;
        drafts were cut by `cut_draft`, so every one is allowed). None if none is
        constrained."""
        cons: list[Constraint] = []
        drafts: list[list[int]] = []
        rows: list[tuple[int, int]] = []
        for k, (seq_id, draft) in enumerate(items):
            c = self._constraints.get(seq_id)
            if c is not None:
                cons.append(c)
                drafts.append(list(draft))
                rows.extend((k, j) for j in range(1 + len(draft)))
        if not cons:
            return None
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="localllm-masks")
        return self._pool.submit(self._fill, cons, drafts, rows)

    def _fill(
        self, cons: list[Constraint], drafts: list[list[int]], rows: list[tuple[int, int]]
    ) -> MaskJob:
        assert self._masker is not None and self._compiler is not None
        t0 = time.perf_counter()
        if self._buffer is None or self._buffer.shape[0] < len(rows):
            # pinned memory is slow to allocate: keep the buffers. The previous step's copies
            # from them have finished: sampling synchronised with the device to read its ids.
            n = max(len(rows), 16)
            self._buffer = allocate_bitmask(n, self._compiler.table.vocab_size)
            self._index = torch.empty(n, dtype=torch.int64, pin_memory=self._buffer.is_pinned())
        bitmask = self._buffer[: len(rows)]
        self._masker.fill(cons, bitmask, drafts if any(drafts) else None)
        return MaskJob(bitmask, rows, time.perf_counter() - t0)

    def apply(
        self,
        job: Future[MaskJob] | None,
        logits: torch.Tensor,
        rows: list[tuple[int, int]],
        greedy: torch.Tensor | None,
    ) -> torch.Tensor | None:
        """Wait for a step's masks and apply them on the logits' device, without a sync.

        logits: [S, V], the disallowed logits of each constrained row become -inf in place
        (other rows are not touched); rows: (first logits row, number of rows) of each item
        given to `start_masks`, in the same order; greedy: [>= S] int64 argmax of each row
        (the CUDA graph's), or None. Returns greedy with each constrained row's argmax over
        its allowed tokens (computed here first when there was none), so afterwards
        greedy[i] is the argmax of logits row i as it stands for every row."""
        if job is None:
            return greedy
        done = job.result()
        self.mask_seconds += done.seconds
        self.masked_rows += len(done.rows)
        assert self._index is not None
        n = len(done.rows)
        self._index.numpy()[:n] = [rows[k][0] + j for k, j in done.rows]
        dev = logits.device
        index = self._index[:n].to(dev, non_blocking=True)  # [R] pinned -> device
        bitmask = done.bitmask.to(dev, non_blocking=True)  # [R, words]
        if greedy is None:
            greedy = self._ops.argmax(logits)
        self._ops.masked_argmax(logits, bitmask, index, greedy)
        return greedy

    @property
    def cpu_us_per_token(self) -> float:
        """Mean CPU time of one sequence's mask (it overlaps the forward on the GPU)."""
        return 1e6 * self.mask_seconds / self.masked_rows if self.masked_rows else 0.0

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
