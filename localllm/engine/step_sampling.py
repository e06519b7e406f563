"""One step's logits -> the tokens each scheduled sequence takes (plain decode or verify).

A plain item samples one token from its one logits row. A speculative item (a decode that fed
k drafts) goes through the acceptance rule and takes its accepted drafts plus one token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from localllm.core import SequenceState
from localllm.device import current_stream
from localllm.engine.sampler import Sampler, SamplingRow
from localllm.engine.scheduler_types import ScheduledBatch
from localllm.engine.speculative.verify import Logprob, VerifyItem, verify, verify_greedy

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
    logits: torch.Tensor,  # [S, V] the logits rows of the step (grammar masks applied)
    rows: list[tuple[int, int]],  # per batch item: (first row, number of rows)
    greedy: torch.Tensor | None = None,  # [>= S] argmax of each row as it stands, or None
    greedy_ids: HostIds | None = None,  # greedy's copy to the host, when already started
) -> StepTokens:
    """Rows that are `argmax_on_device` read their ids from greedy (one small copy, started
    before the sampler runs on the other rows, so the step syncs with the device once; the
    engine starts it as it launches the step, `greedy_ids`, where greedy is final then)."""
    out = StepTokens({it.seq.seq_id: [] for it in batch.items})
    fast: list[_Item] = []  # (seq, first row, drafts)
    plain: list[_Item] = []
    spec: list[_Item] = []
    for it, (r0, n) in zip(batch.items, rows):
        if not n:
            continue
        on_device = greedy is not None and it.seq.params.argmax_on_device
        (fast if on_device else spec if it.draft_ids else plain).append((it.seq, r0, it.draft_ids))
    ids = (greedy_ids or HostIds(greedy)) if fast and greedy is not None else None
    if plain:
        _sample_plain(sampler, plain, logits, out)
    if spec:
        items = [VerifyItem(r0, drafts, sampling_row(seq)) for seq, r0, drafts in spec]
        for (seq, _, drafts), res in zip(spec, verify(sampler, logits, items)):
            out.accepted[seq.seq_id] = res.tokens
            out.drafted[seq.seq_id] = len(drafts)
            if res.logprobs is not None:
                out.logprobs[seq.seq_id] = res.logprobs
    if ids is not None:
        host = ids.tolist()
        for seq, r0, drafts in fast:
            out.accepted[seq.seq_id] = verify_greedy(drafts, host[r0 : r0 + len(drafts) + 1]).tokens
            if drafts:
                out.drafted[seq.seq_id] = len(drafts)
    return out


def tokens_on_device(
    sampler: Sampler,
    batch: ScheduledBatch,
    logits: torch.Tensor,  # [S, V] the step's logits rows
    rows: list[tuple[int, int]],  # per item: (i, 1) for decode i, then (0, 0) for a chunk
    greedy: torch.Tensor,  # [>= S] argmax of each row
) -> torch.Tensor:
    """[decodes] int64 on the device: each decode item's token of a chainable step (plain
    decodes, then perhaps a prefill chunk that samples nothing: overlap.chainable), without a
    host sync (step overlap feeds them to the next step before the host sees them). Rows that
    are `argmax_on_device` take greedy; the others go to the sampler exactly as `sample_step`
    sends them (the same rows in one call, so the same random draws). No logprobs here."""
    n = batch.num_decode
    assert rows[:n] == [(i, 1) for i in range(n)] and all(r == (0, 0) for r in rows[n:]), (
        "a chainable step's rows"
    )
    other: list[_Item] = [
        (it.seq, i, [])
        for i, it in enumerate(batch.items[:n])
        if not it.seq.params.argmax_on_device
    ]
    if not other:
        return greedy[:n]
    index, lg, srows = _plain_rows(sampler, other, logits)  # row i is item i
    return greedy[:n].clone().index_copy_(0, index, sampler.tokens(lg, srows))


def taken_from_ids(batch: ScheduledBatch, ids: HostIds) -> StepTokens:
    """The tokens of a chainable step whose ids `tokens_on_device` computed: decode item i
    takes ids[i] (waits for their copy to the host), a prefill chunk after them nothing."""
    host = ids.tolist()
    return StepTokens(
        {it.seq.seq_id: [host[i]] if it.is_decode else [] for i, it in enumerate(batch.items)}
    )


class HostIds:
    """A device tensor's copy to the host, started now and read later: a sync the sampler
    makes meanwhile finishes it too, so reading it costs no second wait."""

    def __init__(self, ids: torch.Tensor) -> None:  # [S] int64
        self._host = ids.to("cpu", non_blocking=True)  # pinned when ids are on a GPU
        self._done: torch.cuda.Event | None = None
        if ids.is_cuda:
            self._done = torch.cuda.Event()
            self._done.record(current_stream(ids.device.index))

    def tolist(self) -> list[int]:
        if self._done is not None:
            self._done.synchronize()
        return self._host.tolist()


def _plain_rows(
    sampler: Sampler, items: list[_Item], logits: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, list[SamplingRow]]:
    """(row indices [n] on the device, those logits rows [n, V], their sampling rows) of plain
    items, as the sampler gets them in one call, whether a plain step samples them or a step
    launched ahead (`tokens_on_device`): the same rows give the same random draws."""
    index = sampler.device_index([r0 for _, r0, _ in items])  # pinned, async: no sync
    return index, logits.index_select(0, index), [sampling_row(seq) for seq, _, _ in items]


def _sample_plain(
    sampler: Sampler, items: list[_Item], logits: torch.Tensor, out: StepTokens
) -> None:
    _, lg, srows = _plain_rows(sampler, items, logits)
    res = sampler.sample(lg, srows)
    for j, (seq, _, _) in enumerate(items):
        out.accepted[seq.seq_id] = [res.token_ids[j]]
        if res.logprobs is not None and seq.params.logprobs is not None:
            out.logprobs[seq.seq_id] = [res.logprobs[j]]
