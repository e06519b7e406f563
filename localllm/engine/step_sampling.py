"""One step's logits -> the tokens each scheduled sequence takes (plain decode or verify).

A plain item samples one token from its one logits row. A speculative item (a decode that fed
k drafts) goes through the acceptance rule and takes its accepted drafts plus one token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from localllm.core import SequenceState
from localllm.engine.sampler import Sampler, SamplingRow
from localllm.engine.scheduler_types import ScheduledBatch
from localllm.engine.speculative.verify import Logprob, VerifyItem, verify

_Item = tuple[SequenceState, int, list[int]]


@dataclass
class StepTokens:
    accepted: dict[int, list[int]]  # seq_id -> tokens it takes this step ([] for none)
    logprobs: dict[int, list[Logprob]] = field(default_factory=dict)  # one per taken token
    drafted: dict[int, int] = field(default_factory=dict)  # seq_id -> drafts verified


def sampling_row(seq: SequenceState) -> SamplingRow:
    # token histories only matter for penalties: don't copy whole contexts every step
    if not seq.params.needs_penalties:
        return SamplingRow(seq.params, seq.seq_id, (), ())
    return SamplingRow(seq.params, seq.seq_id, seq.token_ids[: seq.prompt_len], seq.output_ids)


def sample_step(
    sampler: Sampler,
    batch: ScheduledBatch,
    logits: torch.Tensor,  # [S, V] the logits rows of the step
    rows: list[tuple[int, int]],  # per batch item: (first row, number of rows)
    greedy: torch.Tensor | None = None,  # [S] argmax of each row (CUDA graphs), or None
) -> StepTokens:
    """greedy: plain greedy rows read their ids from it (one small copy) instead of sampling."""
    out = StepTokens({it.seq.seq_id: [] for it in batch.items})
    plain: list[_Item] = []  # (seq, first row, drafts)
    spec: list[_Item] = []
    for it, (r0, n) in zip(batch.items, rows):
        if n:
            (spec if it.draft_ids else plain).append((it.seq, r0, it.draft_ids))
    if plain:
        _sample_plain(sampler, plain, logits, greedy, out)
    if spec:
        items = [VerifyItem(r0, drafts, sampling_row(seq)) for seq, r0, drafts in spec]
        for (seq, _, drafts), res in zip(spec, verify(sampler, logits, items, greedy)):
            out.accepted[seq.seq_id] = res.tokens
            out.drafted[seq.seq_id] = len(drafts)
            if res.logprobs is not None:
                out.logprobs[seq.seq_id] = res.logprobs
    return out


def _sample_plain(
    sampler: Sampler,
    items: list[_Item],
    logits: torch.Tensor,
    greedy: torch.Tensor | None,
    out: StepTokens,
) -> None:
    srows = [sampling_row(seq) for seq, _, _ in items]
    if greedy is not None and all(r.params.plain_greedy for r in srows):
        ids = greedy.tolist()
        for seq, r0, _ in items:
            out.accepted[seq.seq_id] = [ids[r0]]
        return
    index = torch.tensor([r0 for _, r0, _ in items], device=logits.device)
    res = sampler.sample(logits.index_select(0, index), srows)
    for j, (seq, _, _) in enumerate(items):
        out.accepted[seq.seq_id] = [res.token_ids[j]]
        if res.logprobs is not None and seq.params.logprobs is not None:
            out.logprobs[seq.seq_id] = [res.logprobs[j]]
