"""Token bitmasks for a batch: filled on the CPU by llguidance (`ops.masked_argmax` applies
them to the logits on the device: kernels/fused/masked_argmax.py).

Layout: one row of int32 words per masked logits row, bit `i & 31` of word `i >> 5` set when
token i is allowed (llguidance's layout). A row is as wide as the tokenizer's vocabulary;
logits columns past it (a model whose embedding is padded) are always excluded for a
masked row. Free rows of the batch are left untouched: a batch mixes constrained and free
sequences, and only the constrained rows pay for the mask.
"""

from __future__ import annotations

from collections.abc import Sequence

import llguidance as llg
import torch

from localllm.structured.constraint import Constraint


def bitmask_words(vocab_size: int) -> int:
    return (vocab_size + 31) // 32


def allocate_bitmask(rows: int, vocab_size: int) -> torch.Tensor:
    """[rows, words] int32 on the CPU, pinned when CUDA is there (async copies to the GPU)."""
    pin = torch.cuda.is_available()
    return torch.zeros(rows, bitmask_words(vocab_size), dtype=torch.int32, pin_memory=pin)


class BatchMasker:
    """Fills the masks of many constraints at once on llguidance's thread pool (GIL dropped)."""

    def __init__(self, vocab_size: int, num_threads: int | None = None) -> None:
        self.vocab_size = vocab_size
        self.words = bitmask_words(vocab_size)
        self._executor = llg.LLExecutor(num_threads)

    def fill(
        self,
        constraints: Sequence[Constraint],
        bitmask: torch.Tensor,
        drafts: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """Row k of `bitmask` <- the mask of constraints[k]. With drafts, constraint k takes
        rows starting at sum(len(d) + 1 for earlier drafts): its current mask, then the mask
        after each draft token (rows after a token the grammar refuses are all zero).
        bitmask: [rows, words] int32, contiguous, on the CPU."""
        if bitmask.dtype != torch.int32 or bitmask.device.type != "cpu":
            raise ValueError("bitmask must be an int32 CPU tensor")
        if bitmask.dim() != 2 or bitmask.shape[1] != self.words or not bitmask.is_contiguous():
            raise ValueError(f"bitmask must be contiguous [rows, {self.words}]")
        rows, row_bytes = bitmask.shape[0], self.words * 4
        if drafts is None:
            items = [(c.matcher, k) for k, c in enumerate(constraints)]
            if len(items) > rows:
                raise ValueError(f"{len(items)} constraints for {rows} bitmask rows")
            self._executor.unsafe_compute_mask_ptr(items, bitmask.data_ptr(), row_bytes, rows)
            return
        plain, with_drafts, row = [], [], 0
        for c, d in zip(constraints, drafts, strict=True):
            if d:
                with_drafts.append((c.matcher, row, list(d)))
            else:  # llguidance's draft call takes non-empty drafts only
                plain.append((c.matcher, row))
            row += len(d) + 1
        if row > rows:
            raise ValueError(f"{row} mask rows needed, bitmask has {rows}")
        bitmask[:row].zero_()  # rows past a refused draft token stay all-zero
        if plain:
            self._executor.unsafe_compute_mask_ptr(plain, bitmask.data_ptr(), row_bytes, rows)
        if with_drafts:
            self._executor.unsafe_compute_mask_ptr_with_draft_token(
                with_drafts, bitmask.data_ptr(), row_bytes, rows
            )
