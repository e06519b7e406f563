"""Lossless acceptance of n-gram drafts against the target model's logits.

A verify item is one sequence that fed its last token plus k drafts d_1..d_k; logits row i
(0 <= i <= k) is the model's distribution for the token after d_1..d_i. Row i is processed
exactly like a plain decode step whose output so far ends with d_1..d_i (penalties see the
drafts as output), so accepting token by token is the same chain of distributions.

- greedy rows: accept d_{i+1} while it equals the argmax of row i;
- sampled rows (the draft is deterministic, q = one-hot): accept d_{i+1} with probability
  p_i(d_{i+1}); at the first rejection draw from p_i with d_{i+1} removed (renormalised),
  which is max(0, p - q) normalised: the emitted token is distributed exactly as p_i.
Either way the target emits one token after the accepted run (the argmax or a draw from the
row after the last accepted draft), so a step yields 1 to k + 1 tokens.

Greedy rows follow the sampled rule for free: their p is one-hot on the argmax, so a draft is
accepted iff it is the argmax and the reject draw is the argmax again.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from localllm.engine.sampler import Sampler, SamplingRow
from localllm.engine.sampling_ops import logprobs_of

Logprob = tuple[float, list[tuple[int, float]]]  # (chosen logprob, top-N [(id, logprob)])


@dataclass
class VerifyItem:
    row0: int  # first of its 1 + len(drafts) logits rows
    drafts: list[int]
    row: SamplingRow  # the sequence's sampling row as of the step (before any draft)


@dataclass
class VerifyResult:
    tokens: list[int]  # accepted drafts, then the target's token
    logprobs: list[Logprob] | None  # one per token, when the request asked for logprobs


def _rows(item: VerifyItem) -> list[SamplingRow]:
    """The sampling rows of item's logits rows: row i has output + d_1..d_i (for penalties)."""
    r = item.row
    if not r.params.needs_penalties:
        return [r] * (len(item.drafts) + 1)
    out = list(r.output_ids)
    return [
        SamplingRow(r.params, r.seq_id, r.prompt_ids, out + item.drafts[:i])
        for i in range(len(item.drafts) + 1)
    ]


def _accepted_run(drafts: list[int], ok: list[bool]) -> int:
    a = 0
    while a < len(drafts) and ok[a]:
        a += 1
    return a


def verify(
    sampler: Sampler,
    logits: torch.Tensor,  # [S, V] logits of the step (grammar masks applied)
    items: list[VerifyItem],
) -> list[VerifyResult]:
    """Greedy rows whose argmax the device already has skip this: `verify_greedy`."""
    rows = [r for it in items for r in _rows(it)]
    index = [it.row0 + i for it in items for i in range(len(it.drafts) + 1)]
    idx = torch.tensor(index, device=logits.device)
    starts = _starts(items)  # first local row of each item
    if all(r.params.raw_argmax for r in rows):  # the raw argmax decides every row
        raw = logits.index_select(0, idx).float()  # [R, V], R = sum(1 + k)
        ids = raw.argmax(dim=-1).tolist()
        res = [
            verify_greedy(it.drafts, ids[s : s + len(it.drafts) + 1])
            for it, s in zip(items, starts)
        ]
        _attach_logprobs(raw, rows, starts, res)
        return res
    raw = logits.index_select(0, idx).float()  # [R, V], R = sum(1 + k)
    probs = sampler.probs(raw, rows)  # [R, V]; one-hot on the argmax for greedy rows
    tests = [s + i for s, it in zip(starts, items) for i in range(len(it.drafts))]  # tested rows
    drafts_t = torch.tensor(
        [d for it in items for d in it.drafts], device=probs.device, dtype=torch.int64
    )
    tests_t = torch.tensor(tests, device=probs.device, dtype=torch.int64)
    p_draft = probs[tests_t, drafts_t].tolist()  # p_i(d_{i+1}) per draft
    u = sampler.uniform([rows[j] for j in tests]).tolist()
    runs, j = [], 0
    for it in items:
        k = len(it.drafts)
        runs.append(_accepted_run(it.drafts, [u[j + i] < p_draft[j + i] for i in range(k)]))
        j += k
    final = [s + a for s, a in zip(starts, runs)]  # local row after each accepted run
    weights = probs[torch.tensor(final, device=probs.device)]  # [N, V]
    for n, (it, a) in enumerate(zip(items, runs)):
        if a < len(it.drafts):  # rejected: draw from p without the draft
            weights[n, it.drafts[a]] = 0.0
    last = sampler.sample_from_probs(weights, [rows[f] for f in final]).tolist()
    results = [VerifyResult(it.drafts[:a] + [t], None) for it, a, t in zip(items, runs, last)]
    _attach_logprobs(raw, rows, starts, results)
    return results


def _starts(items: list[VerifyItem]) -> list[int]:
    """Each item's first row in the [R, V] block of all items' rows."""
    out, n = [], 0
    for it in items:
        out.append(n)
        n += len(it.drafts) + 1
    return out


def verify_greedy(drafts: list[int], argmax: list[int]) -> VerifyResult:
    """The greedy rule: drafts d_1..d_k against the argmax of each of the k + 1 rows."""
    a = _accepted_run(drafts, [d == t for d, t in zip(drafts, argmax)])
    return VerifyResult(drafts[:a] + [argmax[a]], None)


def _attach_logprobs(
    raw: torch.Tensor, rows: list[SamplingRow], starts: list[int], results: list[VerifyResult]
) -> None:
    """Logprobs of each emitted token under its own row's raw distribution (as a plain step)."""
    want = [n for n, s in enumerate(starts) if rows[s].params.logprobs is not None]
    if not want:
        return
    local = [starts[n] + i for n in want for i in range(len(results[n].tokens))]
    toks = [t for n in want for t in results[n].tokens]
    sel = raw[torch.tensor(local, device=raw.device)]
    wanted = [rows[r].params.logprobs for r in local]
    lps = logprobs_of(sel, torch.tensor(toks, device=raw.device), wanted)
    assert lps is not None
    j = 0
    for n in want:
        m = len(results[n].tokens)
        results[n].logprobs = lps[j : j + m]
        j += m
