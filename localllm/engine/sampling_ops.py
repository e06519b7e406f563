"""The sampler's tensor steps over a batch of logits rows: top-k, top-p and min-p truncation
(in place, -inf = excluded) and the logprobs of the chosen and most likely tokens."""

from __future__ import annotations

import torch

NEG_INF = float("-inf")


def top_k_(logits: torch.Tensor, k: torch.Tensor, k_max: int) -> None:
    """In place: logits [S, V]; k [S, 1] int64, 0 = off. Keeps logits >= the k-th largest."""
    top = logits.topk(k_max, dim=-1).values  # [S, k_max] descending
    kth = top.gather(1, (k - 1).clamp(min=0))  # [S, 1]
    kth = kth.masked_fill(k == 0, NEG_INF)
    logits.masked_fill_(logits < kth, NEG_INF)


def top_p_(logits: torch.Tensor, top_p: torch.Tensor) -> None:
    """In place: logits [S, V]; top_p [S, 1]. Drops a token iff the mass above it >= top_p."""
    sorted_logits, order = logits.sort(dim=-1, descending=True)  # [S, V]
    p = sorted_logits.softmax(dim=-1)
    above = p.cumsum(dim=-1) - p  # mass strictly before each sorted token; 0 for the top one
    drop_sorted = above >= top_p
    drop_sorted[:, 0] = False  # the most likely token always stays (top_p may underflow to 0)
    drop = torch.empty_like(above, dtype=torch.bool).scatter_(1, order, drop_sorted)
    logits.masked_fill_(drop, NEG_INF)


def min_p_(logits: torch.Tensor, log_min_p: torch.Tensor) -> None:
    """In place: logits [S, V]; log_min_p [S, 1]. p < min_p * p_max <=> l < l_max + log(min_p)."""
    threshold = logits.amax(dim=-1, keepdim=True) + log_min_p  # [S, 1]
    logits.masked_fill_(logits < threshold, NEG_INF)


def logprobs_of(
    raw: torch.Tensor, tokens: torch.Tensor, wanted: list[int | None]
) -> list[tuple[float, list[tuple[int, float]]]] | None:
    """Chosen and top-N logprobs of log_softmax(raw logits) [S, V]; tokens [S]; wanted: N per
    row (None: the row did not ask)."""
    if all(n is None for n in wanted):
        return None
    lp = raw.log_softmax(dim=-1)  # [S, V]
    chosen = lp.gather(1, tokens[:, None])[:, 0].tolist()
    n_max = min(max(n or 0 for n in wanted), raw.shape[1])
    top_v, top_i = lp.topk(n_max, dim=-1) if n_max else (lp[:, :0], lp[:, :0].long())
    values, ids = top_v.tolist(), top_i.tolist()
    return [
        (chosen[s], list(zip(ids[s][: n or 0], values[s][: n or 0], strict=True)))
        for s, n in enumerate(wanted)
    ]
