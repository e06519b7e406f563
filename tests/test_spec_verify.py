"""Acceptance rule: greedy runs, the sampled rule's output distribution, penalties, logprobs."""

from __future__ import annotations

import pytest
import torch
from scipy.stats import chisquare

from localllm.core import SamplingParams
from localllm.engine.sampler import Sampler, SamplingRow
from localllm.engine.speculative.verify import VerifyItem, verify, verify_greedy

V = 6


def row(params: SamplingParams, seq_id: int = 0, out: tuple[int, ...] = ()) -> SamplingRow:
    return SamplingRow(params, seq_id, (5,), out)


def test_greedy_accepts_while_equal_to_the_argmax() -> None:
    logits = torch.full((8, V), -1.0)
    argmax = [2, 3, 4, 1, 5, 0, 3, 3]
    logits[range(8), argmax] = 1.0
    greedy = SamplingParams(temperature=0.0)
    items = [
        VerifyItem(0, [2, 3, 0], row(greedy, 0)),  # 2 right, then a miss: [2, 3, 4]
        VerifyItem(4, [5, 0, 3], row(greedy, 1)),  # all right: the bonus token after them
    ]
    res = verify(Sampler(V, "cpu"), logits, items)
    assert [r.tokens for r in res] == [[2, 3, 4], [5, 0, 3, 3]]
    res2 = [verify_greedy(it.drafts, argmax[it.row0 : it.row0 + 4]) for it in items]
    assert [r.tokens for r in res2] == [[2, 3, 4], [5, 0, 3, 3]]


def test_greedy_with_penalties_sees_the_drafts_as_output() -> None:
    """Row 1 follows draft d_1: a repetition penalty must push its argmax off d_1."""
    logits = torch.tensor([[3.0, 2.9, 0, 0, 0, 0], [3.0, 2.9, 0, 0, 0, 0]])
    p = SamplingParams(temperature=0.0, repetition_penalty=1.5)
    sampler = Sampler(V, "cpu")
    res = verify(sampler, logits, [VerifyItem(0, [0], row(p))])
    # the plain sequential chain: token 0, then (0 is now output) token 1
    first = sampler.sample(logits[:1], [row(p)]).token_ids[0]
    second = sampler.sample(logits[1:], [row(p, out=(first,))]).token_ids[0]
    assert res[0].tokens == [first, second] == [0, 1]


def test_logprobs_of_every_emitted_token_match_a_plain_step() -> None:
    torch.manual_seed(0)
    logits = torch.randn(4, V)
    p = SamplingParams(temperature=0.0, logprobs=2)
    res = verify(Sampler(V, "cpu"), logits, [VerifyItem(1, [int(logits[1].argmax())], row(p))])
    assert len(res[0].tokens) == 2 and res[0].logprobs is not None and len(res[0].logprobs) == 2
    lsm = logits.log_softmax(-1)
    for i, (tok, (lp, top)) in enumerate(zip(res[0].tokens, res[0].logprobs)):
        assert lp == pytest.approx(float(lsm[1 + i, tok]), abs=1e-5)
        assert [t for t, _ in top] == lsm[1 + i].topk(2).indices.tolist()


def _draws(params: SamplingParams, logits: torch.Tensor, drafts: list[int], n: int, seed: int):
    """n independent verify steps of one [1 + k, V] logits block, batched into one call."""
    items = [VerifyItem(i * logits.shape[0], drafts, row(params, i)) for i in range(n)]
    big = logits.repeat(n, 1)
    return verify(Sampler(V, "cpu", seed=seed), big, items)


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=1.0),
        SamplingParams(temperature=0.7, top_k=4),
        SamplingParams(temperature=1.3, top_p=0.8, min_p=0.05),
    ],
    ids=["plain", "topk", "topp-minp"],
)
def test_sampled_tokens_follow_the_target_distribution(params: SamplingParams) -> None:
    """First token ~ p_0; given the first draft was accepted, the second ~ p_1 (chi-square)."""
    logits = torch.tensor(
        [[1.0, 0.2, -0.5, 1.4, 0.0, -2.0], [0.1, 1.5, 0.3, -1.0, 0.9, 0.0], [0.0] * V]
    )
    drafts = [0, 4]  # a likely-ish first draft, a plausible second
    n = 6000
    res = _draws(params, logits, drafts, n, seed=1234)
    sampler = Sampler(V, "cpu")
    p = sampler.probs(logits, [row(params)] * 3)  # [3, V] the target's distributions
    first = torch.bincount(torch.tensor([r.tokens[0] for r in res]), minlength=V).double()
    _check_counts(first, p[0].double())
    second = [r.tokens[1] for r in res if r.tokens[0] == drafts[0]]
    counts = torch.bincount(torch.tensor(second), minlength=V).double()
    _check_counts(counts, p[1].double())
    accepted = sum(len(r.tokens) - 1 for r in res)
    assert accepted > 0.3 * n  # the run really accepts drafts (not only the reject path)


def _check_counts(counts: torch.Tensor, p: torch.Tensor) -> None:
    n = counts.sum()
    live = p > 0
    assert counts[~live].sum() == 0, "a token outside the target's support was emitted"
    stat = chisquare(counts[live].numpy(), (p[live] / p[live].sum() * n).numpy())
    assert stat.pvalue > 1e-3, f"chi-square p={stat.pvalue:.2e}: {counts.tolist()} vs {p.tolist()}"
    tv = 0.5 * (counts / n - p).abs().sum()
    assert tv < 0.03


def test_a_rejected_draft_is_never_emitted_when_the_target_gives_it_no_mass() -> None:
    logits = torch.tensor([[0.0, 0.0, -float("inf"), 0.0, 0.0, 0.0], [0.0] * V])
    res = _draws(SamplingParams(temperature=1.0), logits, [2], 500, seed=3)
    assert all(r.tokens[0] != 2 and len(r.tokens) == 1 for r in res)


def test_a_sure_draft_is_always_accepted() -> None:
    logits = torch.tensor([[0.0, 30.0, 0.0, 0.0, 0.0, 0.0], [0.0] * V])
    res = _draws(SamplingParams(temperature=1.0, top_p=0.5), logits, [1], 300, seed=4)
    assert all(r.tokens[0] == 1 and len(r.tokens) == 2 for r in res)
