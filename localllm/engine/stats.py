"""Engine-wide counters and per-request timings (queue time, TTFT, TPOT)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from localllm.core import SequenceState
    from localllm.engine.block_manager import BlockManager
    from localllm.engine.scheduler import Scheduler


def request_stats(seq: SequenceState) -> dict:
    arrival = seq.arrival_time
    first = seq.first_token_time
    last = seq.last_token_time
    n = seq.num_output
    out = {
        "prompt_tokens": seq.prompt_len,
        "completion_tokens": n,
        "cached_prompt_tokens": seq.num_cached_prompt,
        "preemptions": seq.num_preemptions,
        "queue_time": (seq.scheduled_time - arrival) if seq.scheduled_time else None,
        "ttft": (first - arrival) if first else None,
        "tpot": ((last - first) / (n - 1)) if first and last and n > 1 else None,
    }
    if seq.spec_proposed:
        out["spec_acceptance"] = seq.spec_accepted / seq.spec_proposed
        out["spec_steps"] = seq.spec_steps  # verify steps: accepted / steps = mean run
    return out


@dataclass
class EngineStats:
    requests_received: int = 0
    requests_finished: int = 0
    requests_aborted: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    cached_prompt_tokens: int = 0
    preemptions: int = 0
    steps: int = 0
    step_time: float = 0.0
    spec_proposed: int = 0
    spec_accepted: int = 0
    steps_ahead: int = 0  # steps launched before the previous step's tokens were taken
    steps_early: int = 0  # steps launched before the previous step's events were made
    last: dict = field(default_factory=dict)  # stats of the most recently finished request

    def record_step(self, seconds: float) -> None:
        self.steps += 1
        self.step_time += seconds

    def record_verify(self, drafted: int, accepted: int) -> None:
        """One sequence's verify step (counted as it happens, so /metrics sees live numbers)."""
        self.spec_proposed += drafted
        self.spec_accepted += accepted

    def record_finished(self, seq: SequenceState) -> None:
        self.requests_finished += 1
        self.prompt_tokens += seq.prompt_len
        self.generated_tokens += seq.num_output
        self.cached_prompt_tokens += seq.num_cached_prompt
        self.last = request_stats(seq)

    @property
    def prefix_hit_rate(self) -> float:
        return self.cached_prompt_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


@dataclass(frozen=True)
class EngineSnapshot:
    """What front ends may read of a running engine (LLMEngine.snapshot(), on its thread)."""

    waiting: int  # requests waiting to be scheduled
    running: int  # requests in the running batch
    blocks_total: int  # KV blocks in the pool
    blocks_used: int  # referenced by running requests
    blocks_free: int  # allocatable now (free or evictable cached)
    blocks_cached: int  # holding prefix-cache entries
    block_hit_rate: float  # prefix-cache hits per block lookup
    token_hit_rate: float  # cached prompt tokens / prompt tokens of finished requests
    spec_proposed: int
    spec_accepted: int
    preemptions: int
    steps: int
    steps_ahead: int  # steps launched before the previous step's tokens were taken
    steps_early: int  # steps launched before the previous step's events were made
    requests_received: int
    requests_finished: int
    requests_aborted: int

    @classmethod
    def of(cls, scheduler: Scheduler, bm: BlockManager, s: EngineStats) -> EngineSnapshot:
        return cls(
            waiting=len(scheduler.waiting),
            running=len(scheduler.running),
            blocks_total=bm.num_blocks,
            blocks_used=bm.num_used_blocks,
            blocks_free=bm.num_free_blocks,
            blocks_cached=bm.num_cached_blocks,
            block_hit_rate=bm.hits / bm.queries if bm.queries else 0.0,
            token_hit_rate=s.prefix_hit_rate,
            spec_proposed=s.spec_proposed,
            spec_accepted=s.spec_accepted,
            preemptions=s.preemptions,
            steps=s.steps,
            steps_ahead=s.steps_ahead,
            steps_early=s.steps_early,
            requests_received=s.requests_received,
            requests_finished=s.requests_finished,
            requests_aborted=s.requests_aborted,
        )
