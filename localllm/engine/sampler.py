"""Batched sampling: penalties, temperature, top-k / top-p / min-p, per-sequence seeds, logprobs.

Per row, logits are processed in this order (vLLM semantics; llama.cpp's default chain applies
temperature last instead, which only changes how top-p/min-p see a tempered distribution):

  1. repetition penalty over prompt + output ids (positive logits divided, negative
     multiplied), then OpenAI frequency/presence penalties over output ids
  2. greedy rows (temperature 0 or top_k 1) stop here: token = argmax, ties -> lowest id
  3. temperature
  4. top-k: keep logits >= the k-th largest (ties at the boundary are all kept)
  5. top-p: keep the shortest prefix of the sorted distribution whose mass reaches top_p
            (a token is kept iff the mass strictly above it is < top_p; the top token always)
  6. min-p: drop tokens with p < min_p * p_max

Sampling uses the exponential race: token = argmax(p / q) with q ~ Exp(1) i.i.d. per token,
which is distributed exactly as multinomial(p) and needs no normalisation of p. Seeded rows
draw q from their own generator (seeded with params.seed on first use, keyed by seq_id), so
their tokens do not depend on the rest of the batch; unseeded rows share one generator.
Host syncs: none per row; `sample` syncs once to return token ids (and logprobs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from localllm.core import SamplingParams
from localllm.engine.sampling_ops import logprobs_of, min_p_, top_k_, top_p_

_TOP_P_OFF = 2.0  # top_p >= 1 never truncates; a threshold above any cumulative mass


@dataclass
class SamplingRow:
    """One row of logits to sample."""

    params: SamplingParams
    seq_id: int  # keys the per-sequence generator state
    prompt_ids: Sequence[int]  # for the repetition penalty
    output_ids: Sequence[int]  # for all penalties


@dataclass
class SampleResult:
    token_ids: list[int]  # one per row
    # per row: (chosen token's logprob, top-N [(id, logprob)] best first) under the model's raw
    # distribution; rows that did not ask get (chosen logprob, []); None if no row asked
    logprobs: list[tuple[float, list[tuple[int, float]]]] | None


@dataclass
class _Truncation:
    """Device tensors for steps 3-6, None where no row in the batch uses that step."""

    temperature: torch.Tensor | None  # [S, 1] float32, 1.0 for greedy rows
    top_k: torch.Tensor | None  # [S, 1] int64, 0 = off
    k_max: int
    top_p: torch.Tensor | None  # [S, 1] float32, _TOP_P_OFF = off
    log_min_p: torch.Tensor | None  # [S, 1] float32, -inf = off


class Sampler:
    def __init__(self, vocab_size: int, device: torch.device | str, seed: int = 0) -> None:
        self.vocab_size = vocab_size
        self.device = torch.device(device)
        self._shared = torch.Generator(device=self.device)
        self._shared.manual_seed(seed)
        self._seeded: dict[int, torch.Generator] = {}

    # ---- public API -------------------------------------------------------------------------

    def process_logits(self, logits: torch.Tensor, rows: list[SamplingRow]) -> torch.Tensor:
        """[S, V] raw logits -> [S, V] float32 processed logits (-inf = excluded); a copy."""
        self._check(logits, rows)
        out = logits.float().clone()
        pen = [i for i, r in enumerate(rows) if r.params.needs_penalties]
        if pen:
            self._apply_penalties(out, rows, pen)
        t = self._truncation(rows)
        if t.temperature is not None:
            out.div_(t.temperature)
        if t.top_k is not None:
            top_k_(out, t.top_k, t.k_max)
        if t.top_p is not None:
            top_p_(out, t.top_p)
        if t.log_min_p is not None:
            min_p_(out, t.log_min_p)
        return out

    def probs(self, logits: torch.Tensor, rows: list[SamplingRow]) -> torch.Tensor:
        """[S, V] the distribution each row samples from (one-hot on the argmax for greedy)."""
        processed = self.process_logits(logits, rows)
        probs = processed.softmax(dim=-1)
        greedy = [i for i, r in enumerate(rows) if r.params.greedy]
        if greedy:
            g = self.device_index(greedy)
            top = processed.index_select(0, g).argmax(dim=-1, keepdim=True)  # [G, 1]
            one_hot = torch.zeros(len(greedy), probs.shape[1], device=probs.device)
            probs.index_copy_(0, g, one_hot.scatter_(1, top, 1.0))
        return probs

    def sample(self, logits: torch.Tensor, rows: list[SamplingRow]) -> SampleResult:
        tokens = self.tokens(logits, rows)
        logprobs = logprobs_of(logits.float(), tokens, [r.params.logprobs for r in rows])
        return SampleResult(tokens.tolist(), logprobs)

    def tokens(self, logits: torch.Tensor, rows: list[SamplingRow]) -> torch.Tensor:
        """[S, V] logits -> [S] int64 token ids on the logits' device, without a host sync
        (`sample` without the logprobs and the copy to the host)."""
        self._check(logits, rows)
        raw = logits.float()
        if all(r.params.raw_argmax for r in rows):
            return raw.argmax(dim=-1)  # [S]
        processed = self.process_logits(raw, rows)
        return self._draw(processed, rows, lambda s: s.softmax(dim=-1))

    def sample_from_probs(self, probs: torch.Tensor, rows: list[SamplingRow]) -> torch.Tensor:
        """[S, V] non-negative weights (need not be normalised) -> [S] int64 token ids.

        Greedy rows take the argmax; the others run the exponential race with their generator.
        Speculative decoding's reject step passes p with the draft token zeroed.
        """
        self._check(probs, rows)
        return self._draw(probs.float(), rows, lambda s: s)

    def uniform(self, rows: list[SamplingRow]) -> torch.Tensor:
        """[S] float32 U[0, 1) draws, one per row from that row's generator (for acceptance)."""
        return self._random(rows, (), lambda t, g: t.uniform_(generator=g))

    def forget(self, seq_id: int) -> None:
        """Drop the generator state of a finished sequence."""
        self._seeded.pop(seq_id, None)

    # ---- drawing ----------------------------------------------------------------------------

    def _draw(
        self,
        scores: torch.Tensor,  # [S, V]
        rows: list[SamplingRow],
        to_probs: Callable[[torch.Tensor], torch.Tensor],
    ) -> torch.Tensor:
        """Argmax for greedy rows, exponential race over to_probs(scores) for the others."""
        sampled = [i for i, r in enumerate(rows) if not r.params.greedy]
        if len(sampled) == len(rows):
            return self._race(to_probs(scores), rows)
        tokens = scores.argmax(dim=-1)  # [S]
        if sampled:
            idx = self.device_index(sampled)
            drawn = self._race(to_probs(scores.index_select(0, idx)), [rows[i] for i in sampled])
            tokens.index_copy_(0, idx, drawn)
        return tokens

    def _race(self, probs: torch.Tensor, rows: list[SamplingRow]) -> torch.Tensor:
        # argmax(p / q), q ~ Exp(1): P(token i wins) = p_i / sum(p). q is clamped away from 0
        # so a masked token (p = 0) can never produce 0/0 = nan, which argmax would pick.
        q = self._random(rows, (probs.shape[1],), lambda t, g: t.exponential_(generator=g))
        q.clamp_min_(torch.finfo(q.dtype).tiny)
        return probs.div(q).argmax(dim=-1)

    def _random(
        self,
        rows: list[SamplingRow],
        shape: tuple[int, ...],
        fill: Callable[[torch.Tensor, torch.Generator], torch.Tensor],
    ) -> torch.Tensor:
        """[n, *shape] random draws: one call for all unseeded rows, one per seeded row."""
        out = torch.empty(len(rows), *shape, device=self.device)
        seeded = [j for j, r in enumerate(rows) if r.params.seed is not None]
        if not seeded:
            fill(out, self._shared)
            return out
        unseeded = [j for j, r in enumerate(rows) if r.params.seed is None]
        if unseeded:
            shared = fill(torch.empty(len(unseeded), *shape, device=self.device), self._shared)
            out.index_copy_(0, self.device_index(unseeded), shared)
        for j in seeded:
            fill(out[j], self._generator(rows[j]))
        return out

    def _generator(self, row: SamplingRow) -> torch.Generator:
        seed = row.params.seed
        if seed is None:
            return self._shared
        gen = self._seeded.get(row.seq_id)
        if gen is None:
            gen = torch.Generator(device=self.device)
            gen.manual_seed(seed)
            self._seeded[row.seq_id] = gen
        return gen

    # ---- batch tensors ----------------------------------------------------------------------

    def _to_device(self, t: torch.Tensor) -> torch.Tensor:
        """Host tensor -> self.device without blocking the host (pinned, async copy)."""
        if self.device.type == "cuda":
            return t.pin_memory().to(self.device, non_blocking=True)
        return t.to(self.device)

    def device_index(self, idx: list[int]) -> torch.Tensor:
        """int64 indices on the sampler's device, copied without blocking the host."""
        return self._to_device(torch.tensor(idx, dtype=torch.int64))

    def _truncation(self, rows: list[SamplingRow]) -> _Truncation:
        ps = [r.params for r in rows]
        live = [p for p in ps if not p.greedy]
        k_max = min(max((p.top_k for p in live), default=0), self.vocab_size)
        cols = [
            [1.0 if p.greedy else p.temperature for p in ps],
            [0.0 if p.greedy else float(min(p.top_k, self.vocab_size)) for p in ps],
            [_TOP_P_OFF if p.greedy or p.top_p >= 1.0 else p.top_p for p in ps],
            [0.0 if p.greedy else p.min_p for p in ps],
        ]
        packed = self._to_device(torch.tensor(cols, dtype=torch.float32).T.contiguous())  # [S, 4]
        use = (
            any(p.temperature != 1.0 for p in live),
            k_max > 0,
            any(p.top_p < 1.0 for p in live),
            any(p.min_p > 0.0 for p in live),
        )
        return _Truncation(
            temperature=packed[:, 0:1] if use[0] else None,
            top_k=packed[:, 1:2].long() if use[1] else None,
            k_max=k_max,
            top_p=packed[:, 2:3] if use[2] else None,
            log_min_p=packed[:, 3:4].log() if use[3] else None,
        )

    def _apply_penalties(self, logits: torch.Tensor, rows: list[SamplingRow], idx: list[int]):
        """In place on logits [S, V] for rows idx: repetition, then frequency and presence."""
        sub = [rows[i].params for i in idx]
        out_counts = self._counts([rows[i].output_ids for i in idx])  # [P, V]
        coef = self._to_device(
            torch.tensor(
                [[p.repetition_penalty, p.frequency_penalty, p.presence_penalty] for p in sub],
                dtype=torch.float32,
            )
        )  # [P, 3]
        rep, freq, pres = coef[:, 0:1], coef[:, 1:2], coef[:, 2:3]
        whole = len(idx) == logits.shape[0]
        rows_t = None if whole else self.device_index(idx)
        lg = logits if rows_t is None else logits.index_select(0, rows_t)  # [P, V]
        if any(p.repetition_penalty != 1.0 for p in sub):
            seen = (self._counts([rows[i].prompt_ids for i in idx]) + out_counts) > 0
            lg = torch.where(seen, torch.where(lg > 0, lg / rep, lg * rep), lg)
        lg = lg - freq * out_counts - pres * (out_counts > 0).float()
        if rows_t is None:
            logits.copy_(lg)
        else:
            logits.index_copy_(0, rows_t, lg)

    def _counts(self, id_lists: list[Sequence[int]]) -> torch.Tensor:
        """[P, V] float32 occurrence counts, built with one scatter_add_ over padded ids."""
        n, v = len(id_lists), self.vocab_size
        width = max((len(ids) for ids in id_lists), default=0)
        padded = np.full((n, max(width, 1)), v, dtype=np.int64)  # pad id v -> a dropped column
        for j, ids in enumerate(id_lists):
            a = np.asarray(ids, dtype=np.int64)
            padded[j, : a.size] = np.where((a >= 0) & (a < v), a, v)
        index = self._to_device(torch.from_numpy(padded))  # [P, L]
        ones = torch.ones(1, 1, device=self.device).expand_as(index)
        counts = torch.zeros(n, v + 1, device=self.device).scatter_add_(1, index, ones)
        return counts[:, :v]

    def _check(self, logits: torch.Tensor, rows: list[SamplingRow]) -> None:
        if logits.dim() != 2 or logits.shape[0] != len(rows):
            raise ValueError(f"expected logits [{len(rows)}, V], got {tuple(logits.shape)}")
        if logits.shape[1] != self.vocab_size:
            raise ValueError(f"logits have {logits.shape[1]} columns, vocab is {self.vocab_size}")
        if logits.device.type != self.device.type:
            raise ValueError(f"logits on {logits.device}, sampler on {self.device}")
