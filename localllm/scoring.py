"""Teacher-forced scoring: log-probabilities of a token sequence under the model (NLL, KV quality)."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from localllm.core import SamplingParams, SequenceState
from localllm.engine.scheduler_types import ScheduledBatch, ScheduledSeq
from localllm.errors import RequestError


@torch.inference_mode()
def prompt_logits(engine, ids: list[int], chunk: int = 512) -> Iterator[torch.Tensor]:
    """Logits of every position of ids, [n, vocab] per chunk of up to `chunk` tokens, prefilled
    through the paged KV cache (so int8/fp8 KV is exercised exactly as in generation)."""
    if len(ids) > engine.max_model_len:
        raise RequestError(f"{len(ids)} tokens exceed the context of {engine.max_model_len}")
    runner, bm = engine.runner, engine.block_manager
    seq = SequenceState("__score__", ids, SamplingParams(max_tokens=1))
    if not bm.allocate(seq, len(ids)):
        raise RequestError("not enough free KV blocks to score this text")
    try:
        for start in range(0, len(ids), chunk):
            n = min(chunk, len(ids) - start)
            fb, _ = runner.prepare(
                ScheduledBatch([ScheduledSeq(seq, start, n, [], needs_logits=False)])
            )
            fb.logits_indices = torch.arange(n, device=runner.device)
            yield runner.model.logits(runner.model.forward(fb, runner.kv))  # [n, V]
            seq.num_computed = start + n
    finally:
        bm.free(seq)


def token_logprobs(engine, ids: list[int], chunk: int = 512) -> torch.Tensor:
    """[len(ids) - 1] float32: log p(ids[i+1] | ids[:i+1])."""
    out = []
    for start, logits in zip(range(0, len(ids), chunk), prompt_logits(engine, ids, chunk)):
        with torch.inference_mode():
            targets = torch.tensor(ids[start + 1 : start + chunk + 1], device=logits.device)
            lp = torch.log_softmax(logits[: targets.numel()], dim=-1)
            out.append(lp.gather(1, targets[:, None])[:, 0].float().cpu())
    return torch.cat(out)


def mean_nll(engine, ids: list[int], window: int, chunk: int = 512) -> float:
    """Mean negative log-likelihood (nats/token) over ids cut into independent, non-overlapping
    windows of `window` tokens; the first token of each window is context only."""
    total, count = 0.0, 0
    for s in range(0, len(ids), window):
        w = ids[s : s + window]
        if len(w) < 2:
            break
        lp = token_logprobs(engine, w, chunk)
        total -= float(lp.sum())
        count += lp.numel()
    return total / count
