"""Requests driven through the engine with every token's arrival time recorded: synchronously
over LLMEngine.step() (pp, tg, prefix, kv, spec: no thread between the clock and the GPU) and
through the AsyncEngine the server uses (serve)."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from localllm.core import SamplingParams, TokenEvent, Usage


@dataclass
class Trace:
    """One request's timeline (perf_counter seconds)."""

    submitted: float
    arrivals: list[float] = field(default_factory=list)  # one per event carrying tokens
    counts: list[int] = field(default_factory=list)  # tokens in each of those events
    ids: list[int] = field(default_factory=list)  # generated token ids
    usage: Usage | None = None
    finish_reason: str | None = None

    def add(self, ev: TokenEvent, now: float) -> None:
        if ev.token_ids:
            self.arrivals.append(now)
            self.counts.append(len(ev.token_ids))
            self.ids += ev.token_ids
        if ev.finished:
            self.usage, self.finish_reason = ev.usage, ev.finish_reason

    @property
    def tokens(self) -> int:
        return len(self.ids)

    @property
    def ttft(self) -> float:
        return self.arrivals[0] - self.submitted

    @property
    def gaps(self) -> list[float]:
        """Seconds between consecutive token-carrying events (inter-token latency)."""
        return [b - a for a, b in zip(self.arrivals, self.arrivals[1:])]

    @property
    def mean_itl(self) -> float | None:
        """(last - first token time) / (tokens - 1): the mean time per output token after the
        first, None for a one-token request."""
        if self.tokens < 2:
            return None
        return (self.arrivals[-1] - self.arrivals[0]) / (self.tokens - self.counts[0])

    @property
    def decode_rate(self) -> float:
        """Tokens per second after the first one."""
        return (self.tokens - self.counts[0]) / (self.arrivals[-1] - self.arrivals[0])


# plain decoding unless a scenario asks otherwise, as llama-bench measures it: n-gram drafts
# would inflate decode on random-weight models, whose outputs loop (spec measures speculation)
PLAIN: dict[str, Any] = (
    {"spec_tokens": 0} if any(f.name == "spec_tokens" for f in dataclasses.fields(SamplingParams)) else {}
)  # fmt: skip


def greedy(max_tokens: int, **kw: Any) -> SamplingParams:
    """Greedy decoding of exactly max_tokens tokens (EOS ignored): every run does the same work."""
    return SamplingParams(
        max_tokens=max_tokens, temperature=0.0, ignore_eos=True, **{**PLAIN, **kw}
    )


class Prompts:
    """Random prompts no earlier request has seen (so no prefix-cache hits), BOS first."""

    def __init__(self, engine, seed: int) -> None:
        self.rng = random.Random(seed)
        self.vocab = engine.model_cfg.vocab_size
        self.bos = engine.tokenizer.bos_id

    def make(self, n: int) -> list[int]:
        """n prompt tokens (n >= 1); with a BOS token first when the model has one."""
        ids = [self.rng.randrange(3, self.vocab) for _ in range(n)]
        return ([self.bos] + ids[:-1]) if self.bos is not None else ids


def run_sync(engine, prompts: Sequence[list[int]], params: SamplingParams | Sequence[SamplingParams]) -> list[Trace]:  # fmt: skip
    """Submit all prompts at once and step the engine until every request finished."""
    plist = list(params) if isinstance(params, Sequence) else [params] * len(prompts)
    t0 = time.perf_counter()
    ids = [engine.add_request(p, sp) for p, sp in zip(prompts, plist)]
    traces = {rid: Trace(t0) for rid in ids}
    while any(t.finish_reason is None for t in traces.values()):
        events = engine.step()
        now = time.perf_counter()
        for ev in events:
            if ev.request_id in traces:
                traces[ev.request_id].add(ev, now)
    return [traces[rid] for rid in ids]


async def stream(async_engine, prompt: list[int], params: SamplingParams, start: float) -> Trace:
    """One request through AsyncEngine.generate, submitted at perf_counter time `start`."""
    delay = start - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)
    trace = Trace(time.perf_counter())
    async for ev in async_engine.generate(prompt, params):
        trace.add(ev, time.perf_counter())
        if ev.error:
            raise RuntimeError(f"bench request failed: {ev.error}")
    return trace
